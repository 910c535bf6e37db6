"""The app as a service, for the scripts that measure it (swap-check.py, live-check.py): a free port, waiting for
/readyz, and stopping it as a supervisor would (SIGINT: outputs finalized)."""
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(app, port, what, log, timeout=180):
    """Waits until GET /readyz answers 200; SystemExit when the app ends first or `timeout` passes."""
    t0 = time.monotonic()
    while True:
        if app.poll() is not None:
            raise SystemExit(f"{what}: the app ended at its start (exit {app.returncode}): see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"{what}: not ready after {timeout} s")
        time.sleep(0.2)


def stop(app):
    """SIGINT, then its exit status ("killed" when it did not end within 60 s)."""
    app.send_signal(signal.SIGINT)
    try:
        return app.wait(timeout=60)
    except subprocess.TimeoutExpired:
        app.kill()
        return "killed"
