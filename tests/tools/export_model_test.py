#!/usr/bin/env python3
"""tools/export_model.py, end to end: without a network it says so in one line and names the ways out; one's own
.pth (a checkpoint of a DataParallel model) with a labels file becomes a model file whose card carries those labels,
created with the umask's mode, and a config that runs anywhere — run through the app here. Needs torch, torchvision
and safetensors (tools/requirements.txt): run with that environment's python; exit 77 (skipped) without them.

    python tests/tools/export_model_test.py --app build/app/video-classifier
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPORT = ROOT / "tools" / "export_model.py"


def check(condition, what):
    if not condition:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    args = parser.parse_args()
    try:
        import torch
        import torchvision
        from safetensors import safe_open
    except ImportError as e:
        print(f"skipped: {e.name} is not installed (tools/requirements.txt)")
        return 77
    work = Path(tempfile.mkdtemp(prefix="vc-export-"))
    os.umask(0o022)

    # No network (every download through a proxy that is not there): one line, and what to do instead.
    env = dict(os.environ, TORCH_HOME=str(work / "torch-home"), HTTP_PROXY="http://127.0.0.1:9",
               HTTPS_PROXY="http://127.0.0.1:9", http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    r = subprocess.run([sys.executable, str(EXPORT), "resnet18", "--out", str(work / "offline")], env=env,
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 1, f"offline export exit {r.returncode}: {r.stderr}")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    check(len(lines) == 1 and "could not download" in lines[0] and "--random" in lines[0] and "--weights" in lines[0]
          and "resnet18-f37072fd.pth" in lines[0] and "checkpoints" in lines[0], f"offline export said: {r.stderr}")

    # One's own weights: a DataParallel checkpoint of a 3-class ResNet-18, its labels in a file.
    model = torchvision.models.resnet18(num_classes=3).eval()
    torch.save({"epoch": 7, "state_dict": {"module." + k: v for k, v in model.state_dict().items()}}, work / "mine.pth")
    (work / "mine.txt").write_text("cat\ndog\nbird\n")
    r = subprocess.run([sys.executable, str(EXPORT), "resnet18", "--weights", str(work / "mine.pth"), "--labels",
                        str(work / "mine.txt"), "--out", str(work / "models")], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"export of own weights: {r.stderr}")
    weights, config = work / "models" / "resnet18.safetensors", work / "models" / "resnet18.yaml"
    check(weights.stat().st_mode & 0o777 == 0o644, f"model file mode {oct(weights.stat().st_mode & 0o777)}, umask 022")
    with safe_open(str(weights), "pt") as f:
        meta = f.metadata()
        check(json.loads(meta["labels"]) == ["cat", "dog", "bird"], f"labels in the card: {meta.get('labels')}")
        check(meta["weights"] != "random", "own weights marked random")
        check(torch.equal(f.get_tensor("fc.weight"), model.state_dict()["fc.weight"]), "fc.weight changed on the way")
    text = config.read_text()
    check(text.endswith("\n") and "kind: file" in text and "/dev/video0" not in text.split("model:")[1],
          f"the config does not run anywhere:\n{text}")
    # The config runs as written (the sample video in, files out), the labels from the file.
    r = subprocess.run([str(Path(args.app).resolve()), "--config", str(config), "--set", "input.max_frames=3",
                        "--set", "inference.device=cpu"], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"the exported config's run: exit {r.returncode}: {r.stderr[-2000:]}")
    # (its outputs go into out/ beside models/, not among the models)
    results = [json.loads(line) for line in (work / "out" / "resnet18-results.jsonl").read_text().splitlines()]
    check(any(x.get("top", [{}])[0].get("label") in ("cat", "dog", "bird") for x in results), "labels not from the file")

    # A labels file that does not fit, and a random model the app warns about.
    (work / "two.txt").write_text("a\nb\n")
    r = subprocess.run([sys.executable, str(EXPORT), "resnet18", "--weights", str(work / "mine.pth"), "--labels",
                        str(work / "two.txt"), "--out", str(work / "bad")], capture_output=True, text=True, timeout=300)
    check(r.returncode == 1 and "2 labels for a model of 3 classes" in r.stderr, f"mismatched labels: {r.stderr}")
    r = subprocess.run([sys.executable, str(EXPORT), "resnet18", "--random", "--out", str(work / "random")],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"random export: {r.stderr}")
    r = subprocess.run([str(Path(args.app).resolve()), "--config", str(work / "random" / "resnet18.yaml"), "--set",
                        "input.max_frames=1", "--set", "inference.device=cpu"], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0 and "weights are random" in r.stderr, f"no warning for random weights: {r.stderr[-1500:]}")
    print("export_model: offline message, own .pth with labels, umask, a config that runs anywhere, random warned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
