#!/usr/bin/env python3
"""Cold start, measured (#42): one live 30 fps test pattern classified from exec on, twice with one cache folder —
first with empty caches (a fresh machine), then again (a restart, or a pod whose image carries the caches):

  first_result_s   exec -> the first result line (the cold start)
  full_speed_s     exec -> the tuned engine classifying (its switch logged; the first result when it started tuned)
  second_start_s   the second start's exec -> its first result
  second_full_speed_s

and each start's frames: every frame of the pattern classified once, none dropped — across the switch to the tuned
engine too. Writes --json; exit 1 when a start fails, drops or repeats a frame (the targets are printed, not
enforced: they are the issue's to judge).

  scripts/cold-start-check.py --app build/app/video-classifier --json cold_start.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

TUNED_LINE = "the tuned engine now classifies every stream"
UNTUNED_LINE = "started untuned"


def one_start(args, cache, tag, workdir):
    results = os.path.join(workdir, f"{tag}.jsonl")
    log_path = os.path.join(workdir, f"{tag}.log")
    cmd = [args.app, "--config", args.config, "--set", f"inference.device={args.device}", "--input", f"test:{args.pattern}",
           "--set", "input.fps=30", "--set", f"input.width={args.width}", "--set", f"input.height={args.height}",
           "--set", f"input.max_frames={args.frames}", "--output", "none", "--set", f"output.results={results}",
           "--set", f"inference.autotune_cache={cache}", "--log-level", "info"]
    lines = []  # (seconds after exec, stderr line)
    t0 = time.monotonic()
    app = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def read_log():
        with open(log_path, "w") as log:
            for line in app.stderr:
                lines.append((time.monotonic() - t0, line))
                log.write(line)

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    first = None
    while first is None and app.poll() is None:
        try:
            with open(results) as f:
                if any('"top"' in line for line in f):
                    first = time.monotonic() - t0
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    code = app.wait(timeout=args.frames / 30 + 120)
    reader.join(timeout=10)
    tuned_at = next((t for t, line in lines if TUNED_LINE in line), None)
    untuned = any(UNTUNED_LINE in line for _, line in lines)
    frames = []
    with open(results) as f:
        for line in f:
            if '"top"' in line:
                frames.append(json.loads(line)["frame"])
    repeated = len(frames) - len(set(frames))
    missing = args.frames - len(set(frames))
    out = {"exit": code, "first_result_s": first, "full_speed_s": tuned_at if untuned else first,
           "started_untuned": untuned, "tuned_switch_s": tuned_at, "frames": len(frames), "missing": missing,
           "repeated": repeated, "in_order": frames == sorted(frames), "log": log_path}
    print(f"{tag}: exit {code}, first result {fmt(first)} s after exec, "
          f"{'tuned engine at ' + fmt(tuned_at) + ' s' if untuned else 'tuned from the start'}, "
          f"{len(frames)} results of {args.frames} frames ({missing} missing, {repeated} repeated)")
    return out


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True)
    ap.add_argument("--config", default="assets/configs/default.yaml")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--pattern", default="ball")
    ap.add_argument("--width", type=int, default=1920)
    ap.add_argument("--height", type=int, default=1080)
    ap.add_argument("--frames", type=int, default=600, help="frames per start (600: 20 s at 30 fps)")
    ap.add_argument("--json")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="vc-cold-")
    cache = os.path.join(workdir, "cache", "algorithms.json")  # empty: nothing tuned or compiled here yet
    cold = one_start(args, cache, "cold", workdir)
    second = one_start(args, cache, "second", workdir)
    report = {"first_result_s": cold["first_result_s"], "full_speed_s": cold["full_speed_s"],
              "second_start_s": second["first_result_s"], "second_full_speed_s": second["full_speed_s"],
              "cold": cold, "second": second, "frames": args.frames, "size": f"{args.width}x{args.height}",
              "config": args.config}
    print(f"cold first result {fmt(report['first_result_s'])} s (target <= 3), full speed {fmt(report['full_speed_s'])} s "
          f"(target <= 15), second start {fmt(report['second_start_s'])} s (target <= 1.5)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    bad = [s for s in (cold, second)
           if s["exit"] != 0 or s["first_result_s"] is None or s["missing"] or s["repeated"] or not s["in_order"]]
    if bad:
        print("cold-start-check: a start failed, lost or repeated frames (see the logs above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
