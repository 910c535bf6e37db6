#!/usr/bin/env python3
"""A model hot swap under live streams (device-run.sh's `swap` stage on the GPU; runs anywhere the app does).

The app runs as a service on the bundled ResNet-18 with N live streams: test patterns, or with --file a video looped
and paced as a camera (NVDEC decodes it on a GPU). Over the API: a deploy of other weights (--new, e.g. a ResNet-50;
by default the bundled model with a few bytes of its last layer changed: another sha, the same network, as a
fine-tuned model would be), then a rollback. Checked: no frame dropped, every stream's results have every frame
once, in order; the model ids run old -> new -> old; no stream restarted; the app exits 0. Measured: the switch time
(the deploy request to the first and to the last stream's first result of the new model; the results files are read
every 0.1 s, so within 0.1 s) and the latency p99 of the 5 s before the deploy (steady, with --seconds 10 or more)
against that from the deploy request to 1 s after it answered (the new engine is built meanwhile on the same GPU).
A ResNet-50 is slower than the ResNet-18 it replaces, so that window is also split by the model that classified each
frame, each part against its own model's steady p99: the old model while the new one is built (deploy request to
answer), the new model's first second, against its 5 s before the rollback, and the old model's first second after
the rollback, against the 5 s before the deploy. Printed as a table; written as JSON.

  usage: scripts/swap-check.py --app build/app/video-classifier [--streams 8] [--file clip.mp4] [--new w.safetensors]
                               [--device cuda] [--json out.json]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from service_app import free_port, stop, wait_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "assets", "models", "resnet18-fashion-mnist.safetensors")
TOKEN = "swap-check-token-0123456789"


def request(port, method, path, body=None, timeout=300):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def perturbed_copy(src, dst):
    """`src` with the low byte of a few of its last float values changed: valid weights with another sha."""
    shutil.copyfile(src, dst)
    size = os.path.getsize(dst)
    with open(dst, "r+b") as f:
        for offset in range(size - 64, size, 8):  # (the tail of the data: the last layer's values)
            f.seek(offset)
            b = f.read(1)
            f.seek(offset)
            f.write(bytes([b[0] ^ 1]))


class Tail:
    """Reads the streams' results files as they grow, every 0.1 s: each classified frame with the time it was read."""

    def __init__(self, paths):
        self.lines = {p: [] for p in paths}  # path -> [(read at, frame, model, latency ms)]
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        files, partial = {}, {p: "" for p in self.lines}
        while True:
            done = self._done.is_set()
            now = time.monotonic()
            for p in self.lines:
                if p not in files:
                    if not os.path.exists(p):
                        continue
                    files[p] = open(p)
                text = partial[p] + files[p].read()
                *complete, partial[p] = text.split("\n")
                for line in complete:
                    r = json.loads(line)
                    if "top" in r:
                        self.lines[p].append((now, r["frame"], r["model"], r["latency_ms"]))
            if done:
                break
            time.sleep(0.1)
        for f in files.values():
            f.close()

    def stop(self):
        self._done.set()
        self._thread.join()


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))] if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--file", help="a video each stream loops, paced as a camera (default: test patterns)")
    ap.add_argument("--new", help="the weights deployed (default: the bundled model, a few bytes changed)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seconds", type=float, default=5,
                    help="between the start, the deploy, the rollback and the stop; the steady p99 is that of the last "
                         "5 s before the deploy (give 10 or more to leave the start out of it)")
    ap.add_argument("--json")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="vc-swap-")
    os.makedirs(f"{work}/models")
    new_weights = f"{work}/models/resnet18-tuned.safetensors"
    if args.new:
        new_weights = f"{work}/models/{os.path.basename(args.new)}"
        shutil.copyfile(args.new, new_weights)
    else:
        perturbed_copy(MODEL, new_weights)
    with open(f"{work}/token", "w") as f:
        f.write(TOKEN + "\n")
    port = free_port()
    source = (f"kind: file, path: '{os.path.abspath(args.file)}', loop: true, realtime: true" if args.file else
              "kind: test, pattern: ball, width: 640, height: 480, fps: 30")
    inputs = "".join(f"  - {{name: cam{i}, {source}}}\n" for i in range(args.streams))
    with open(f"{work}/service.yaml", "w") as f:
        f.write(f"api: {{enabled: true, token_file: token, allowed_dirs: [models]}}\n"
                f"metrics: {{port: {port}}}\n"
                f"model: {{weights: '{MODEL}'}}\n"
                f"inference: {{device: {args.device}}}\n"
                f"output: {{kind: none, results: '{work}/{{stream}}.jsonl'}}\n"
                f"inputs:\n{inputs}")
    log = open(f"{work}/app.log", "w")
    app = subprocess.Popen([args.app, "--config", f"{work}/service.yaml"], stdout=log, stderr=subprocess.STDOUT)
    problems = []
    result = {"streams": args.streams, "device": args.device, "source": args.file or "test pattern 640x480 30 fps",
              "new": os.path.basename(new_weights)}
    tail = Tail([f"{work}/cam{i}.jsonl" for i in range(args.streams)])
    try:
        t0 = time.monotonic()
        wait_ready(app, port, "swap-check", f"{work}/app.log")
        result["ready_s"] = round(time.monotonic() - t0, 2)
        time.sleep(args.seconds)
        deploy_at = time.monotonic()
        status, deployed = request(port, "PUT", "/api/v1/models/default", {"weights": new_weights})
        answered_at = time.monotonic()
        result["deploy_s"] = round(answered_at - deploy_at, 2)
        if status != 200:
            problems.append(f"the deploy answered {status}: {deployed}")
        time.sleep(args.seconds)
        rollback_at = time.monotonic()
        status, rolled = request(port, "POST", "/api/v1/models/default/rollback")
        rolled_at = time.monotonic()
        result["rollback_s"] = round(rolled_at - rollback_at, 2)
        if status != 200:
            problems.append(f"the rollback answered {status}: {rolled}")
        time.sleep(args.seconds)
        status, streams = request(port, "GET", "/api/v1/streams")
        listed = streams.get("streams", []) if status == 200 else []
        result["restarts"] = sum(s.get("restarts", 0) for s in listed) if status == 200 else -1
        result["dropped"] = sum(s.get("dropped", 0) for s in listed) if status == 200 else -1
        if result["restarts"] != 0:
            problems.append(f"streams restarted: {result['restarts']}")
        if result["dropped"] != 0:
            problems.append(f"frames dropped: {result['dropped']}")
    finally:
        result["exit"] = stop(app)
        log.close()
        tail.stop()
    if result["exit"] != 0:
        problems.append(f"the app exited {result['exit']}")

    rows, first_new, steady, swapping = [], [], [], []
    # (each model's own: the old one while the new is built, the new one's first second and its steady 5 s before
    # the rollback, the old one's first second back)
    building, new_first, new_steady, back_first = [], [], [], []
    for i in range(args.streams):
        frames = tail.lines[f"{work}/cam{i}.jsonl"]
        gaps = sum(1 for a, b in zip(frames, frames[1:]) if b[1] != a[1] + 1)
        runs, first_at = [], [None]
        for at, _, model, latency in frames:
            if not runs or runs[-1] != model:
                runs.append(model)
                if len(runs) == 2:
                    first_new.append(at - deploy_at)
                    first_at[0] = at
            if deploy_at - 5 <= at < deploy_at:
                steady.append(latency)
            elif deploy_at <= at <= answered_at + 1:
                swapping.append(latency)
            if deploy_at <= at <= answered_at + 1 and len(runs) == 1:
                building.append(latency)
            elif deploy_at <= at and len(runs) == 2:
                if at <= first_at[0] + 1:
                    new_first.append(latency)
                elif rollback_at - 5 <= at < rollback_at:
                    new_steady.append(latency)
            elif rollback_at <= at <= rolled_at + 1 and len(runs) == 3:
                back_first.append(latency)
        ok = gaps == 0 and len(runs) == 3 and runs[0] == runs[2] and runs[0] != runs[1]
        rows.append({"stream": f"cam{i}", "frames": len(frames), "gaps": gaps, "models": runs, "ok": ok})
        if not ok:
            problems.append(f"cam{i}: {gaps} gap(s), model runs {runs}")
    result["rows"] = rows
    if first_new:
        result["switch_first_s"], result["switch_last_s"] = round(min(first_new), 2), round(max(first_new), 2)
    result["p99_steady_ms"], result["p99_swap_ms"] = round(p99(steady), 1), round(p99(swapping), 1)
    result["p99_building_ms"], result["p99_new_first_s_ms"] = round(p99(building), 1), round(p99(new_first), 1)
    result["p99_new_steady_ms"], result["p99_back_first_s_ms"] = round(p99(new_steady), 1), round(p99(back_first), 1)
    for name, part, against in (("building", building, steady), ("new_first_s", new_first, new_steady),
                                ("back_first_s", back_first, steady)):
        if part and against:
            result[f"ratio_{name}"] = round(p99(part) / p99(against), 2)
    result["problems"] = problems

    print(f"model hot swap, {args.streams} live streams ({result['source']}), engine {args.device}, "
          f"{os.path.basename(MODEL)} -> {result['new']} -> back: ready in {result.get('ready_s')} s, deploy answered "
          f"in {result.get('deploy_s')} s, rollback in {result.get('rollback_s')} s")
    print(f"switch (deploy request -> a stream's first result of the new model): first stream "
          f"{result.get('switch_first_s')} s, last {result.get('switch_last_s')} s; latency p99: steady "
          f"{result['p99_steady_ms']} ms, from the request to 1 s after the answer {result['p99_swap_ms']} ms; "
          f"dropped {result.get('dropped')}, restarts {result.get('restarts')}")
    print(f"latency p99 by the model classifying: old model while the new is built {result['p99_building_ms']} ms "
          f"({result.get('ratio_building')}x its steady {result['p99_steady_ms']} ms); new model's first second "
          f"{result['p99_new_first_s_ms']} ms ({result.get('ratio_new_first_s')}x its steady "
          f"{result['p99_new_steady_ms']} ms); old model's first second back {result['p99_back_first_s_ms']} ms "
          f"({result.get('ratio_back_first_s')}x)")
    print(f"{'stream':8} {'frames':>7} {'gaps':>5}  models (in order)")
    for r in rows:
        print(f"{r['stream']:8} {r['frames']:7d} {r['gaps']:5d}  {' -> '.join(r['models'])}")
    with open(f"{work}/app.log") as f:
        for line in f:
            if "now classifies every stream" in line or "rolled back" in line:
                print("  log: " + line.rstrip()[13:])
    print("swap-check: " + ("ok" if not problems else "FAILED: " + "; ".join(problems)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if not problems:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
