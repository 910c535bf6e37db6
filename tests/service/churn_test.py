#!/usr/bin/env python3
"""A service whose cameras come and go for months, in CI's size: 2,000 add/remove cycles over the API (a stream added,
its first result awaited, then removed: its outputs finalized, its thread joined, its state let go of) while 4 live
streams run. Threads, file descriptors and RSS after 2,000 cycles must be where they were after 100 (printed); the 4
streams drop nothing; every removal answers 200 with its outputs finalized; no added stream ends by itself; /metrics
keeps one series per live name.

    python3 tests/service/churn_test.py --app build/app/video-classifier --out build/churn [--cycles 2000]

Exit 0 pass, 1 fail, 77 skipped (no /proc, no app). Standard library only."""
import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

TOKEN = "churn-token-0123"
BASE = ["a", "b", "c", "d"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_counts(pid):
    """(threads, open descriptors, RSS in MB) of a process."""
    threads = len(os.listdir(f"/proc/{pid}/task"))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    return threads, fds, rss


class Client:
    """One keep-alive connection to the service (reopened if the server closed it)."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def call(self, method, path, body=None, token=True):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                text = r.read().decode("utf-8", "replace")
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, text
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cycles", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=100, help="cycles before the first measurement")
    ap.add_argument("--no-rss", action="store_true",
                    help="do not judge RSS (under AddressSanitizer, whose quarantine keeps freed memory by design)")
    args = ap.parse_args()
    if not os.path.exists(args.app) or not os.path.isdir("/proc/self/task"):
        print("churn: skipped (no app binary, or no /proc)")
        return 77
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.makedirs(args.out, exist_ok=True)
    port = free_port()
    with open(os.path.join(args.out, "token"), "w") as f:
        f.write(TOKEN + "\n")
    with open(os.path.join(args.out, "labels.txt"), "w") as f:
        f.write("".join(f"class-{i}\n" for i in range(10)))
    # drop: block — a live pattern on a 2-core machine shared with other tests would drop a frame whenever the machine
    # is busy, churn or not; blocked, every frame must come through, and the results say whether one was lost.
    inputs = "".join(f"  - {{name: {n}, kind: test, pattern: ball, fps: 10, width: 160, height: 120, drop: block}}\n"
                     for n in BASE)
    config = os.path.join(args.out, "service.yaml")
    if os.path.isdir(os.path.join(args.out, "out")):
        for old in os.listdir(os.path.join(args.out, "out")):
            os.remove(os.path.join(args.out, "out", old))
    with open(config, "w") as f:
        f.write(f"api:\n  enabled: true\n  token_file: token\n  rate_per_s: 10000\n  max_streams: 8\n"
                f"metrics:\n  port: {port}\ninputs:\n{inputs}output:\n  results: out/{{stream}}.jsonl\n"
                f"logging:\n  perf_interval_s: 0\n")
    log = open(os.path.join(args.out, "app.log"), "w")
    app = subprocess.Popen([os.path.abspath(args.app), "--config", config, "--model",
                            os.path.join(root, "tests/fixtures/basic_narrow.safetensors"),
                            "--set", "model.labels=" + os.path.join(args.out, "labels.txt"), "--set", "model.input_size=64",
                            "--set", "inference.device=cpu", "--set", "logging.level=warn"],
                           cwd=root, stdout=log, stderr=subprocess.STDOUT)
    client = Client(port)
    failures = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.call("GET", "/readyz", token=False)[0] == 200:
                    break
            except OSError:
                pass
            if app.poll() is not None or time.monotonic() > deadline:
                print("churn: the service did not become ready")
                return 1
            time.sleep(0.1)
        start = time.monotonic()
        measured = {}
        ended_by_itself = []
        first_result_ms = []
        for k in range(1, args.cycles + 1):
            status, text = client.call("POST", "/api/v1/streams",
                                       {"name": "churn", "kind": "test", "pattern": "smpte", "fps": 10, "width": 64,
                                        "height": 48})
            if status != 201:
                failures.append(f"cycle {k}: add answered {status}: {text}")
                break
            t0 = time.monotonic()
            while True:  # its first result
                status, text = client.call("GET", "/api/v1/streams/churn")
                view = json.loads(text) if status == 200 else {}
                if view.get("frames", 0) > 0 or view.get("state") in ("ended", "failed") or time.monotonic() - t0 > 30:
                    break
                time.sleep(0.005)
            first_result_ms.append((time.monotonic() - t0) * 1000)
            if view.get("state") != "running":
                ended_by_itself.append((k, view.get("state"), view.get("end_reason"), view.get("error")))
            status, text = client.call("DELETE", "/api/v1/streams/churn")
            if status != 200 or not json.loads(text).get("finalized"):
                failures.append(f"cycle {k}: remove answered {status}: {text}")
                break
            if k in (args.warmup, args.cycles):
                measured[k] = proc_counts(app.pid)
            if k % 250 == 0:
                print(f"churn: {k} cycles, {time.monotonic() - start:.0f} s", flush=True)
        seconds = time.monotonic() - start
        # The 4 streams, and the series /metrics has.
        status, text = client.call("GET", "/api/v1/streams")
        streams = {s["name"]: s for s in json.loads(text)["streams"]}
        status, metrics = client.call("GET", "/metrics", token=False)
        series = [line for line in metrics.splitlines() if line.startswith("vc_stream_frames_total{")]
    finally:
        if client.conn:
            client.conn.close()
        app.send_signal(signal.SIGINT)
        try:
            code = app.wait(60)
        except subprocess.TimeoutExpired:
            app.kill()
            code = -9
        log.close()

    print(f"\nchurn: {len(first_result_ms)} cycles in {seconds:.0f} s "
          f"({seconds / max(1, len(first_result_ms)) * 1000:.0f} ms each; first result p50 "
          f"{sorted(first_result_ms)[len(first_result_ms) // 2] if first_result_ms else -1:.0f} ms)")
    print(f"{'after':>8} {'threads':>8} {'fds':>6} {'RSS MB':>8}")
    for k, (threads, fds, rss) in sorted(measured.items()):
        print(f"{k:>8} {threads:>8} {fds:>6} {rss:>8.1f}")
    if len(measured) == 2:
        (t0, f0, r0), (t1, f1, r1) = measured[args.warmup], measured[args.cycles]
        if t1 > t0 + 2:
            failures.append(f"threads grew: {t0} after {args.warmup} cycles, {t1} after {args.cycles}")
        if f1 > f0 + 2:
            failures.append(f"file descriptors grew: {f0} after {args.warmup} cycles, {f1} after {args.cycles}")
        if r1 > r0 + 8 and not args.no_rss:
            failures.append(f"RSS grew: {r0:.1f} MB after {args.warmup} cycles, {r1:.1f} MB after {args.cycles}")
    elif not failures:
        failures.append("not measured")
    for name in BASE:
        s = streams.get(name)
        if not s or s["state"] != "running" or s["dropped"] != 0 or s["frames"] <= 0:
            failures.append(f"stream {name}: {s}")
        # Every frame has its line, in order, none missing (results/NAME.jsonl, finalized at the stop).
        frames = []
        with open(os.path.join(args.out, "out", f"{name}.jsonl")) as f:
            for line in f:
                item = json.loads(line)
                if "top" in item:
                    frames.append(item["frame"])
        if frames != list(range(len(frames))) or len(frames) < (s or {}).get("frames", 1):
            failures.append(f"stream {name}: {len(frames)} result lines, not frames 0..N-1 in order")
    if ended_by_itself:
        failures.append(f"{len(ended_by_itself)} added stream(s) ended by themselves before their removal: "
                        f"{ended_by_itself[:5]}")
    if "churn" in streams:
        failures.append("the removed stream is still listed")
    names = sorted(line.split('stream="')[1].split('"')[0] for line in series)
    if names != sorted(BASE):
        failures.append(f"/metrics has vc_stream_frames_total for {names}, not one per live stream ({sorted(BASE)})")
    if code != 0:
        failures.append(f"the service exited {code}")
    for f in failures:
        print("FAIL:", f)
    print("churn: " + ("passed" if not failures else "FAILED"))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
