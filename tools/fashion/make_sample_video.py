#!/usr/bin/env python3
"""Builds assets/video/fashion-mnist-sample.mp4 from Fashion-MNIST *test* images (held out from training):
6 items of each class in a fixed shuffled order, each upscaled (bilinear) to 448x448 and centred on a black
640x480 frame for 10 frames at 25 fps (24 s), encoded H.264 in MP4 by GStreamer. Writes the ground truth
(`frame<TAB>label` per line) beside it.

Usage: python3 tools/fashion/make_sample_video.py [--data /usr/share/datasets/fashion-mnist] [--out assets/video]
Needs numpy and gst-launch-1.0 with x264enc and mp4mux.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402

WIDTH, HEIGHT, ITEM, FPS, FRAMES_PER_ITEM, PER_CLASS = 640, 480, 448, 25, 10, 6


def upscale(image, size):
    """Bilinear resize of a square grey image (half-pixel centres, edges clamped)."""
    n = image.shape[0]
    coords = np.clip((np.arange(size) + 0.5) * n / size - 0.5, 0, n - 1)
    lo = np.floor(coords).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    w = coords - lo
    rows = image[lo, :] * (1 - w)[:, None] + image[hi, :] * w[:, None]
    return rows[:, lo] * (1 - w)[None, :] + rows[:, hi] * w[None, :]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "assets", "video"))
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    images, labels = fashion_mnist.load("t10k", args.data)
    rng = np.random.default_rng(args.seed)
    picks = np.concatenate([rng.choice(np.flatnonzero(labels == c), PER_CLASS, replace=False) for c in range(10)])
    rng.shuffle(picks)

    os.makedirs(args.out, exist_ok=True)
    video = os.path.join(args.out, "fashion-mnist-sample.mp4")
    truth = os.path.join(args.out, "fashion-mnist-sample.truth.txt")
    encoder = subprocess.Popen(
        ["gst-launch-1.0", "-q", "fdsrc", "fd=0", "!", "rawvideoparse", f"width={WIDTH}", f"height={HEIGHT}",
         "format=gray8", f"framerate={FPS}/1", "!", "videoconvert", "!", "video/x-raw,format=I420", "!",
         "x264enc", "bitrate=600", "key-int-max=50", "!", "h264parse", "!", "mp4mux", "!", "filesink",
         f"location={video}"], stdin=subprocess.PIPE)
    frame_index = 0
    with open(truth, "w") as gt:
        for i in picks:
            frame = np.zeros((HEIGHT, WIDTH), np.uint8)
            top, left = (HEIGHT - ITEM) // 2, (WIDTH - ITEM) // 2
            frame[top:top + ITEM, left:left + ITEM] = np.clip(upscale(images[i].astype(np.float32), ITEM) + 0.5, 0, 255)
            for _ in range(FRAMES_PER_ITEM):
                encoder.stdin.write(frame.tobytes())
                gt.write(f"{frame_index}\t{fashion_mnist.CLASSES[labels[i]]}\n")
                frame_index += 1
    encoder.stdin.close()
    if encoder.wait() != 0:
        raise SystemExit("gst-launch-1.0 failed")
    print(f"{video}: {frame_index} frames, {os.path.getsize(video)} bytes; ground truth in {truth}")


if __name__ == "__main__":
    main()
