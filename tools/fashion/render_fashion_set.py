#!/usr/bin/env python3
"""Renders Fashion-MNIST *training* items onto varied backgrounds as an image-folder dataset, in the layout
`video-classifier capture` writes (DIR/train/LABEL/*.jpg, DIR/val/LABEL/*.jpg, DIR/labels.txt): a realistic set to
fine-tune the bundled model on (tools/train.py), disjoint from the *test* items of the sample video. Each image is
160x120: a background (a flat colour, a gradient or a blurred texture), the item scaled to 45-110 px at a random place,
drawn in a colour of its own with the item's grey levels as its opacity.

  python3 tools/fashion/render_fashion_set.py --out /tmp/fashion-set                      # 500 + 100 per class
  python3 tools/fashion/render_fashion_set.py --subset .device/finetune/items.npz         # only the picked items (small)
  python3 tools/fashion/render_fashion_set.py --from-subset items.npz --out /tmp/fashion-set
Needs numpy and pillow (scripts/tools-env.sh); Fashion-MNIST from Debian's dataset-fashion-mnist (--data).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: requires.py
from requires import require  # noqa: E402

np, PIL_Image, PIL_ImageFilter = require("numpy", "PIL.Image", "PIL.ImageFilter")
import fashion_mnist  # noqa: E402

WIDTH, HEIGHT = 160, 120
NAMES = [c.replace("/", "-") for c in fashion_mnist.CLASSES]  # folder names: "T-shirt/top" is "T-shirt-top"


def pick(per_class, val_per_class, data, seed):
    images, labels = fashion_mnist.load("train", data)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in range(10):
        chosen = rng.choice(np.flatnonzero(labels == c), per_class + val_per_class, replace=False)
        train += list(chosen[:per_class])
        val += list(chosen[per_class:])
    return images[train], labels[train], images[val], labels[val]


def background(rng):
    kind = rng.integers(3)
    if kind == 0:
        return np.broadcast_to(rng.integers(0, 256, 3).astype(np.float32), (HEIGHT, WIDTH, 3)).copy()
    if kind == 1:
        a, b = rng.integers(0, 256, 3).astype(np.float32), rng.integers(0, 256, 3).astype(np.float32)
        t = np.linspace(0, 1, WIDTH if rng.integers(2) else HEIGHT, dtype=np.float32)
        ramp = t[None, :, None] if t.size == WIDTH else t[:, None, None]
        return np.broadcast_to(a + (b - a) * ramp, (HEIGHT, WIDTH, 3)).copy()
    noise = PIL_Image.fromarray(rng.integers(0, 256, (HEIGHT // 8, WIDTH // 8, 3), dtype=np.uint8))
    texture = np.asarray(noise.resize((WIDTH, HEIGHT), PIL_Image.BILINEAR).filter(PIL_ImageFilter.GaussianBlur(3)),
                         dtype=np.float32)
    return 0.5 * texture + 0.5 * rng.integers(0, 256, 3).astype(np.float32)  # a texture of moderate contrast


def render(item, rng):
    frame = background(rng)
    size = int(rng.integers(45, 111))
    alpha = np.asarray(PIL_Image.fromarray(item).resize((size, size), PIL_Image.BILINEAR), dtype=np.float32)[..., None] / 255
    top, left = int(rng.integers(0, HEIGHT - size + 1)), int(rng.integers(0, WIDTH - size + 1))
    under = frame[top:top + size, left:left + size]
    light = under.mean() < 128  # light on dark, dark on light, with a tint of its own
    colour = np.clip((220.0 if light else 35.0) + rng.normal(0, 35, 3), 0, 255)
    frame[top:top + size, left:left + size] = under * (1 - alpha) + colour * alpha
    return PIL_Image.fromarray(np.clip(frame + 0.5, 0, 255).astype(np.uint8))


def write(out, items, labels, split, rng):
    counts = {}
    for item, label in zip(items, labels):
        name = NAMES[int(label)]
        folder = os.path.join(out, split, name)
        os.makedirs(folder, exist_ok=True)
        counts[name] = counts.get(name, 0) + 1
        render(item, rng).save(os.path.join(folder, f"{counts[name]:05d}.jpg"), quality=90)
    return sum(counts.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    parser.add_argument("--per-class", type=int, default=500)
    parser.add_argument("--val-per-class", type=int, default=100)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", help="the dataset folder to write")
    parser.add_argument("--subset", help="write only the picked items here (.npz), to render elsewhere")
    parser.add_argument("--from-subset", help="render the items of a --subset file (no Fashion-MNIST needed)")
    args = parser.parse_args()
    if args.from_subset:
        with np.load(args.from_subset) as z:
            train_x, train_y, val_x, val_y = z["train_x"], z["train_y"], z["val_x"], z["val_y"]
    else:
        train_x, train_y, val_x, val_y = pick(args.per_class, args.val_per_class, args.data, args.seed)
    if args.subset:
        os.makedirs(os.path.dirname(os.path.abspath(args.subset)), exist_ok=True)
        np.savez_compressed(args.subset, train_x=train_x, train_y=train_y, val_x=val_x, val_y=val_y)
        print(f"{args.subset}: {len(train_x)} training and {len(val_x)} validation items")
    if not args.out:
        return
    rng = np.random.default_rng(args.seed)
    n_train = write(args.out, train_x, train_y, "train", rng)
    n_val = write(args.out, val_x, val_y, "val", rng)
    with open(os.path.join(args.out, "labels.txt"), "w", encoding="utf-8") as f:
        f.write("".join(c + "\n" for c in NAMES))
    print(f"{args.out}: {n_train} training and {n_val} validation images, {WIDTH}x{HEIGHT}")


if __name__ == "__main__":
    main()
