#!/usr/bin/env python3
"""Exports a torchvision or timm ResNet / ResNeXt / Wide-ResNet to video-classifier's format: a .safetensors file of
its state_dict (torchvision/timm names) plus a ready config. ImageNet-1k labels ship in assets/labels/imagenet-1k.txt.

  python3 tools/export_model.py resnet50                  # torchvision, pretrained weights (downloaded by PyTorch)
  python3 tools/export_model.py resnet50.a1_in1k --timm   # a timm model
  python3 tools/export_model.py resnext50_32x4d --random  # random weights (BatchNorm statistics calibrated), no download
  python3 tools/export_model.py resnet18 --weights mine.pth --labels mine.txt   # your own trained weights

Writes models/NAME.safetensors and models/NAME.yaml, a config that runs anywhere: the sample video in, a labelled
video and its results out, into out/ beside models/ (video-classifier --config models/NAME.yaml; for the webcam:
--input /dev/video0 --output display). Files follow the umask.
"""
import argparse
import contextlib
import io
import json
import os
import sys

from requires import require  # noqa: E402

torch, safetensors_torch = require("torch", "safetensors.torch")
save_file = safetensors_torch.save_file

KNOWN_ARCHITECTURES = {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
                       "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2"}
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def fail(message):
    sys.stderr.write(f"export_model.py: {message}\n")
    sys.exit(1)


def load_state_dict(path):
    """A .pth / .pt file: a state dict, or a checkpoint holding one ("state_dict", "model"), or a whole model; keys
    of a DataParallel model ("module.") unwrapped."""
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError, ValueError) as e:
        fail(f"{path}: cannot read it as a PyTorch file: {e}")
    if isinstance(loaded, torch.nn.Module):
        loaded = loaded.state_dict()
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(loaded, dict) and isinstance(loaded.get(key), dict):
            loaded = loaded[key]
    if not isinstance(loaded, dict) or not all(torch.is_tensor(v) for v in loaded.values()):
        fail(f"{path}: holds no state dict (a mapping of parameter names to tensors)")
    return {k[7:] if k.startswith("module.") else k: v for k, v in loaded.items()}


def build(name, use_timm, random_weights, weights_file=None):
    if weights_file:
        state = load_state_dict(weights_file)
        if "fc.weight" not in state:
            fail(f"{weights_file}: no fc.weight: not a ResNet's state dict")
        classes = state["fc.weight"].shape[0]
        if use_timm:
            import timm
            model = timm.create_model(name, pretrained=False, num_classes=classes)
        else:
            import torchvision
            factory = getattr(torchvision.models, name, None)
            if factory is None:
                fail(f"torchvision has no model '{name}'")
            model = factory(weights=None, num_classes=classes)
        try:
            model.load_state_dict(state)
        except RuntimeError as e:
            fail(f"{weights_file} does not fit {name}: {str(e).splitlines()[0]}")
        return model
    if use_timm:
        import timm
        try:
            return timm.create_model(name, pretrained=not random_weights)
        except (OSError, RuntimeError) as e:
            fail(f"could not download {name}'s pretrained weights ({type(e).__name__}: {str(e).splitlines()[0]}): "
                 "use --random, or --weights FILE.pth")
    import torchvision
    factory = getattr(torchvision.models, name, None)
    if factory is None:
        fail(f"torchvision has no model '{name}'")
    if random_weights:
        return factory(weights=None)
    weights = torchvision.models.get_model_weights(factory).DEFAULT
    cached = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(weights.url))
    # PyTorch says "Downloading: …" before it tries; said only once the download has worked (offline, one line).
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            model = factory(weights=weights)
    except (OSError, RuntimeError) as e:  # URLError is an OSError: no network, a proxy, a firewall
        fail(f"could not download {name}'s pretrained weights ({type(e).__name__}: {str(e).splitlines()[0]}): "
             f"use --random, or --weights FILE.pth, or put {os.path.basename(weights.url)} (from {weights.url}) at "
             f"{cached}")
    sys.stderr.write(said.getvalue())
    return model


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


def follow_umask(path):
    """safetensors writes its files 0600: give them the mode any new file gets here."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def export(name, out_dir, use_timm=False, random_weights=False, fp16=False, weights_file=None, labels_file=None):
    model = build(name, use_timm, random_weights, weights_file).eval()
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
    card = {"input_size": "224", "resize": "crop", "crop_ratio": "0.875", "mean": json.dumps([0.485, 0.456, 0.406]),
            "std": json.dumps([0.229, 0.224, 0.225]), "architecture": name.split(".")[0] if not use_timm else "auto"}
    imagenet = os.path.join(REPO, "assets", "labels", "imagenet-1k.txt")
    if labels_file is None and classes == 1000 and not weights_file and os.path.exists(imagenet):
        labels_file = imagenet
    if labels_file:
        with open(labels_file, encoding="utf-8") as f:
            labels = [line.rstrip("\n") for line in f if line.strip()]
        if len(labels) != classes:
            fail(f"{labels_file}: {len(labels)} labels for a model of {classes} classes")
        card["labels"] = json.dumps(labels, ensure_ascii=False)
    if card["architecture"] not in KNOWN_ARCHITECTURES:
        card.pop("architecture")  # the app infers it from the tensor shapes
    kind = "random" if random_weights else ("own: " + os.path.basename(weights_file)) if weights_file else "pretrained"
    save_file(state, weights, metadata={"source": "timm" if use_timm else "torchvision", "name": name,
                                        "weights": "random" if random_weights else kind, **card})
    follow_umask(weights)
    config = os.path.join(out_dir, f"{stem}.yaml")
    sample = os.path.relpath(os.path.join(REPO, "assets", "video", "fashion-mnist-sample.mp4"), os.path.abspath(out_dir))
    with open(config, "w") as f:
        # Paths in a config file are relative to its own directory; the model file carries its preprocessing and labels.
        # File in, file out: it runs on any machine (no camera, no display needed).
        f.write(f"# {name} ({'timm' if use_timm else 'torchvision'}, {kind} weights), exported by tools/export_model.py.\n"
                f"# Runs anywhere: the sample video in, a labelled video and JSON-lines results out. The webcam, in a window:\n"
                f"#   video-classifier --config {os.path.basename(config)} --input /dev/video0 --output display\n"
                f"model:\n  weights: {os.path.basename(weights)}\n"
                f"input:\n  kind: file\n  path: {sample}\n"
                f"output:\n  kind: file\n  path: ../out/{stem}-labelled.mp4\n  results: ../out/{stem}-results.jsonl\n")
    return model, weights, config


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="torchvision name (resnet18 … resnet152, resnext50_32x4d, wide_resnet50_2, …) or timm name")
    parser.add_argument("--timm", action="store_true", help="take the model from timm")
    parser.add_argument("--random", action="store_true", help="random weights (no download)")
    parser.add_argument("--weights", help="your own weights: a .pth/.pt state dict or checkpoint of this architecture")
    parser.add_argument("--labels", help="a labels file (one per line, in class order) for the model card")
    parser.add_argument("--fp16", action="store_true", help="store all but the first and last layers in FP16 (half the size)")
    parser.add_argument("--out", default="models")
    args = parser.parse_args()
    if args.random and args.weights:
        fail("--random and --weights exclude each other")
    _, weights, config = export(args.name, args.out, args.timm, args.random, args.fp16, args.weights, args.labels)
    print(f"wrote {weights} ({os.path.getsize(weights) / 1e6:.1f} MB) and {config}\n"
          f"run: build/app/video-classifier --config {config}")


if __name__ == "__main__":
    main()
