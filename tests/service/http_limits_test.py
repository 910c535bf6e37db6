#!/usr/bin/env python3
"""The HTTP server's bounds, against a real run of the app as a service (CPU engine, one test-pattern stream): what
any client sends, with or without the API token, costs the server a bounded amount of memory and time, and never
delays the health probes.

    python3 tests/service/http_limits_test.py --app build/app/video-classifier --out build/http-limits

It starts the app from the repository root (config, token and labels written into --out; its log is --out/app.log),
and checks:

  1. baseline: the app's RSS (VmRSS, /proc/PID/status) and the /healthz latency (median of 5);
  2. a 200 MB chunked body to POST /api/v1/streams with the token: 413 after < 10 MB sent, the connection closed,
     RSS < baseline + 20 MB; a declared Content-Length of 100 KB or 200 MB: 413 from the header alone (without the
     token: 401); a chunked body without a token: 401, with a wrong one: 403 — all before any of the body is sent;
  3. a 100 MB header field streamed in 64 KiB pieces: 431 after < 1 MB sent, closed, RSS < baseline + 20 MB; 120
     header fields: 431;
  4. 100 idle clients and 100 clients trickling a header (one byte every 0.5 s), each from its own 127.x address,
     all open together: /healthz from 127.0.0.1 answers 200 within 1 s each of 10 tries, RSS < baseline + 20 MB;
     then the server closes every one of them (header deadline 10 s) within 15 s of its connection;
  5. 30 connections from one address (api.max_connections_per_client = 16): 16 stay open, 14 are answered
     "HTTP/1.1 503" and closed at once; /healthz from another address still answers 200;
  6. Content-Encoding: gzip on a POST with the token: 415; Host: evil.example: 403 naming api.allowed_hosts;
     Host: localhost:PORT: 200;
  7. SIGINT once every client is gone: the app exits with 0.

RSS is sampled every 20 ms while a check runs; the table at the end shows each check's peak.

Exit 0: passed; 1: failed (each failed check says what was sent and what came back); 77: skipped (/proc not
readable, or no app binary).
"""
import argparse
import os
import sys
import threading
import time

from raw_http import (MiB, TOKEN, App, Failure, Reply, Results, RssWatch, connect, head_bytes, mb,
                      read_until_closed, request, rss_kb, send_until_answered)

PER_CLIENT = 16  # api.max_connections_per_client of the service it starts
RSS_MARGIN_KB = 20 * 1024


def healthz(port, source="127.0.0.1", host=None):
    return request(port, "GET", "/healthz", source=source, host=host, timeout=5)


class Context:
    def __init__(self, app, results):
        self.app = app
        self.port = app.port
        self.results = results
        self.watch = RssWatch(app.process.pid)
        self.baseline_kb = 0
        self.peaks = {}  # check -> peak RSS (KiB)

    def rss_check(self, check):
        peak = self.watch.peak()
        self.peaks[check] = peak
        limit = self.baseline_kb + RSS_MARGIN_KB
        self.results.check(f"{check}: peak RSS", peak < limit, f"{mb(peak)} (limit {mb(limit)}, "
                           f"+{mb(peak - self.baseline_kb)})", f"the RSS rose {mb(peak - self.baseline_kb)} over the baseline")


def check_baseline(ctx):
    """1. RSS, once it has settled (no change over 1 MB in 2 s, at most 15 s), and /healthz latency."""
    r = ctx.results
    pid = ctx.app.process.pid
    samples = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        samples.append(rss_kb(pid) or 0)
        if len(samples) >= 5 and max(samples[-5:]) - min(samples[-5:]) < 1024:
            break
        time.sleep(0.5)
    ctx.baseline_kb = max(samples[-5:])
    r.check("1 baseline RSS", ctx.baseline_kb > 0, mb(ctx.baseline_kb), "no VmRSS for the app")
    replies = [healthz(ctx.port) for _ in range(5)]
    times = sorted(x.seconds for x in replies)
    bad = [str(x) for x in replies if x.status != 200]
    r.check("1 /healthz latency (median of 5)", not bad,
            f"{times[2] * 1000:.1f} ms (min {times[0] * 1000:.1f}, max {times[-1] * 1000:.1f})", f"not 200: {bad}")
    ctx.healthz_ms = times[2] * 1000
    ctx.watch.start()


def post_head(ctx, headers):
    return head_bytes("POST", "/api/v1/streams", ctx.port,
                      [("Content-Type", "application/json")] + list(headers), close=False)


def check_big_body(ctx):
    """2. 200 MB bodies: refused early whatever the framing; without the token before the body."""
    r = ctx.results
    ctx.watch.phase()
    total = 200 * MiB
    chunk = 64 * 1024
    piece = f"{chunk:x}\r\n".encode() + b"a" * chunk + b"\r\n"  # one chunk of the chunked body, repeated
    with connect(ctx.port, "127.0.5.1", sndbuf=256 * 1024) as s:
        s.sendall(post_head(ctx, [("Authorization", f"Bearer {TOKEN}"), ("Transfer-Encoding", "chunked")]))
        start = time.monotonic()
        sent, why = send_until_answered(s, piece, total)
        data, closed = read_until_closed(s, 10)
        reply = Reply(data, closed, time.monotonic() - start)
    r.check("2 chunked 200 MB, token: status", reply.status == 413, f"{reply.status_line!r} after {sent / MiB:.2f} MB "
            f"sent, {reply.seconds:.2f} s ({why})", f"expected 413; got {reply}")
    r.check("2 chunked 200 MB, token: bytes sent before the answer", sent < 10 * MiB, f"{sent / MiB:.2f} MB (< 10 MB)",
            f"{sent} bytes went out before the answer ({why})")
    r.check("2 chunked 200 MB, token: connection closed", closed in ("eof", "reset"), closed,
            "the connection was still open 10 s after the answer")

    # Declared up front (Content-Length): refused from the header alone, none of the body sent. 100 KB is over the
    # route's 64 KiB; 200 MB is over everything (with the token: 413; without: the gate's 401 comes first).
    for label, source, length, auth, want in (
            ("Content-Length 100 KB, token", "127.0.5.2", 100_000, True, 413),
            ("Content-Length 200 MB, token", "127.0.5.3", total, True, 413),
            ("Content-Length 200 MB, no token", "127.0.5.4", total, False, 401)):
        headers = [("Content-Length", str(length))] + ([("Authorization", f"Bearer {TOKEN}")] if auth else [])
        with connect(ctx.port, source) as s:
            s.sendall(post_head(ctx, headers))
            start = time.monotonic()
            data, closed = read_until_closed(s, 10)
            reply = Reply(data, closed, time.monotonic() - start)
        r.check(f"2 {label}: {want} before the body", reply.status == want and closed != "open", str(reply),
                f"sent the header only (POST /api/v1/streams, Content-Length: {length}"
                f"{', the token' if auth else ', no token'}): expected {want} and a closed connection; got {reply}")

    # Without the token, or with a wrong one: the gate answers from the header (nothing of the body is ever sent).
    for label, source, auth, want in (("no token", "127.0.5.5", [], 401),
                                      ("wrong token", "127.0.5.6", [("Authorization", "Bearer not-the-token")], 403)):
        with connect(ctx.port, source) as s:
            s.sendall(post_head(ctx, auth + [("Transfer-Encoding", "chunked")]))
            start = time.monotonic()
            data, closed = read_until_closed(s, 10)
            reply = Reply(data, closed, time.monotonic() - start)
        r.check(f"2 chunked, {label}: {want} before the body", reply.status == want and closed != "open", str(reply),
                f"expected {want} and a closed connection with no body sent")
    ctx.rss_check("2")
    ctx.after_kb = rss_kb(ctx.app.process.pid)
    print(f"        RSS after check 2: {mb(ctx.after_kb)}")


def check_big_header(ctx):
    """3. A 100 MB header field; too many fields."""
    r = ctx.results
    ctx.watch.phase()
    total = 100 * MiB
    with connect(ctx.port, "127.0.6.1", sndbuf=64 * 1024) as s:
        s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{ctx.port}\r\nX-Big: ".encode())
        start = time.monotonic()
        sent, why = send_until_answered(s, b"a" * (64 * 1024), total)
        data, closed = read_until_closed(s, 10)
        reply = Reply(data, closed, time.monotonic() - start)
    r.check("3 header of 100 MB: status", reply.status == 431, f"{reply.status_line!r} after {sent / MiB:.3f} MB sent, "
            f"{reply.seconds:.2f} s ({why})", f"expected 431; got {reply}")
    r.check("3 header of 100 MB: bytes sent before the answer", sent < MiB, f"{sent / 1024:.0f} KiB (< 1024 KiB)",
            f"{sent} bytes went out before the answer ({why})")
    r.check("3 header of 100 MB: connection closed", closed in ("eof", "reset"), closed,
            "the connection was still open 10 s after the answer")
    fields = [(f"X-Field-{i}", "1") for i in range(120)]
    reply = request(ctx.port, "GET", "/healthz", headers=fields, source="127.0.6.2")
    r.check("3 120 header fields: 431", reply.status == 431, str(reply), f"expected 431; got {reply}")
    ctx.rss_check("3")


class Crowd(threading.Thread):
    """Idle and trickling clients, each from its own address. The thread watches every socket (and trickles one byte
    of a never-ending header every `interval` seconds) until the server has closed them all, or `limit_s` passed."""

    TRICKLE = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 1000

    def __init__(self, port, idle_sources, trickle_sources, interval=0.5, limit_s=20.0):
        super().__init__(daemon=True)
        self.interval = interval
        self.limit_s = limit_s
        self.lock = threading.Lock()
        self.clients = []  # dicts: sock, kind, source, connected, closed_at, how, received, sent
        try:
            for kind, sources in (("idle", idle_sources), ("trickle", trickle_sources)):
                for source in sources:
                    sock = connect(port, source)
                    sock.setblocking(False)
                    self.clients.append({"sock": sock, "kind": kind, "source": source, "connected": time.monotonic(),
                                         "closed_at": None, "how": None, "received": b"", "sent": 0})
        except OSError:
            self.close()
            raise

    def run(self):
        end = time.monotonic() + self.limit_s
        next_trickle = time.monotonic()
        while time.monotonic() < end:
            now = time.monotonic()
            with self.lock:
                open_ = [c for c in self.clients if c["closed_at"] is None]
                if not open_:
                    return
                for c in open_:
                    self.poll(c, now)
                if now >= next_trickle:
                    next_trickle += self.interval
                    for c in open_:
                        if c["kind"] == "trickle" and c["closed_at"] is None:
                            self.trickle(c, now)
            time.sleep(0.05)

    @staticmethod
    def poll(c, now):
        try:
            data = c["sock"].recv(4096)
        except BlockingIOError:
            return
        except OSError:
            c["closed_at"], c["how"] = now, "reset"
            return
        if data:
            c["received"] += data
        else:
            c["closed_at"], c["how"] = now, "eof"

    def trickle(self, c, now):
        try:
            c["sent"] += c["sock"].send(self.TRICKLE[c["sent"] % len(self.TRICKLE):][:1])
        except BlockingIOError:
            pass
        except OSError:
            c["closed_at"], c["how"] = now, "reset (on send)"

    def open_count(self):
        with self.lock:
            return sum(1 for c in self.clients if c["closed_at"] is None)

    def close(self):
        for c in self.clients:
            c["sock"].close()


def check_crowd(ctx):
    """4. 100 idle + 100 trickling clients: the probes stay fast, memory stays put, and the header deadline ends
    them all."""
    r = ctx.results
    ctx.watch.phase()
    idle = [f"127.0.1.{i}" for i in range(1, 101)]
    trickling = [f"127.0.3.{i}" for i in range(1, 101)]
    crowd = Crowd(ctx.port, idle, trickling)
    try:
        crowd.start()
        connected = len(crowd.clients)
        latencies, bad = [], []
        for _ in range(10):
            reply = healthz(ctx.port)
            latencies.append(reply.seconds)
            if reply.status != 200 or reply.seconds >= 1.0:
                bad.append(str(reply))
            time.sleep(0.1)
        still_open = crowd.open_count()
        ms = ", ".join(f"{t * 1000:.1f}" for t in latencies)
        r.check("4 clients connected and held open", connected == 200 and still_open == 200,
                f"{connected} connected, {still_open} open after the probes",
                f"{200 - still_open} were closed before the probes ended (sooner than the 10 s header deadline)")
        r.check("4 /healthz among 200 clients: 10 tries, each 200 within 1 s", not bad,
                f"ms: {ms} (max {max(latencies) * 1000:.1f})", f"slow or not 200: {bad}")
        ctx.crowd_healthz_ms = latencies
        ctx.rss_check("4")
        crowd.join(timeout=crowd.limit_s + 5)
        with crowd.lock:
            after = [(c["closed_at"] - c["connected"]) if c["closed_at"] else None for c in crowd.clients]
            late = [f"{c['kind']} {c['source']}" for c, t in zip(crowd.clients, after) if t is None or t > 15]
            talked = [f"{c['source']}: {c['received'][:80]!r}" for c in crowd.clients if c["received"]]
            trickled = [c["sent"] for c in crowd.clients if c["kind"] == "trickle"]
            hows = {}
            for c in crowd.clients:
                hows[c["how"]] = hows.get(c["how"], 0) + 1
        closed = [t for t in after if t is not None]
        spread = f"{min(closed):.1f}..{max(closed):.1f} s" if closed else "none"
        r.check("4 every client closed by the server within 15 s", not late,
                f"{len(closed)}/200 closed after {spread} ({hows}); trickled {min(trickled)}..{max(trickled)} bytes each",
                f"{len(late)} still open 15 s after connecting: {late[:5]}")
        if talked:
            print(f"        (the server answered {len(talked)} of them before closing: {talked[:3]})")
    finally:
        crowd.close()


def check_per_client(ctx):
    """5. 30 connections from one address: PER_CLIENT stay, the rest get 503 and are closed at once."""
    r = ctx.results
    ctx.watch.phase()
    clients = []
    try:
        for _ in range(30):
            s = connect(ctx.port, "127.0.2.1")
            s.setblocking(False)
            clients.append({"sock": s, "connected": time.monotonic(), "closed_at": None, "received": b""})
        refused_wanted = 30 - PER_CLIENT
        deadline = time.monotonic() + 10

        def poll_all():
            for c in clients:
                if c["closed_at"] is None:
                    Crowd.poll(c, time.monotonic())

        while time.monotonic() < deadline and sum(c["closed_at"] is not None for c in clients) < refused_wanted:
            poll_all()
            time.sleep(0.02)
        time.sleep(0.5)  # (more closing now would be a fault: let it show)
        poll_all()
        refused = [c for c in clients if c["closed_at"] is not None]
        open_ = [c for c in clients if c["closed_at"] is None]
        busy = [c for c in refused if c["received"].startswith(b"HTTP/1.1 503")]
        slowest = max((c["closed_at"] - c["connected"] for c in refused), default=0)
        other = [c["received"][:60] for c in refused if not c["received"].startswith(b"HTTP/1.1 503")]
        r.check(f"5 30 from 127.0.2.1: {PER_CLIENT} open, {refused_wanted} answered 503 and closed",
                len(open_) == PER_CLIENT and len(busy) == refused_wanted and slowest < 3.0,
                f"{len(open_)} open, {len(busy)} got 503 and were closed (the slowest {slowest * 1000:.0f} ms after "
                f"connecting)", f"other answers: {other}; open ones that received data: "
                                f"{[c['received'][:60] for c in open_ if c['received']]}")
        reply = healthz(ctx.port, source="127.0.2.2")
        r.check("5 /healthz from 127.0.2.2 meanwhile: 200", reply.status == 200, str(reply), f"got {reply}")
        poll_all()
        silent = [c for c in clients if c["closed_at"] is None and not c["received"]]
        r.check(f"5 the {PER_CLIENT} stay open (after the probe)", len(silent) == PER_CLIENT, f"{len(silent)} open",
                "some of the admitted connections were closed or answered")
    finally:
        for c in clients:
            c["sock"].close()
    ctx.rss_check("5")


def check_cap(binary, out, results):
    """8. At the cap of connections in all (a service of its own, max_connections 24): 40 idle clients from 40
    addresses are each taken, the ones that waited longest for a header closed to make room; /healthz gets in."""
    app = App(binary, out, PER_CLIENT, max_connections=24)
    clients = []
    try:
        app.start()
        for k in range(40):
            s = connect(app.port, f"127.0.4.{k + 1}")
            s.setblocking(False)
            clients.append({"sock": s, "connected": time.monotonic(), "closed_at": None, "received": b""})
            time.sleep(0.01)  # (one after another: "the oldest" is well defined)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(c["closed_at"] is not None for c in clients) < 16:
            for c in clients:
                if c["closed_at"] is None:
                    Crowd.poll(c, time.monotonic())
            time.sleep(0.02)
        reply = healthz(app.port, source="127.0.4.200")
        closed = [k for k, c in enumerate(clients) if c["closed_at"] is not None]
        busy = [k for k, c in enumerate(clients) if c["received"].startswith(b"HTTP/1.1 503")]
        results.check("8 at max_connections: the longest-waiting idle ones make room", len(closed) >= 16 and not busy
                      and max(closed, default=0) < 24, f"{len(closed)} closed (the earliest: {closed[:3]}), {len(busy)} got 503",
                      "newcomers were refused, or the wrong ones were closed")
        results.check("8 /healthz at the cap: 200", reply.status == 200, str(reply), f"got {reply}")
    finally:
        for c in clients:
            c["sock"].close()
        code = app.stop()
        results.check("8 SIGINT: exit code", code == 0, str(code), f"exit code {code}")


def check_encoding_and_host(ctx):
    """6. Encoded bodies and foreign Host names."""
    r = ctx.results
    ctx.watch.phase()
    body = b"\x1f\x8b\x08\x00" + b"\x00" * 60  # (looks like gzip; never decoded)
    reply = request(ctx.port, "POST", "/api/v1/streams", source="127.0.7.1", body=body,
                    headers=[("Authorization", f"Bearer {TOKEN}"), ("Content-Type", "application/json"),
                             ("Content-Encoding", "gzip")])
    r.check("6 Content-Encoding: gzip, token: 415", reply.status == 415, str(reply), f"expected 415; got {reply}")
    reply = healthz(ctx.port, source="127.0.7.2", host="evil.example")
    error = (reply.json() or {}).get("error", "") if isinstance(reply.json(), dict) else ""
    r.check("6 Host: evil.example: 403 naming api.allowed_hosts", reply.status == 403 and "api.allowed_hosts" in error,
            str(reply), f"expected 403 with a JSON error naming api.allowed_hosts; got {reply}")
    reply = healthz(ctx.port, source="127.0.7.3", host=f"localhost:{ctx.port}")
    r.check(f"6 Host: localhost:{ctx.port}: 200", reply.status == 200, str(reply), f"expected 200; got {reply}")
    ctx.rss_check("6")


CHECKS = [check_big_body, check_big_header, check_crowd, check_per_client, check_encoding_and_host]


def run(args):
    binary = os.path.abspath(args.app)
    if not os.access("/proc/self/status", os.R_OK):
        print("skipped: /proc is not readable (the app's RSS is read from /proc/PID/status)")
        return 77
    if not os.path.isfile(binary) or not os.access(binary, os.X_OK):
        print(f"skipped: no app binary at {binary}")
        return 77
    out = os.path.abspath(args.out)
    started = time.monotonic()
    results = Results()
    app = App(binary, out, PER_CLIENT)
    try:
        print(f"http limits: starting {binary} (port {app.port}, log {out}/app.log)", flush=True)
        app.start()
        ctx = Context(app, results)
        check_baseline(ctx)
        for check in CHECKS:
            print(check.__doc__.splitlines()[0], flush=True)
            if app.process.poll() is not None:
                results.check(check.__name__, False, "not run", f"the app exited ({app.process.returncode})")
                continue
            try:
                check(ctx)
            except (OSError, Failure) as e:
                results.check(check.__name__, False, "raised", f"{type(e).__name__}: {e}")
        ctx.watch.stopped.set()
        print("7. SIGINT once every client is gone", flush=True)
        alive = app.process.poll() is None
        stopping = time.monotonic()
        code = app.stop()
        results.check("7 SIGINT: exit code", alive and code == 0,
                      f"{code} after {time.monotonic() - stopping:.1f} s",
                      "the app had already exited" if not alive else
                      f"exit code {code} (None: no exit within 60 s, killed)")
        print(check_cap.__doc__.splitlines()[0], flush=True)
        check_cap(binary, os.path.join(out, "cap"), results)
    except Failure as e:
        results.failures.append(str(e))
        print(f"FAILED: {e}", file=sys.stderr)
    finally:
        app.stop(timeout=10)
        if app.log:
            app.log.close()
    if results.rows:
        results.table()
    print(f"\nwall time {time.monotonic() - started:.1f} s")
    if results.failures:
        print("FAILED:\n  " + "\n  ".join(results.failures), file=sys.stderr)
        print(f"app log ({out}/app.log), its end:\n{app.log_tail(1500)}", file=sys.stderr)
        return 1
    print("http limits: passed")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", required=True, help="the built app (build/app/video-classifier)")
    parser.add_argument("--out", required=True, help="a folder for the config, the token and the app's log")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
