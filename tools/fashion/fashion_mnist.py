"""Fashion-MNIST from Debian's dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist, MIT licence):
the idx files as numpy arrays, and the class names. Shared by tools/train_default_model.py, make_sample_video.py and
render_fashion_set.py."""
import gzip
import os

import numpy as np

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def load(split, directory=DEFAULT_DIR):
    """(images uint8 [N, 28, 28], labels uint8 [N]) for split "train" or "t10k"."""
    def read(name, offset):
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing: apt-get install dataset-fashion-mnist (or pass --data DIR)")
        with gzip.open(path, "rb") as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)
    images = read(f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    labels = read(f"{split}-labels-idx1-ubyte.gz", 8)
    return images, labels
