"""Raw HTTP for the service's tests: the app started as a service, sockets from any loopback address (so that one
test looks like many clients), requests written and answers read by hand (a header alone, a body in pieces, a
trickle), the app's RSS sampled while a check runs, and a table of checks. Standard library only."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN = "test-token-0123"
MiB = 1024 * 1024


class Failure(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------------------
# The app


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid):
    """VmRSS of `pid` in KiB (None once the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class RssWatch(threading.Thread):
    """Samples the app's RSS every 20 ms; phase() starts a new peak."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.lock = threading.Lock()
        self.peak_kb = 0
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.wait(0.02):
            kb = rss_kb(self.pid)
            if kb is not None:
                with self.lock:
                    self.peak_kb = max(self.peak_kb, kb)

    def phase(self):
        with self.lock:
            self.peak_kb = rss_kb(self.pid) or 0

    def peak(self):
        kb = rss_kb(self.pid) or 0  # (the last moment too, whatever the sampling missed)
        with self.lock:
            self.peak_kb = max(self.peak_kb, kb)
            return self.peak_kb


def stop_process(process, timeout=60):
    """SIGINT (outputs finalized), then the exit code (None: it did not exit in time and was killed)."""
    if process.poll() is not None:
        return process.returncode
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


def read_new_lines(path, offset):
    """The whole JSON lines a growing file (results) holds from `offset` on, and the offset after them (the line
    being written is left for the next call)."""
    if not os.path.exists(path):
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    whole = data[:data.rfind(b"\n") + 1]
    return [json.loads(text) for text in whole.splitlines()], offset + len(whole)


class App:
    """The app as a service (CPU engine, the fixture model, one live test pattern), started and stopped."""

    def __init__(self, binary, out, per_client=16, max_connections=512):
        self.binary = binary
        self.out = out
        self.per_client = per_client
        self.max_connections = max_connections
        self.port = free_port()
        self.process = None
        self.log = None

    def write_files(self):
        os.makedirs(self.out, exist_ok=True)
        with open(os.path.join(self.out, "token"), "w") as f:
            f.write(TOKEN + "\n")
        with open(os.path.join(self.out, "labels.txt"), "w") as f:
            f.write("".join(f"class-{i}\n" for i in range(10)))
        with open(os.path.join(self.out, "service.yaml"), "w") as f:
            f.write("api:\n  enabled: true\n  token_file: token\n"
                    f"  max_connections_per_client: {self.per_client}\n  max_connections: {self.max_connections}\n"
                    f"metrics:\n  port: {self.port}\n"
                    "inputs:\n  - {name: a, kind: test, pattern: ball, fps: 10, width: 160, height: 120}\n")

    def start(self):
        self.write_files()
        self.log = open(os.path.join(self.out, "app.log"), "wb")
        command = [self.binary, "--config", os.path.join(self.out, "service.yaml"),
                   "--model", "tests/fixtures/basic_narrow.safetensors",
                   "--set", "model.labels=" + os.path.join(self.out, "labels.txt"), "--set", "model.input_size=64",
                   "--set", "inference.device=cpu", "--set", "logging.level=info"]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if request(self.port, "GET", "/readyz", timeout=2).status == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None:
                raise Failure(f"the app exited with {self.process.returncode} before it was ready:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise Failure(f"GET /readyz was not 200 within 60 s:\n{self.log_tail()}")
            time.sleep(0.1)

    def stop(self, timeout=60):
        """SIGINT, then the exit code (None: it did not exit in time and was killed)."""
        return None if self.process is None else stop_process(self.process, timeout)

    def log_tail(self, chars=3000):
        try:
            with open(os.path.join(self.out, "app.log"), errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return "(no log)"


# ---------------------------------------------------------------------------------------------------------------------
# A raw HTTP client: from any source address, any Host, any bytes


def connect(port, source="127.0.0.1", sndbuf=None, timeout=5.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if sndbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)  # (bytes in flight stay few: counts are exact)
        s.bind((source, 0))
        s.settimeout(timeout)
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        raise
    return s


def read_until_closed(sock, timeout):
    """Everything the server sends until it closes: (bytes, "eof" | "reset" | "open"), "open" if still open after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return data, "open"
        sock.settimeout(left)
        try:
            piece = sock.recv(65536)
        except (socket.timeout, TimeoutError):
            return data, "open"
        except (ConnectionResetError, BrokenPipeError):
            return data, "reset"
        if not piece:
            return data, "eof"
        data += piece


class Reply:
    def __init__(self, data, closed, seconds):
        self.raw = data
        self.closed = closed  # "eof", "reset" or "open"
        self.seconds = seconds
        head, _, self.body = data.partition(b"\r\n\r\n")
        self.status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = self.status_line.split()
        self.status = int(parts[1]) if len(parts) >= 2 and parts[0].startswith("HTTP/") and parts[1].isdigit() else None

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8", "replace"))
        except ValueError:
            return None

    def __str__(self):
        shown = self.raw[:300].decode("latin-1").replace("\r\n", " | ")
        return f"{self.status_line or '(nothing)'} [connection {self.closed}, {self.seconds * 1000:.1f} ms]: {shown!r}"


def head_bytes(method, path, port, headers=(), host=None, close=True):
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host or f'127.0.0.1:{port}'}"]
    if close:
        lines.append("Connection: close")
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def request(port, method, path, headers=(), body=b"", source="127.0.0.1", host=None, timeout=10.0):
    """One request on its own connection (Connection: close); the time counts from the connect to the close."""
    if body:
        headers = list(headers) + [("Content-Length", str(len(body)))]
    start = time.monotonic()
    with connect(port, source, timeout=timeout) as s:
        s.sendall(head_bytes(method, path, port, headers, host) + body)
        data, closed = read_until_closed(s, timeout)
    return Reply(data, closed, time.monotonic() - start)


def answered(sock):
    """Whether the server has said anything or closed (a non-blocking peek)."""
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        return True  # data, or b"" at the end
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset


def send_until_answered(sock, piece, total, limit_s=60.0):
    """Sends `piece` over and over (up to `total` bytes) until the server answers or closes: (bytes sent, why)."""
    sock.setblocking(False)
    sent = offset = 0
    deadline = time.monotonic() + limit_s
    while sent < total:
        if answered(sock):
            return sent, "answered"
        if time.monotonic() > deadline:
            return sent, f"no answer within {limit_s:.0f} s"
        try:
            n = sock.send(piece[offset:offset + (total - sent)])
        except BlockingIOError:
            time.sleep(0.002)  # the buffers are full: the server has stopped reading (or is slow)
            continue
        except (BrokenPipeError, ConnectionResetError):
            return sent, "closed while sending"
        sent += n
        offset = (offset + n) % len(piece)
    return sent, "everything sent"


# ---------------------------------------------------------------------------------------------------------------------
# Checks


class Results:
    def __init__(self):
        self.rows = []  # (check, measured, PASS/FAIL)
        self.failures = []

    def check(self, name, ok, measured, why=""):
        verdict = "PASS" if ok else "FAIL"
        self.rows.append((name, measured, verdict))
        print(f"  {verdict}  {name}: {measured}" + ("" if ok else f"\n        -> {why}"), flush=True)
        if not ok:
            self.failures.append(f"{name}: {why or measured}")
        return ok

    def table(self):
        width = max(len(r[0]) for r in self.rows)
        print("\n" + f"{'check':<{width}}  verdict  measured")
        for name, measured, verdict in self.rows:
            print(f"{name:<{width}}  {verdict:<7}  {measured}")


def mb(kb):
    return f"{kb / 1024:.1f} MB"
