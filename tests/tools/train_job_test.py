#!/usr/bin/env python3
"""tools/train.py as the service runs it, a background job, on a tiny synthetic dataset on the CPU: --progress's JSON
lines (start, a batch line every epoch, epoch lines, done with per-class counts and a confusion matrix that add up to
the validation images), --compare (the bundled Fashion-MNIST model, whose labels are none of these; then the model just
trained, its classes matched by name against labels.txt in another order), the model and its card appearing whole with
no .part left, an error line on a failure, and SIGTERM mid-run: exit 143 soon, a cancelled line, nothing left behind.
Needs torch, torchvision, safetensors, pillow (tools/requirements.txt); exit 77 (skipped) without them.

    python tests/tools/train_job_test.py [--work DIR]
"""
import argparse
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "tools" / "train.py"
BUNDLED = ROOT / "assets" / "models" / "resnet18-fashion-mnist.safetensors"
LABELS = ["red", "blue", "stripes"]
TRAIN_PER_CLASS, VAL_PER_CLASS = 24, 8


def check(condition, what):
    if not condition:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def make_dataset(root, image):
    """DATASET/train/LABEL/*.jpg, DATASET/val/LABEL/*.jpg, labels.txt: solid red, solid blue, black and white stripes,
    each image with its own noise, size and stripe width."""
    rng = random.Random(1)
    for split, n in (("train", TRAIN_PER_CLASS), ("val", VAL_PER_CLASS)):
        for label in LABELS:
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(n):
                w, h = rng.randint(40, 64), rng.randint(40, 64)
                pixels = []
                for y in range(h):
                    for x in range(w):
                        if label == "stripes":
                            v = 255 if (x // (3 + i % 3)) % 2 else 0
                            rgb = (v, v, v)
                        else:
                            rgb = (220, 30, 30) if label == "red" else (30, 40, 220)
                        pixels.append(tuple(max(0, min(255, c + rng.randint(-25, 25))) for c in rgb))
                img = image.new("RGB", (w, h))
                img.putdata(pixels)
                img.save(folder / f"{i:03d}.jpg", quality=90)
    (root / "labels.txt").write_text("".join(f"{label}\n" for label in LABELS))


def train(*args, timeout=300):
    return subprocess.run([sys.executable, str(TRAIN), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def events(progress):
    return [json.loads(line) for line in progress.read_text(encoding="utf-8").splitlines()]


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", help="keep the files here (default: a temporary folder)")
    args = parser.parse_args()
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
        import torchvision
        from PIL import Image
    except ImportError as e:
        print(f"skipped: {e.name} is not installed (tools/requirements.txt)")
        return 77
    work = Path(args.work or tempfile.mkdtemp(prefix="vc-train-job-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.time()
    dataset = work / "dataset"
    make_dataset(dataset, Image)
    val_count = VAL_PER_CLASS * len(LABELS)
    common = ["--input-size", 32, "--resize", "stretch", "--batch", 8, "--min-per-class", 10, "--device", "cpu",
              "--threads", 2]

    # 1. A whole run, compared with the bundled model (whose labels are Fashion-MNIST's: none of these).
    models = work / "models"
    out, card_file, progress = models / "colours.safetensors", models / "colours.json", work / "run.jsonl"
    r = train("--data", dataset, "--out", out, "--epochs", 2, "--workers", 0, "--progress", progress,
              "--compare", BUNDLED, *common)
    check(r.returncode == 0, f"train.py exit {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    check(any(line.startswith("compare: ") and "val accuracy" in line for line in r.stdout.splitlines()),
          f"no comparison line on stdout:\n{r.stdout}")
    lines = events(progress)
    kinds = [e["event"] for e in lines]
    check(kinds[0] == "start" and kinds[-1] == "done" and kinds.count("epoch") == 2, f"events {kinds}")
    start = lines[0]
    check(start == {"event": "start", "arch": "resnet18", "device": "cpu", "classes": 3, "labels": LABELS,
                    "train": TRAIN_PER_CLASS * 3, "val": val_count, "epochs": 2}, f"start line {start}")
    for epoch in (1, 2):
        batches = [e for e in lines if e["event"] == "batch" and e["epoch"] == epoch]
        check(batches and all(e["epochs"] == 2 and 0 < e["done"] <= e["total"] and e["eta_s"] >= 0 and e["loss"] > 0
                              for e in batches), f"batch lines of epoch {epoch}: {batches}")
        check(batches[-1]["done"] == batches[-1]["total"] == TRAIN_PER_CLASS * 3, f"epoch {epoch} ends {batches[-1]}")
        ends = [e for e in lines if e["event"] == "epoch" and e["epoch"] == epoch]
        check(len(ends) == 1 and 0 <= ends[0]["val_accuracy"] <= 1 and ends[0]["seconds"] > 0, f"epoch line {ends}")
    check([e["eta_s"] for e in lines if e["event"] == "epoch"][-1] == 0, "eta_s after the last epoch is not 0")
    done = lines[-1]
    check(done["out"] == str(out) and done["card"] == str(card_file), f"done names {done}")
    check(done["labels"] == LABELS and done["best_epoch"] in (1, 2) and 0 <= done["val_accuracy"] <= 1, f"done {done}")
    confusion = done["confusion"]
    check(len(confusion) == 3 and all(len(row) == 3 for row in confusion) and sum(map(sum, confusion)) == val_count
          and [sum(row) for row in confusion] == [VAL_PER_CLASS] * 3, f"confusion {confusion}")
    check(abs(sum(confusion[i][i] for i in range(3)) / val_count - done["val_accuracy"]) < 1e-3, "accuracy vs matrix")
    check(set(done["per_class"]) == set(LABELS) and sum(c["n"] for c in done["per_class"].values()) == val_count,
          f"per_class {done['per_class']}")
    compare = done["compare"]
    check("error" not in compare and compare["weights"] == str(BUNDLED) and compare["val_accuracy"] == 0
          and compare["missing_labels"] == LABELS and sum(c["n"] for c in compare["per_class"].values()) == val_count,
          f"compare with the bundled model {compare}")
    check(out.exists() and card_file.exists() and not leftovers(models), f"files: {sorted(os.listdir(models))}")
    card = json.loads(card_file.read_text(encoding="utf-8"))
    check(card["file"] == "colours.safetensors" and card["architecture"] == "resnet18" and card["labels"] == LABELS
          and card["input_size"] == 32 and card["resize"] == "stretch" and card["epochs_run"] == 2
          and card["created"].endswith("Z") and card["seconds"] > 0, f"card {card}")
    check(all(card[k] == done[k] for k in ("val_accuracy", "best_epoch", "per_class", "confusion", "compare")),
          "the card's scores are not the done line's")
    check(card["dataset"] == {"path": str(dataset), "train": dict.fromkeys(LABELS, TRAIN_PER_CLASS),
                              "val": dict.fromkeys(LABELS, VAL_PER_CLASS)}, f"card dataset {card['dataset']}")
    print(f"run: val accuracy {done['val_accuracy']}, bundled model {compare['val_accuracy']} "
          f"({time.time() - started:.0f} s)")

    # 2. The labels in another order, compared with the model just trained: its classes are matched by name (its
    #    FP16 body scores what its FP32 weights did, give or take an image), and a broken --compare is only a note.
    reordered = work / "reordered"
    reordered.mkdir()
    for split in ("train", "val"):
        (reordered / split).symlink_to(dataset / split)
    (reordered / "labels.txt").write_text("".join(f"{label}\n" for label in reversed(LABELS)))
    second, progress2 = work / "second" / "colours-2", work / "second.jsonl"  # (no .safetensors: the card is OUT.json)
    r = train("--data", reordered, "--out", second, "--epochs", 1, "--workers", 0, "--progress", progress2,
              "--compare", out, *common)
    check(r.returncode == 0, f"second train.py exit {r.returncode}:\n{r.stderr[-3000:]}")
    again = events(progress2)[-1]["compare"]
    check("error" not in again and again["missing_labels"] == [], f"compare by name {again}")
    for label in LABELS:
        check(again["per_class"][label]["n"] == VAL_PER_CLASS and abs(again["per_class"][label]["accuracy"] -
              done["per_class"][label]["accuracy"]) <= 1 / VAL_PER_CLASS + 1e-6, f"{label}: {again} vs {done}")
    check(Path(str(second) + ".json").exists() and second.exists(), "the second model or its card is missing")
    r = train("--data", dataset, "--out", work / "third.safetensors", "--epochs", 1, "--workers", 0,
              "--compare", card_file, *common)  # (the card, not a model)
    check(r.returncode == 0 and "not evaluated" in r.stdout, f"a broken --compare: {r.returncode}\n{r.stdout}")
    third = json.loads((work / "third.json").read_text(encoding="utf-8"))["compare"]
    check(set(third) == {"weights", "error"}, f"a broken --compare's result {third}")

    # 3. A failure is an error line (and the exit status as ever).
    progress3 = work / "error.jsonl"
    (work / "empty").mkdir()
    r = train("--data", work / "empty", "--out", work / "x.safetensors", "--progress", progress3)
    lines = events(progress3)
    check(r.returncode == 1 and len(lines) == 1 and lines[0]["event"] == "error" and "labels.txt" in
          lines[0]["message"], f"a failure: exit {r.returncode}, {lines}")

    # 4. SIGTERM mid-run (with DataLoader workers): out soon with 143, a cancelled line, nothing left behind.
    cancelled, progress4 = work / "cancelled", work / "cancelled.jsonl"
    cancelled.mkdir()
    command = [TRAIN, "--data", dataset, "--out", cancelled / "m.safetensors", "--epochs", 500, "--patience", 500,
               "--workers", 2, "--progress", progress4, *common]
    job = subprocess.Popen([sys.executable, *map(str, command)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    deadline = time.time() + 120
    while time.time() < deadline and job.poll() is None and not (
            progress4.exists() and '"batch"' in progress4.read_text(encoding="utf-8")):
        time.sleep(0.1)
    if job.poll() is not None:  # (communicate() only then: it waits for the end)
        check(False, f"the job ended before its first batch line: {job.communicate()}")
    job.send_signal(signal.SIGTERM)
    sent = time.time()
    try:
        stdout, stderr = job.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        job.kill()
        check(False, "still running 20 s after SIGTERM")
    lines = events(progress4)
    check(job.returncode == 143, f"exit {job.returncode} after SIGTERM:\n{stderr[-3000:]}")
    check(lines[-1] == {"event": "cancelled"} and "Traceback" not in stderr, f"after SIGTERM: {lines[-1]}\n{stderr}")
    check(os.listdir(cancelled) == [], f"left behind: {os.listdir(cancelled)}")
    print(f"SIGTERM: exit 143 in {time.time() - sent:.1f} s")

    # 5. --compare's architecture from the tensors alone (a card without one).
    sys.path.insert(0, str(ROOT / "tools"))
    spec = importlib.util.spec_from_file_location("train", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for arch in ("resnet18", "resnet34", "resnet50"):
        found = module.infer_architecture(getattr(torchvision.models, arch)(weights=None).state_dict())
        check(found == arch, f"{arch}'s tensors read as {found}")

    print(f"train job: ok in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
