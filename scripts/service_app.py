"""The app as a service, for the scripts that measure it (swap-check.py, live-check.py): a free port, waiting for
/readyz, and stopping it as a supervisor would (SIGINT: outputs finalized)."""
import re
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
    """Waits until GET /readyz answers 200 and every model runs its tuned engine (/metrics: no vc_model_tuned 0 —
    what is measured after this is the steady service, not its start); SystemExit when the app ends first or
    `timeout` passes."""
    t0 = time.monotonic()

    def answered(path, ok):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                return r.status == 200 and ok(r.read().decode())
        except (urllib.error.URLError, ConnectionError, OSError):
            return False

    untuned = re.compile(r"^vc_model_tuned\{.*\} 0$", re.M)
    while not (answered("/readyz", lambda _: True) and answered("/metrics", lambda m: not untuned.search(m))):
        if app.poll() is not None:
            raise SystemExit(f"{what}: the app ended at its start (exit {app.returncode}): see {log}")
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"{what}: not ready (and tuned) after {timeout} s")
        time.sleep(0.2)


def stop(app):
    """SIGINT, then its exit status ("killed" when it did not end within 60 s)."""
    app.send_signal(signal.SIGINT)
    try:
        return app.wait(timeout=60)
    except subprocess.TimeoutExpired:
        app.kill()
        return "killed"
