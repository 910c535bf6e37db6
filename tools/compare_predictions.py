#!/usr/bin/env python3
"""Compares the app's top-1 on a set of images with tools/train.py's (--predictions) on the same images: the share of
images on which the two agree, and the ones on which they do not.

  python3 tools/compare_predictions.py --results app.jsonl --predictions pytorch.jsonl [--min 99.9]

app.jsonl: `video-classifier --input DIR/val/LABEL … --set output.results=app.jsonl` (each line's "source" is the image).
Exit 1 when the agreement is below --min (percent), or when an image has no result on one side.
"""
import argparse
import json
import os
import sys


def read(path, key):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            j = json.loads(line)
            if key == "source":
                if "top" not in j or not j["top"]:
                    continue
                out[os.path.realpath(j["source"])] = j["top"][0]["label"]
            else:
                out[os.path.realpath(j["image"])] = j["label"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, help="the app's results (JSON lines)")
    parser.add_argument("--predictions", required=True, help="train.py --predictions FILE")
    parser.add_argument("--min", type=float, default=0.0, help="the least agreement that passes, in percent")
    args = parser.parse_args()
    app, torch = read(args.results, "source"), read(args.predictions, "image")
    missing = sorted(set(torch) - set(app))
    same = sum(1 for image, label in torch.items() if app.get(image) == label)
    share = 100.0 * same / max(len(torch), 1)
    print(f"same top-1 as PyTorch: {share:.2f}% ({same}/{len(torch)} images)")
    for image in sorted(torch):
        if image in app and app[image] != torch[image]:
            print(f"  differs: {image}: app {app[image]}, PyTorch {torch[image]}")
    if missing:
        print(f"no result from the app for {len(missing)} image(s), e.g. {missing[0]}", file=sys.stderr)
        return 1
    return 0 if share >= args.min else 1


if __name__ == "__main__":
    sys.exit(main())
