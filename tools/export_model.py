#!/usr/bin/env python3
"""Exports a torchvision or timm ResNet / ResNeXt / Wide-ResNet to video-classifier's format: a .safetensors file of
its state_dict (torchvision/timm names) plus a ready config. ImageNet-1k labels ship in assets/labels/imagenet-1k.txt.

  python3 tools/export_model.py resnet50                  # torchvision, pretrained weights (downloaded by PyTorch)
  python3 tools/export_model.py resnet50.a1_in1k --timm   # a timm model
  python3 tools/export_model.py resnext50_32x4d --random  # random weights (BatchNorm statistics calibrated), no download

Writes models/NAME.safetensors and models/NAME.yaml (use: video-classifier --config models/NAME.yaml --input /dev/video0).
"""
import argparse
import json
import os

from requires import require  # noqa: E402

torch, safetensors_torch = require("torch", "safetensors.torch")
save_file = safetensors_torch.save_file

KNOWN_ARCHITECTURES = {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
                       "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2"}
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def build(name, use_timm, random_weights):
    if use_timm:
        import timm
        return timm.create_model(name, pretrained=not random_weights)
    import torchvision
    factory = getattr(torchvision.models, name, None)
    if factory is None:
        raise SystemExit(f"torchvision has no model '{name}'")
    return factory(weights=None if random_weights else "DEFAULT")


def calibrate_batchnorm(model, size=224, batches=4):
    """Random weights: give BatchNorm realistic running statistics (and the residual branches small gains, as in
    trained nets) so activations stay in FP16 range, like a trained model's."""
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            if name.endswith(("bn3", "bn2")) and not name.startswith("bn"):
                m.weight.data.uniform_(0.1, 0.3)
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(8, 3, size, size))
    model.eval()


def export(name, out_dir, use_timm=False, random_weights=False, fp16=False):
    model = build(name, use_timm, random_weights).eval()
    if random_weights:
        calibrate_batchnorm(model)
    state = {}
    for key, tensor in model.state_dict().items():
        if key.endswith("num_batches_tracked"):
            continue
        tensor = tensor.detach().cpu().contiguous()
        first_or_last = key.startswith("conv1.") or key.startswith("fc.")
        state[key] = tensor.half() if fp16 and not first_or_last else tensor.float()
    os.makedirs(out_dir, exist_ok=True)
    stem = name.replace("/", "_")
    weights = os.path.join(out_dir, f"{stem}.safetensors")
    # The model card: how the model wants its input, and its labels. video-classifier uses these unless the
    # configuration sets them, so `video-classifier --model THIS.safetensors --input …` alone does the right thing.
    classes = state["fc.weight"].shape[0]
    labels_file = os.path.join(REPO, "assets", "labels", "imagenet-1k.txt")
    card = {"input_size": "224", "resize": "crop", "crop_ratio": "0.875", "mean": json.dumps([0.485, 0.456, 0.406]),
            "std": json.dumps([0.229, 0.224, 0.225]), "architecture": name.split(".")[0] if not use_timm else "auto"}
    if classes == 1000 and os.path.exists(labels_file):
        with open(labels_file, encoding="utf-8") as f:
            card["labels"] = json.dumps([line.rstrip("\n") for line in f if line.strip()], ensure_ascii=False)
    if card["architecture"] not in KNOWN_ARCHITECTURES:
        card.pop("architecture")  # the app infers it from the tensor shapes
    save_file(state, weights, metadata={"source": "timm" if use_timm else "torchvision", "name": name,
                                        "weights": "random" if random_weights else "pretrained", **card})
    config = os.path.join(out_dir, f"{stem}.yaml")
    with open(config, "w") as f:
        # Paths in a config file are relative to its own directory; the model file carries its preprocessing and labels.
        f.write(f"# {name} ({'timm' if use_timm else 'torchvision'}), exported by tools/export_model.py\n"
                f"model:\n  weights: {os.path.basename(weights)}\n"
                f"input:\n  kind: webcam\n  device: /dev/video0\noutput:\n  kind: display\n")
    return model, weights, config


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="torchvision name (resnet18 … resnet152, resnext50_32x4d, wide_resnet50_2, …) or timm name")
    parser.add_argument("--timm", action="store_true", help="take the model from timm")
    parser.add_argument("--random", action="store_true", help="random weights (no download)")
    parser.add_argument("--fp16", action="store_true", help="store all but the first and last layers in FP16 (half the size)")
    parser.add_argument("--out", default="models")
    args = parser.parse_args()
    _, weights, config = export(args.name, args.out, args.timm, args.random, args.fp16)
    print(f"wrote {weights} ({os.path.getsize(weights) / 1e6:.1f} MB) and {config}\n"
          f"run: build/app/video-classifier --config {config}")


if __name__ == "__main__":
    main()
