#!/usr/bin/env python3
"""Trains the bundled default model: a standard torchvision ResNet-18 (10 classes) on Fashion-MNIST, fed the way
video-classifier feeds it — grey items turned RGB, placed on a black square at the model input size, bilinearly
resampled, normalized with the app's mean/std — with scale, shift and brightness/contrast augmentation so that it
holds up on real video frames. Writes the weights as safetensors (conv1 and fc in FP32, the rest FP16: ~22 MB)
and prints the test accuracy.

Usage (on a GPU machine with torch + torchvision; ~1 min on an H200):
  python3 tools/train_default_model.py --data /usr/share/datasets/fashion-mnist \
      --out assets/models/resnet18-fashion-mnist.safetensors
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fashion"))
import fashion_mnist  # noqa: E402

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)  # the app's default model.mean / model.std
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def place(images, size, scale, shift_x, shift_y, brightness, contrast):
    """uint8 [B,28,28] -> normalized float [B,3,size,size]: each item scaled to `scale` of the square, shifted,
    bilinearly resampled onto black (zeros), then brightness/contrast, grey to RGB, mean/std."""
    b = images.shape[0]
    x = images.float().unsqueeze(1) / 255.0
    theta = torch.zeros(b, 2, 3, device=x.device)
    theta[:, 0, 0] = 1.0 / scale
    theta[:, 1, 1] = 1.0 / scale
    theta[:, 0, 2] = -shift_x / scale
    theta[:, 1, 2] = -shift_y / scale
    grid = F.affine_grid(theta, (b, 1, size, size), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    x = ((x - 0.5) * contrast.view(-1, 1, 1, 1) + 0.5 + brightness.view(-1, 1, 1, 1)).clamp(0, 1)
    x = x.expand(-1, 3, -1, -1)
    return (x - MEAN.to(x.device)) / STD.to(x.device)


def augment_params(b, device, train):
    if not train:  # how the sample video shows items: centred, 70% of the square
        one = torch.ones(b, device=device)
        return 0.7 * one, 0 * one, 0 * one, 0 * one, one
    u = lambda lo, hi: lo + (hi - lo) * torch.rand(b, device=device)  # noqa: E731
    return u(0.5, 0.9), u(-0.15, 0.15), u(-0.15, 0.15), u(-0.1, 0.1), u(0.8, 1.2)


def evaluate(model, images, labels, size, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast(images.device.type, dtype=torch.bfloat16, enabled=images.is_cuda):
        for i in range(0, len(images), batch):
            x = place(images[i:i + batch], size, *augment_params(len(images[i:i + batch]), images.device, False))
            correct += (model(x.contiguous(memory_format=torch.channels_last)).argmax(1) == labels[i:i + batch]).sum().item()
    return correct / len(images)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    parser.add_argument("--out", default="assets/models/resnet18-fashion-mnist.safetensors")
    parser.add_argument("--size", type=int, default=128, help="model input size (the app's model.input_size)")
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="use only this many training images (smoke tests)")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train_x, train_y = fashion_mnist.load("train", args.data)
    test_x, test_y = fashion_mnist.load("t10k", args.data)
    if args.limit:
        train_x, train_y, test_x, test_y = train_x[:args.limit], train_y[:args.limit], test_x[:args.limit], test_y[:args.limit]
    train_x, train_y = torch.from_numpy(train_x.copy()).to(device), torch.from_numpy(train_y.astype(np.int64)).to(device)
    test_x, test_y = torch.from_numpy(test_x.copy()).to(device), torch.from_numpy(test_y.astype(np.int64)).to(device)

    model = torchvision.models.resnet18(num_classes=10).to(device).to(memory_format=torch.channels_last)
    steps_per_epoch = math.ceil(len(train_x) / args.batch)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, args.lr, total_steps=args.epochs * steps_per_epoch,
                                                   pct_start=0.2)
    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(train_x), device=device)
        total_loss = 0.0
        for step in range(steps_per_epoch):
            idx = order[step * args.batch:(step + 1) * args.batch]
            x = place(train_x[idx], args.size, *augment_params(len(idx), device, True))
            flip = torch.rand(len(idx), device=device) < 0.5  # left-right mirror: clothes stay clothes
            x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)
            with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
                loss = F.cross_entropy(model(x.contiguous(memory_format=torch.channels_last)), train_y[idx],
                                       label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            total_loss += loss.item()
        accuracy = evaluate(model, test_x, test_y, args.size) if device == "cuda" or epoch == args.epochs - 1 else float("nan")
        print(f"epoch {epoch + 1}/{args.epochs}: loss {total_loss / steps_per_epoch:.4f}, "
              f"test accuracy {accuracy:.4f} ({time.time() - start:.0f} s)", flush=True)

    accuracy = evaluate(model, test_x, test_y, args.size)
    state = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        keep_fp32 = name.startswith("conv1.") or name.startswith("fc.")  # first and last layers stay FP32
        state[name] = tensor.detach().float().cpu().contiguous() if keep_fp32 else tensor.detach().half().cpu().contiguous()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    # The model card the app reads: its preprocessing (letterbox at args.size, ImageNet normalization) and labels.
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "assets", "labels", "fashion-mnist.txt"),
              encoding="utf-8") as f:
        labels = [line.strip() for line in f if line.strip()]
    meta = {"architecture": "resnet18", "dataset": "fashion-mnist", "input_size": str(args.size), "resize": "letterbox",
            "mean": json.dumps([0.485, 0.456, 0.406]), "std": json.dumps([0.229, 0.224, 0.225]),
            "labels": json.dumps(labels), "test_accuracy": f"{accuracy:.4f}", "epochs": str(args.epochs),
            "seed": str(args.seed)}
    save_file(state, args.out, metadata=meta)
    print(json.dumps({"test_accuracy": accuracy, "out": args.out, "bytes": os.path.getsize(args.out),
                      "seconds": round(time.time() - start, 1)}))


if __name__ == "__main__":
    main()
