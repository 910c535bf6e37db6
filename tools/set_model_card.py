#!/usr/bin/env python3
"""Writes the model card (how the model wants its input) into a .safetensors file's __metadata__.

video-classifier reads these keys and uses them unless the configuration sets them explicitly:
input_size, resize (crop | letterbox | stretch), crop_ratio, mean, std, labels, architecture.
Only the JSON header is rewritten; the tensor data is copied unchanged. Standard library only.

  python3 tools/set_model_card.py MODEL.safetensors --input-size 128 --resize letterbox \\
      --labels assets/labels/fashion-mnist.txt --architecture resnet18
"""
import argparse
import json
import os
import struct
import sys
import tempfile


def read_header(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            sys.exit(f"{path}: not a safetensors file (too short)")
        (length,) = struct.unpack("<Q", raw)
        if length > 100 * 1024 * 1024:
            sys.exit(f"{path}: not a safetensors file (header length {length})")
        try:
            header = json.loads(f.read(length))
        except ValueError as e:
            sys.exit(f"{path}: not a safetensors file ({e})")
    return header, 8 + length


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--input-size", type=int)
    p.add_argument("--resize", choices=["crop", "letterbox", "stretch"])
    p.add_argument("--crop-ratio", type=float)
    p.add_argument("--mean", type=float, nargs=3)
    p.add_argument("--std", type=float, nargs=3)
    p.add_argument("--labels", help="labels file, one class name per line")
    p.add_argument("--architecture")
    p.add_argument("--show", action="store_true", help="print the card and change nothing")
    a = p.parse_args()

    header, data_start = read_header(a.model)
    meta = dict(header.get("__metadata__", {}))
    if a.show:
        print(json.dumps(meta, indent=2))
        return
    if a.input_size is not None:
        meta["input_size"] = str(a.input_size)
    if a.resize:
        meta["resize"] = a.resize
    if a.crop_ratio is not None:
        meta["crop_ratio"] = repr(a.crop_ratio)
    if a.mean:
        meta["mean"] = json.dumps(a.mean)
    if a.std:
        meta["std"] = json.dumps(a.std)
    if a.labels:
        with open(a.labels, encoding="utf-8") as f:
            names = [line.rstrip("\r\n") for line in f]
        while names and not names[-1]:
            names.pop()
        meta["labels"] = json.dumps(names, ensure_ascii=False)
    if a.architecture:
        meta["architecture"] = a.architecture
    header["__metadata__"] = meta

    encoded = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)  # keep the data 8-byte aligned, as safetensors writers do
    directory = os.path.dirname(os.path.abspath(a.model))
    with open(a.model, "rb") as src, tempfile.NamedTemporaryFile("wb", dir=directory, delete=False) as dst:
        dst.write(struct.pack("<Q", len(encoded)))
        dst.write(encoded)
        src.seek(data_start)
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    os.chmod(dst.name, os.stat(a.model).st_mode & 0o777)
    os.replace(dst.name, a.model)
    print(f"{a.model}: card {json.dumps({k: v for k, v in meta.items() if k != 'labels'})}"
          f"{', ' + str(len(json.loads(meta['labels']))) + ' labels' if 'labels' in meta else ''}")


if __name__ == "__main__":
    main()
