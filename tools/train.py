#!/usr/bin/env python3
"""Fine-tunes a torchvision ResNet (18/34/50) on an image-folder dataset — the one `video-classifier capture` writes:
DATASET/train/LABEL/*.jpg, DATASET/val/LABEL/*.jpg, DATASET/labels.txt — and writes MODEL.safetensors with its model
card (labels, input size, resize mode, mean/std, architecture, dataset, validation accuracy), ready for
`video-classifier --model MODEL.safetensors`.

Frames are prepared exactly as the app prepares them (inference/preprocess.hpp): each output pixel's centre mapped
back into the image (half-pixel centres), bilinear with clamped edges, letterbox bars black, then /255 and mean/std.
Training adds what video does to frames: scale and shift, brightness and contrast, blur, JPEG artefacts.

  python3 tools/train.py --data dataset --out models/mine.safetensors            # ResNet-18 from the bundled model
  python3 tools/train.py --data dataset --arch resnet50 --init none --epochs 30  # from scratch
CPU or CUDA (AMP on CUDA). Early stopping on validation accuracy; per-class accuracy and a confusion matrix at the end.

As a background job (the service runs it so): --progress FILE appends JSON lines (start, batch, epoch, then done,
error or cancelled); --compare WEIGHTS scores the model running now on the same validation images; the model and its
card (MODEL.json: accuracy, per class, confusion, comparison, dataset) appear whole or not at all; SIGTERM or SIGINT
stops at the next batch, leaves nothing behind and exits 128 + the signal's number.
"""
import argparse
import contextlib
import io
import json
import os
import random
import signal
import sys
import time
from datetime import datetime, timezone

from requires import require  # noqa: E402

torch, torchvision, safetensors_torch, PIL_Image, PIL_ImageFilter, np = require(
    "torch", "torchvision", "safetensors.torch", "PIL.Image", "PIL.ImageFilter", "numpy")
F = torch.nn.functional
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BUNDLED = os.path.join(REPO, "assets", "models", "resnet18-fashion-mnist.safetensors")
ARCHITECTURES = ("resnet18", "resnet34", "resnet50")
# What --compare can load: torchvision's ResNets, ResNeXts and Wide-ResNets (the ones tools/export_model.py writes).
COMPARABLE = ARCHITECTURES + ("resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
                              "wide_resnet50_2", "wide_resnet101_2")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")


class Cancelled(BaseException):
    """SIGTERM or SIGINT, seen between batches (a BaseException: no `except Exception` swallows it)."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class Job:
    """What a service running train.py in the background sees: --progress's JSON lines, each written whole with one
    write as it happens; a stop at the next batch on SIGTERM/SIGINT; no half-written file (.part) left behind."""

    def __init__(self):
        self.fd, self.signum, self.parts, self.parent = None, 0, [], None

    def emit(self, event, **fields):
        if self.fd is None:
            return
        line = (json.dumps({"event": event, **fields}, ensure_ascii=False) + "\n").encode("utf-8")
        while line:  # (one write for a regular file; the loop only guards against a short one)
            line = line[os.write(self.fd, line):]

    def end(self, event, **fields):
        """The last line: what was half written is gone before anyone reads it."""
        for part in self.parts:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part)
        self.parts = []
        self.emit(event, **fields)

    def on_signal(self, signum, frame):
        # Only a flag: DataLoader workers (forked, with this handler) carry on until the main process shuts them down.
        self.signum = self.signum or signum

    def check(self):
        if not self.signum and self.parent and os.getppid() != self.parent:  # (the service is gone: so is the job)
            self.signum = signal.SIGTERM
        if self.signum:
            raise Cancelled(self.signum)


JOB = Job()


def mixed_precision(device):
    """FP16 autocast on CUDA; nothing on the CPU (PyTorch 1.13's CPU autocast refuses FP16 even when disabled)."""
    return torch.autocast("cuda", dtype=torch.float16) if device.type == "cuda" else contextlib.nullcontext()

def fail(message, code=1):
    JOB.end("error", message=message)
    sys.stderr.write(f"train.py: {message}\n")
    sys.exit(code)


# ---- the app's preprocessing ------------------------------------------------------------------------------------

def geometry(w, h, size, mode, crop_ratio):
    """The app's ResizeGeometry (inference/cpu/preprocess_cpu.cpp): output pixel x samples the image at
    sx = (x + 0.5 - offset_x) * scale_x - 0.5; outside the content box it is a letterbox bar."""
    s = float(size)
    g = dict(scale_x=w / s, scale_y=h / s, offset_x=0.0, offset_y=0.0, x0=0.0, x1=s, y0=0.0, y1=s)
    if mode == "crop":
        scale = min(w, h) / (s / crop_ratio)
        g.update(scale_x=scale, scale_y=scale, offset_x=-(w / scale - s) / 2, offset_y=-(h / scale - s) / 2)
    elif mode == "letterbox":
        scale = max(w / s, h / s)
        ox, oy = (s - w / scale) / 2, (s - h / scale) / 2
        g.update(scale_x=scale, scale_y=scale, offset_x=ox, offset_y=oy, x0=ox, x1=ox + w / scale, y0=oy, y1=oy + h / scale)
    return g


def prepare(rgb, size, mode, crop_ratio, mean, std):
    """uint8 RGB [H, W, 3] (numpy) -> normalized float [3, size, size], as the app's engine sees the frame."""
    h, w = rgb.shape[:2]
    g = geometry(w, h, size, mode, crop_ratio)
    x = torch.arange(size, dtype=torch.float32) + 0.5
    sx = (x - g["offset_x"]) * g["scale_x"] - 0.5
    sy = (x - g["offset_y"]) * g["scale_y"] - 0.5
    # grid_sample's normalized coordinates (align_corners=False): pixel p <-> (2p + 1) / n - 1; border = clamped edges
    gx = (2 * sx + 1) / w - 1
    gy = (2 * sy + 1) / h - 1
    grid = torch.stack(torch.meshgrid(gy, gx, indexing="ij")[::-1], dim=-1).unsqueeze(0)
    image = torch.from_numpy(np.array(rgb, dtype=np.uint8)).permute(2, 0, 1).unsqueeze(0).float()  # (a copy: PIL's is read-only)
    out = F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=False)[0]
    if mode == "letterbox":
        inside_x = (x >= g["x0"]) & (x < g["x1"])
        inside_y = (x >= g["y0"]) & (x < g["y1"])
        out = out * (inside_y[:, None] & inside_x[None, :]).float()
    out = out / 255.0
    return (out - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)


def augment(img, rng):
    """What video does to a frame: scale and shift, brightness and contrast, some blur, JPEG artefacts (PIL RGB)."""
    w, h = img.size
    scale = rng.uniform(0.75, 1.0)
    cw, ch = max(8, int(w * scale)), max(8, int(h * scale))
    x0, y0 = rng.randint(0, w - cw), rng.randint(0, h - ch)
    img = img.crop((x0, y0, x0 + cw, y0 + ch))
    a = np.asarray(img).astype(np.float32)
    a = (a - 128.0) * rng.uniform(0.8, 1.2) + 128.0 + rng.uniform(-20, 20)
    img = PIL_Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
    if rng.random() < 0.2:
        img = img.filter(PIL_ImageFilter.GaussianBlur(rng.uniform(0.3, 1.2)))
    if rng.random() < 0.3:
        buffer = io.BytesIO()
        img.save(buffer, "JPEG", quality=rng.randint(35, 90))
        img = PIL_Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    return img


class Folder(torch.utils.data.Dataset):
    def __init__(self, root, labels, prep, train):
        self.items = []
        for index, label in enumerate(labels):
            folder = os.path.join(root, label)
            if not os.path.isdir(folder):
                continue
            for name in sorted(os.listdir(folder)):
                if name.lower().endswith(IMAGE_EXTENSIONS):
                    self.items.append((os.path.join(folder, name), index))
        self.prep, self.train = prep, train
        self.rng = random.Random(0)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        with PIL_Image.open(path) as img:
            img = img.convert("RGB")
            if self.train:
                img = augment(img, self.rng)
            return self.prep(np.asarray(img)), label


# ---- the model ---------------------------------------------------------------------------------------------------

def read_card(path):
    with safetensors_torch.safe_open(path, "pt") as f:
        return dict(f.metadata() or {}), {k: f.get_tensor(k) for k in f.keys()}


def build(arch, classes, init):
    model = getattr(torchvision.models, arch)(weights=None, num_classes=classes)
    card = {}
    if init == "none":
        return model, card, "random initialization"
    path = BUNDLED if init == "bundled" else init
    if not os.path.exists(path):
        fail(f"--init: {path} does not exist")
    card, tensors = read_card(path)
    own = model.state_dict()
    loaded = {k: v.float() for k, v in tensors.items() if k in own and own[k].shape == v.shape}
    skipped = [k for k in own if k not in loaded and not k.endswith("num_batches_tracked")]
    if len(loaded) < len(own) // 2:
        fail(f"--init {path}: its tensors do not fit {arch} (is it a {card.get('architecture', 'different')} model?)")
    model.load_state_dict(loaded, strict=False)
    note = f"from {os.path.relpath(path, REPO) if path.startswith(REPO) else path}"
    if skipped:
        note += f" (new: {', '.join(sorted({k.split('.')[0] for k in skipped}))})"
    return model, card, note


def evaluate(model, loader, device, classes):
    model.eval()
    confusion = np.zeros((classes, classes), dtype=np.int64)
    with torch.no_grad(), mixed_precision(device):
        for x, y in loader:
            JOB.check()
            predicted = model(x.to(device)).argmax(1).cpu()
            for t, p in zip(y.tolist(), predicted.tolist()):
                confusion[t, p] += 1
    total = confusion.sum()
    return (np.trace(confusion) / total if total else 0.0), confusion


def write_predictions(model, state, dataset, device, labels, path):
    """The top-1 of the weights as written (FP16 body, FP32 first and last layers), in FP32, per validation image."""
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    model.eval()
    loader = torch.utils.data.DataLoader(dataset, batch_size=64)
    predicted = []
    with torch.no_grad():
        for x, _ in loader:
            JOB.check()
            predicted += model(x.to(device)).argmax(1).cpu().tolist()
    with open(path, "w", encoding="utf-8") as f:
        for (image, _), p in zip(dataset.items, predicted):
            f.write(json.dumps({"image": os.path.abspath(image), "label": labels[p]}, ensure_ascii=False) + "\n")
    print(f"wrote {path}: the top-1 of {len(predicted)} validation images")


def per_class(labels, correct, counts):
    """{label: {accuracy (None without images), n}} of the validation images."""
    return {label: {"accuracy": round(float(c) / int(n), 4) if n else None, "n": int(n)}
            for label, c, n in zip(labels, correct, counts)}


def infer_architecture(tensors):
    """A ResNet's depth from torchvision's tensor names: blocks per stage, and a conv3 in a block means bottleneck."""
    blocks = tuple(len({k.split(".")[1] for k in tensors if k.startswith(f"layer{i}.")}) for i in range(1, 5))
    bottleneck = "layer1.0.conv3.weight" in tensors
    known = {(False, (2, 2, 2, 2)): "resnet18", (False, (3, 4, 6, 3)): "resnet34", (True, (3, 4, 6, 3)): "resnet50",
             (True, (3, 4, 23, 3)): "resnet101", (True, (3, 8, 36, 3)): "resnet152"}
    if (bottleneck, blocks) not in known:
        raise ValueError(f"its card names no architecture and its tensors are no ResNet-18/34/50/101/152 "
                         f"(blocks per stage {blocks})")
    return known[(bottleneck, blocks)]


def compare_with(path, val_root, labels, device, workers):
    """The model the service runs now, scored on the same validation images, each prepared as ITS card says; its
    classes matched to ours by name (an image whose label it lacks counts as wrong). Never fails the training: what
    went wrong is the result's "error"."""
    path = os.path.abspath(path)
    try:
        if not os.path.isfile(path):
            raise ValueError("no such file")
        card, tensors = read_card(path)
        theirs = json.loads(card.get("labels", "null"))
        if not isinstance(theirs, list) or not theirs:
            raise ValueError("its card has no labels (a JSON list)")
        arch = card.get("architecture")
        arch = arch if arch in COMPARABLE else infer_architecture(tensors)
        classes = tensors["fc.weight"].shape[0] if "fc.weight" in tensors else None
        if classes != len(theirs):
            raise ValueError(f"its card has {len(theirs)} labels for a model of {classes} classes")
        model = getattr(torchvision.models, arch)(weights=None, num_classes=classes)
        missing, unexpected = model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
        missing = [k for k in missing if not k.endswith("num_batches_tracked")]
        if missing or unexpected:
            raise ValueError(f"its tensors do not fit {arch}: {len(missing)} missing, {len(unexpected)} unexpected")
        size, resize = int(card.get("input_size", 224)), card.get("resize", "crop")
        crop_ratio = float(card.get("crop_ratio", 0.875))
        mean = json.loads(card.get("mean", "[0.485, 0.456, 0.406]"))
        std = json.loads(card.get("std", "[0.229, 0.224, 0.225]"))

        def prep(rgb):
            return prepare(rgb, size, resize, crop_ratio, mean, std)

        dataset = Folder(val_root, labels, prep, train=False)
        ours = [labels.index(label) if label in labels else -1 for label in theirs]
        correct, counts = [0] * len(labels), [0] * len(labels)
        model = model.to(device).eval()
        loader = torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=workers)
        with torch.no_grad(), mixed_precision(device):
            for x, y in loader:
                JOB.check()
                for t, p in zip(y.tolist(), model(x.to(device)).argmax(1).cpu().tolist()):
                    counts[t] += 1
                    correct[t] += ours[p] == t
        return {"weights": path, "val_accuracy": round(sum(correct) / max(sum(counts), 1), 4),
                "per_class": per_class(labels, correct, counts),
                "missing_labels": [label for label in labels if label not in theirs]}
    except Exception as e:  # noqa: BLE001 (whatever it is, the comparison says it and training goes on)
        return {"weights": path, "error": f"{e}" or type(e).__name__}


def card_path(out):
    """MODEL.safetensors -> MODEL.json (anything else: OUT.json)."""
    return (out[:-len(".safetensors")] if out.endswith(".safetensors") else out) + ".json"


def progress(epoch, epochs, done, total, loss, started, tty):
    if not tty:
        return
    bar = int(30 * done / max(total, 1))
    eta = (time.time() - started) / max(done, 1) * (total - done)
    sys.stderr.write(f"\r  epoch {epoch}/{epochs} [{'#' * bar}{'.' * (30 - bar)}] {done}/{total}  loss {loss:.3f}  "
                     f"ETA {eta:.0f} s ")
    sys.stderr.flush()


def main():
    class Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        """The description as written, and every option's default."""

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=Help)
    parser.add_argument("--data", required=True, help="the dataset: train/LABEL/*.jpg, val/LABEL/*.jpg, labels.txt")
    parser.add_argument("--out", required=True, help="the model file to write (.safetensors)")
    parser.add_argument("--arch", default="resnet18", choices=ARCHITECTURES)
    parser.add_argument("--init", default="bundled",
                        help="'bundled' (the app's ResNet-18), a .safetensors file of the same architecture, or 'none'")
    parser.add_argument("--input-size", type=int, help="model input size (default: the init model's card, else 224)")
    parser.add_argument("--resize", choices=("crop", "letterbox", "stretch"), help="default: the init model's card, else crop")
    parser.add_argument("--crop-ratio", type=float, help="crop: the shorter side is resized to size / ratio")
    parser.add_argument("--mean", type=float, nargs=3)
    parser.add_argument("--std", type=float, nargs=3)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--patience", type=int, default=4, help="stop after this many epochs without a better val")
    parser.add_argument("--min-per-class", type=int, default=20, help="fewer training images in a class is an error")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--predictions", help="write each validation image's top-1 by the written weights here (JSON "
                        "lines: image, label), to compare with the app's on the same images")
    parser.add_argument("--progress", help="append progress here as JSON lines (start, batch, epoch, done, error, "
                        "cancelled), for a service running this as a job")
    parser.add_argument("--compare", metavar="WEIGHTS", help="also score this model (the one running now) on the same "
                        "validation images, its classes matched by name; the result goes into the card")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads on the CPU")
    parser.add_argument("--parent-pid", type=int, help="stop, as cancelled, once this process (the service that "
                        "started the job) is gone")
    args = parser.parse_args()
    JOB.parent = args.parent_pid

    run_started = time.time()
    if args.progress:
        try:
            JOB.fd = os.open(args.progress, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as e:
            fail(f"--progress {args.progress}: {e.strerror}", 73)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, JOB.on_signal)
    if args.threads < 1:
        fail(f"--threads {args.threads}: at least 1", 64)
    if args.epochs < 1:
        fail(f"--epochs {args.epochs}: at least 1", 64)

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    labels_file = os.path.join(args.data, "labels.txt")
    if not os.path.exists(labels_file):
        fail(f"{args.data}: no labels.txt (video-classifier capture writes it; one label per line)")
    with open(labels_file, encoding="utf-8") as f:
        labels = [line.rstrip("\n") for line in f if line.strip()]
    if args.arch != "resnet18" and args.init == "bundled":
        args.init = "none"  # the bundled model is a ResNet-18
    model, card, init_note = build(args.arch, len(labels), args.init)
    size = args.input_size or int(card.get("input_size", 224))
    resize = args.resize or card.get("resize", "crop")
    crop_ratio = args.crop_ratio or float(card.get("crop_ratio", 0.875))
    mean = args.mean or json.loads(card.get("mean", "[0.485, 0.456, 0.406]"))
    std = args.std or json.loads(card.get("std", "[0.229, 0.224, 0.225]"))

    def prep(rgb):
        return prepare(rgb, size, resize, crop_ratio, mean, std)

    train_set = Folder(os.path.join(args.data, "train"), labels, prep, train=True)
    val_set = Folder(os.path.join(args.data, "val"), labels, prep, train=False)
    counts = [sum(1 for _, y in train_set.items if y == i) for i in range(len(labels))]
    val_counts = [sum(1 for _, y in val_set.items if y == i) for i in range(len(labels))]
    few = [f"{labels[i]} ({n})" for i, n in enumerate(counts) if n < args.min_per_class]
    if few:
        fail(f"too few training images: {', '.join(few)}; at least {args.min_per_class} per class (--min-per-class), "
             "100 or more advised: capture more frames of those classes", 65)
    if not val_set.items:
        fail(f"{args.data}/val holds no images: capture with --split train=0.8,val=0.2", 65)

    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          "cpu" if args.device == "auto" else args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    model = model.to(device)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                               drop_last=len(train_set) > args.batch)
    val_loader = torch.utils.data.DataLoader(val_set, batch_size=64, num_workers=args.workers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps = args.epochs * max(1, len(train_loader))
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, total_steps=steps, pct_start=0.2)
    # (torch.amp.GradScaler is PyTorch >= 2.3's name; torch.cuda.amp's is the one 1.13, Debian 12's, has too)
    scaler = (torch.amp.GradScaler("cuda", enabled=device.type == "cuda") if hasattr(torch.amp, "GradScaler")
              else torch.cuda.amp.GradScaler(enabled=device.type == "cuda"))
    print(f"train.py: {args.arch} ({init_note}) on {device.type}; {len(labels)} classes, {len(train_set)} training and "
          f"{len(val_set)} validation images; input {size}x{size} ({resize}), batch {args.batch}, up to {args.epochs} epochs")
    JOB.emit("start", arch=args.arch, device=device.type, classes=len(labels), labels=labels, train=len(train_set),
             val=len(val_set), epochs=args.epochs)
    tty = sys.stderr.isatty()
    per_epoch = len(train_loader) * args.batch if train_loader.drop_last else len(train_set)
    training_started, trained, reported = time.time(), 0, 0.0

    def eta():
        """Seconds left for every epoch to come, at the time per image so far (validation included)."""
        return round((time.time() - training_started) / max(trained, 1) * (args.epochs * per_epoch - trained))

    best, best_state, best_epoch, stale = -1.0, None, 0, 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        started, done, total_loss = time.time(), 0, 0.0
        for x, y in train_loader:
            JOB.check()
            x, y = x.to(device), y.to(device)
            with mixed_precision(device):
                loss = F.cross_entropy(model(x), y, label_smoothing=0.05)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            done += len(y)
            total_loss += loss.item() * len(y)
            progress(epoch, args.epochs, done, len(train_set), total_loss / done, started, tty)
            trained += len(y)
            if time.time() - reported >= 1.0 or done >= per_epoch:  # (the last batch: one line every epoch)
                reported = time.time()
                JOB.emit("batch", epoch=epoch, epochs=args.epochs, done=done, total=per_epoch,
                         loss=round(total_loss / done, 4), eta_s=eta())
        accuracy, _ = evaluate(model, val_loader, device, len(labels))
        if tty:
            sys.stderr.write("\n")
        print(f"  epoch {epoch}: loss {total_loss / max(done, 1):.4f}, val accuracy {100 * accuracy:.2f}%, "
              f"{time.time() - started:.1f} s", flush=True)
        JOB.emit("epoch", epoch=epoch, epochs=args.epochs, loss=round(total_loss / max(done, 1), 4),
                 val_accuracy=round(float(accuracy), 4), seconds=round(time.time() - started, 2), eta_s=eta())
        epochs_run = epoch
        # A tie keeps the later epoch (trained longer, its batch-norm statistics further from the init model's) but
        # counts towards the patience.
        if accuracy >= best:
            best_epoch, best_state = epoch, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        if accuracy > best:
            best, stale = accuracy, 0
        else:
            stale += 1
            if stale >= args.patience:
                print(f"  no better for {args.patience} epochs: stopping")
                break
    model.load_state_dict(best_state)
    accuracy, confusion = evaluate(model, val_loader, device, len(labels))
    print(f"best: epoch {best_epoch}, val accuracy {100 * accuracy:.2f}%\nper class:")
    for i, label in enumerate(labels):
        n = confusion[i].sum()
        if n:
            print(f"  {label:<20} {100 * confusion[i, i] / n:6.2f}% of {n}")
    print("confusion matrix (rows: truth, columns: predicted, in the order above):")
    for i, label in enumerate(labels):
        print(f"  {label[:20]:<20}" + "".join(f" {v:4d}" for v in confusion[i]))
    compare = None
    if args.compare:
        compare = compare_with(args.compare, os.path.join(args.data, "val"), labels, device, args.workers)
        if "error" in compare:
            print(f"compare: {args.compare}: not evaluated: {compare['error']}")
        else:
            lacks = f"; labels it lacks (counted wrong): {', '.join(compare['missing_labels'])}" \
                if compare["missing_labels"] else ""
            print(f"compare: {args.compare}: val accuracy {100 * compare['val_accuracy']:.2f}% on the same "
                  f"{len(val_set)} images (this model: {100 * accuracy:.2f}%){lacks}")

    # The first and last layers stay FP32 (as the app runs them), the rest FP16: half the file.
    state = {}
    for key, tensor in model.state_dict().items():
        if key.endswith("num_batches_tracked"):
            continue
        keep = key.startswith("conv1.") or key.startswith("fc.") or key.startswith("bn1.")
        state[key] = tensor.detach().cpu().float().contiguous() if keep else tensor.detach().cpu().half().contiguous()
    meta = {"input_size": str(size), "resize": resize, "crop_ratio": str(crop_ratio), "mean": json.dumps(mean),
            "std": json.dumps(std), "labels": json.dumps(labels, ensure_ascii=False), "architecture": args.arch,
            "source": "tools/train.py", "weights": "trained", "init": init_note,
            "dataset": json.dumps({"path": os.path.abspath(args.data), "train": dict(zip(labels, counts)),
                                   "val": dict(zip(labels, val_counts))}, ensure_ascii=False),
            "val_accuracy": f"{accuracy:.4f}"}
    # Whole or not at all: both files as .part, then the card, then the model (whoever sees the model sees its card).
    out = os.path.abspath(args.out)
    card_file = card_path(out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    JOB.parts = [out + ".part", card_file + ".part"]
    safetensors_torch.save_file(state, out + ".part", metadata=meta)
    if args.predictions:
        write_predictions(model, state, val_set, device, labels, args.predictions)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out + ".part", 0o666 & ~umask)
    scores = {"per_class": per_class(labels, np.diag(confusion), confusion.sum(1)), "confusion": confusion.tolist(),
              "compare": compare}
    card = {"file": os.path.basename(out), "architecture": args.arch, "labels": labels, "input_size": size,
            "resize": resize, "val_accuracy": round(float(accuracy), 4), "best_epoch": best_epoch, **scores,
            "dataset": {"path": os.path.abspath(args.data), "train": dict(zip(labels, counts)),
                        "val": dict(zip(labels, val_counts))},
            "epochs_run": epochs_run, "seconds": round(time.time() - run_started, 1),
            "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    with open(card_file + ".part", "w", encoding="utf-8") as f:
        f.write(json.dumps(card, ensure_ascii=False) + "\n")
    JOB.check()
    os.replace(card_file + ".part", card_file)
    JOB.parts = [out + ".part", card_file]  # (a model that cannot be moved into place takes its card with it)
    os.replace(out + ".part", out)
    JOB.parts = []
    print(f"wrote {args.out} ({os.path.getsize(out) / 1e6:.1f} MB): video-classifier --model {args.out} --input …")
    JOB.emit("done", out=out, card=card_file, val_accuracy=card["val_accuracy"], best_epoch=best_epoch, labels=labels,
             **scores)


if __name__ == "__main__":
    try:
        main()
    except Cancelled as stop:
        JOB.end("cancelled")
        after_bar = "\n" if sys.stderr.isatty() else ""
        sys.stderr.write(f"{after_bar}train.py: stopped by {signal.Signals(stop.signum).name}; nothing written\n")
        sys.exit(128 + stop.signum)
    except Exception as e:
        JOB.end("error", message=f"{type(e).__name__}: {e}")
        raise
