#!/usr/bin/env python3
"""What watching live costs (device-run.sh's `live` stage on the GPU; the CPU measurement beside it runs anywhere).

The app runs as a service with N live streams — test patterns, or with --file a video looped and paced as a camera
(NVDEC decodes it on a GPU) — and the same run is measured in windows of --seconds each: nobody watching; one
live.mp4 viewer of the first stream; --viewers of it at once; one live.mp4 viewer on each of the first --watch
streams; one live.mjpeg viewer of the first stream. With --x264, a second run with a labelled H.264 output of every
stream (output.kind file: the overlay drawn, x264 on the CPU) is measured the same way. Per window: the app's CPU
(cores, from /proc), the latency p99 of every result, the frames classified and dropped, the bytes each viewer got (every
live.mp4 viewer must get an init segment — ftyp — and go on getting fragments). Checked: nothing dropped, every
viewer served. Drops while the streams start (before the first window) are counted apart. Printed as a table;
written as JSON.

  usage: scripts/live-check.py --app build/app/video-classifier [--streams 1] [--file clip.mp4] [--viewers 20]
                               [--watch 0] [--x264] [--device cuda] [--seconds 10] [--json out.json] [-- app args]
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
import urllib.request

from service_app import free_port, stop, wait_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


# The threads that serve the live view: the stream's remuxer (its appsrc's and mp4mux's GStreamer threads), the HTTP
# server's, the MJPEG view's producer. Their own CPU is a viewer's cost, apart from the drift of the whole app's CPU
# from one window to the next (a few % of a core on a busy machine: the engine, the decoders).
VIEW_THREADS = ("livesrc:src", "livemux:src", "vc-http", "vc-http-io", "vc-mjpeg")


def thread_cpu(pid):
    """{thread name: CPU seconds of the app's threads of that name}."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # (a thread that ended)
        out[name] = out.get(name, 0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


class Viewer(threading.Thread):
    """Reads a live body until stopped, counting its bytes; keeps its first bytes."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.bytes, self.head, self.error = url, 0, b"", None
        self.stopping = threading.Event()
        self.start()

    def run(self):
        try:
            with urllib.request.urlopen(self.url, timeout=30) as r:
                while not self.stopping.is_set():
                    chunk = r.read1(65536)
                    if not chunk:
                        break
                    if len(self.head) < 16:
                        self.head += chunk[:16]
                    self.bytes += len(chunk)
        except Exception as e:  # (reported: a viewer that got nothing fails the check)
            self.error = str(e)

    def stop(self):
        self.stopping.set()


class Results:
    """The streams' results files as they grow: (read at, latency ms) of each frame."""

    def __init__(self, paths):
        self.paths, self.latencies, self.frames = paths, [], 0
        self._files, self._partial = {}, {p: "" for p in paths}

    def read(self):
        now = time.monotonic()
        for p in self.paths:
            if p not in self._files:
                if not os.path.exists(p):
                    continue
                self._files[p] = open(p)
            *complete, self._partial[p] = (self._partial[p] + self._files[p].read()).split("\n")
            for line in complete:
                r = json.loads(line)
                if "top" in r:
                    self.latencies.append((now, r["latency_ms"]))
                    self.frames += 1


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))] if values else float("nan")


def dropped(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return sum(s.get("dropped", 0) for s in json.loads(r.read()).get("streams", []))


def run_app(args, work, x264):
    port = free_port()
    source = (f"kind: file, path: '{os.path.abspath(args.file)}', loop: true, realtime: true" if args.file else
              "kind: test, pattern: ball, width: 640, height: 480, fps: 30")
    inputs = "".join(f"  - {{name: cam{i}, {source}}}\n" for i in range(args.streams))
    output = (f"{{kind: file, path: '{work}/out-{{stream}}.mp4', results: '{work}/{{stream}}.jsonl'}}" if x264 else
              f"{{kind: none, results: '{work}/{{stream}}.jsonl'}}")
    with open(f"{work}/service.yaml", "w") as f:
        f.write(f"api: {{enabled: true, live_clients: 256, live_clients_per_stream: {max(args.viewers, 1)}, "
                f"max_connections_per_client: 512}}\n"
                f"metrics: {{port: {port}}}\n"
                f"inference: {{device: {args.device}}}\n"
                f"output: {output}\n"
                f"inputs:\n{inputs}")
    log = open(f"{work}/app.log", "w")
    app = subprocess.Popen([args.app, "--config", f"{work}/service.yaml", *args.app_args], stdout=log,
                           stderr=subprocess.STDOUT)
    wait_ready(app, port, "live-check", f"{work}/app.log")
    return app, port, log


def measure(args, work, x264, problems):
    app, port, log = run_app(args, work, x264)
    url = f"http://127.0.0.1:{port}/api/v1/streams"
    results = Results([f"{work}/cam{i}.jsonl" for i in range(args.streams)])
    windows = [("nobody watching", [])]
    if not x264:
        windows += [("1 live.mp4 viewer", [f"{url}/cam0/live.mp4"])]
        if args.viewers > 1:
            windows += [(f"{args.viewers} live.mp4 viewers of one stream", [f"{url}/cam0/live.mp4"] * args.viewers)]
        if args.watch > 0:
            windows += [(f"{args.watch} streams watched (live.mp4)", [f"{url}/cam{i}/live.mp4" for i in range(args.watch)])]
        windows += [("1 live.mjpeg viewer", [f"{url}/cam0/live.mjpeg"])]
    rows = []
    try:
        time.sleep(args.seconds)  # (the start is left out: its drops are counted apart)
        at_start = dropped(url)
        for name, urls in windows:
            viewers = [Viewer(u) for u in urls]
            time.sleep(1)  # (connected and served the first picture)
            results.read()
            frames0, cpu0, t0, dropped0 = results.frames, cpu_seconds(app.pid), time.monotonic(), dropped(url)
            threads0 = thread_cpu(app.pid)
            time.sleep(args.seconds)
            results.read()
            cpu1, t1, dropped1 = cpu_seconds(app.pid), time.monotonic(), dropped(url)
            threads1 = thread_cpu(app.pid)
            busy = {n: (c - threads0.get(n, 0)) / (t1 - t0) for n, c in threads1.items()}
            for v in viewers:
                v.stop()
            lat = [l for at, l in results.latencies if t0 <= at <= t1]
            got = [v.bytes for v in viewers]
            for v in viewers:
                if v.bytes == 0 or ("live.mp4" in v.url and v.head[4:8] != b"ftyp"):
                    problems.append(f"{name}: a viewer got {v.bytes} bytes ({v.error or 'no ftyp'})")
            if dropped1 > dropped0:
                problems.append(f"{name}: {dropped1 - dropped0} frames dropped")
            rows.append({"window": name, "viewers": len(viewers), "cores": round((cpu1 - cpu0) / (t1 - t0), 3),
                         "dropped": dropped1 - dropped0,
                         "fps": round((results.frames - frames0) / (t1 - t0), 1), "p99_ms": round(p99(lat), 1),
                         "kbytes_per_viewer": round(sum(got) / max(1, len(got)) / 1024, 1), "x264": x264,
                         "view_thread_cores": round(sum(c for n, c in busy.items() if n in VIEW_THREADS), 4),
                         "threads": {n: round(c, 3) for n, c in sorted(busy.items(), key=lambda i: -i[1])[:10]}})
            time.sleep(1)
        total = {"at_start": at_start, "in_all": dropped(url)}
    finally:
        code = stop(app)
        log.close()
    if code != 0:
        problems.append(f"the app exited {code} (see {work}/app.log)")
    return rows, total


def main():
    argv = sys.argv[1:]
    app_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True)
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--file", help="a video each stream loops, paced as a camera (default: test patterns)")
    ap.add_argument("--viewers", type=int, default=20, help="live.mp4 viewers of the first stream at once")
    ap.add_argument("--watch", type=int, default=0, help="streams watched at once, a live.mp4 viewer each")
    ap.add_argument("--x264", action="store_true", help="also a run with a labelled H.264 output of every stream")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    args.app_args = app_args

    problems, rows, drops = [], [], {}
    work = tempfile.mkdtemp(prefix="vc-live-")
    for x264 in ([False, True] if args.x264 else [False]):
        os.makedirs(f"{work}/{int(x264)}")
        r, drops["x264" if x264 else "remux"] = measure(args, f"{work}/{int(x264)}", x264, problems)
        rows += r
    base = rows[0]
    print(f"live view cost: {args.streams} stream(s) ({args.file or 'test pattern 640x480 30 fps'}), engine {args.device}, "
          f"{args.seconds:g} s windows")
    print(f"{'window':40} {'cores':>6} {'per viewer':>11} {'its threads':>12} {'fps':>7} {'p99 ms':>7} {'KiB/viewer':>11} "
          f"{'dropped':>8}")
    for r in rows:
        extra = ((r["cores"] - base["cores"]) / r["viewers"]) if r["viewers"] else None
        own = ((r["view_thread_cores"] - base["view_thread_cores"]) / r["viewers"]) if r["viewers"] else None
        r["cores_per_viewer"] = None if extra is None else round(extra, 4)
        r["view_thread_cores_per_viewer"] = None if own is None else round(own, 4)
        name = "labelled x264 output of every stream" if r["x264"] else r["window"]
        print(f"{name:40} {r['cores']:6.3f} {('%+.1f %%' % (100 * extra)) if extra is not None else '':>11} "
              f"{('%+.2f %%' % (100 * own)) if own is not None else '':>12} "
              f"{r['fps']:7.1f} {r['p99_ms']:7.1f} {r['kbytes_per_viewer']:11.1f} {r['dropped']:8d}")
    print("(per viewer: the app's CPU over the first window's; its threads: that of the live view's own threads — "
          f"{', '.join(VIEW_THREADS)} — the same way, apart from the rest's drift)")
    for run, d in drops.items():
        print(f"frames dropped ({run} run): {d['at_start']} while the streams started (before the first window), "
              f"{d['in_all']} in all")
    print("live-check: " + ("ok" if not problems else "FAILED: " + "; ".join(problems)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"streams": args.streams, "source": args.file, "device": args.device, "seconds": args.seconds,
                       "rows": rows, "dropped": drops, "problems": problems}, f,
                      indent=2)
    if not problems:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
