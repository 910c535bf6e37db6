#!/usr/bin/env python3
"""Checks exported models end to end on the GPU machine: for each architecture, random weights (calibrated
BatchNorm) are exported with tools/export_model.py, random images are preprocessed the torchvision way and rounded to
FP16, and PyTorch's top-1 (FP32) is compared with video-classifier's cuDNN engine (tools/infer_tensors) on exactly
those inputs. Prints a table; exits 1 if any top-1 differs.

Usage: python3 tools/verify_export.py [--infer build/tools/infer_tensors] [--batch 16]
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from requires import require  # noqa: E402

torch, safetensors_torch = require("torch", "safetensors.torch")
load_file, save_file = safetensors_torch.load_file, safetensors_torch.save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_model  # noqa: E402

NAMES = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "wide_resnet50_2"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--infer", default="infer_tensors")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--names", default=",".join(NAMES))
    parser.add_argument("--device", default="cuda", help="engine to check: cuda (cuDNN) or cpu (reference)")
    args = parser.parse_args()
    torch.manual_seed(0)
    failures = 0
    print(f"{'model':<18} {'images':>6} {'top-1 agree':>12} {'rel. error':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names.split(","):
            model, weights, _ = export_model.export(name, tmp, random_weights=True)
            images = torch.randint(0, 256, (args.batch, 3, 224, 224)).float() / 255
            mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
            std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
            x = ((images - mean) / std).half().float()  # what our FP16 input tensor holds
            with torch.no_grad():
                want = model.float()(x)
            inp, out = os.path.join(tmp, "input.safetensors"), os.path.join(tmp, "logits.safetensors")
            save_file({"input": x.permute(0, 2, 3, 1).contiguous().half()}, inp)
            subprocess.run([args.infer, "--model", weights, "--input", inp, "--output", out, "--device", args.device],
                           check=True,
                           stdout=subprocess.DEVNULL)
            got = load_file(out)["logits"]
            agree = (got.argmax(1) == want.argmax(1)).sum().item()
            err = ((got - want).norm() / want.norm()).item()
            failures += agree != args.batch
            print(f"{name:<18} {args.batch:>6} {agree:>9}/{args.batch:<2} {err:>11.2e}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
