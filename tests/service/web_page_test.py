#!/usr/bin/env python3
"""The web page in a real browser: Debian's chromium, headless, driven over the DevTools protocol (its pipe: no
driver, no websocket library). Against a real run of the app (CPU engine, three test-pattern streams), it checks that
the page loads with no console error, shows one tile per stream with the label the results file has for that stream
and a snapshot, that the add form adds a tile (and the stream runs) and that the remove button removes it (and its
results are finalized). It saves a screenshot of the page. Then, against a service that protects its reads
(api.protect_reads) and records events: the page asks for the token, and once given it shows the tiles, the events'
thumbnails and plays their clips through its session (a cookie that reads only).

    web_page_test.py --app build/app/video-classifier --out build/web-page [--screenshot FILE]
    web_page_test.py --app build/app/video-classifier --out build/web-demo --demo --screenshot docs/web-page.png

--demo runs assets/configs/web-demo.yaml instead (the sample video on four streams, with event rules) and only takes
the screenshot, once every tile has its picture and events have their thumbnails: the README's picture.

Exit 0: passed; 1: failed (what, on stderr); 77: skipped (no chromium on this machine).
"""
import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from raw_http import Failure, free_port  # (beside this file)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "web-page-test-token"
# Still test patterns: each stream's label holds from frame to frame, so the page and the results file agree.
STREAMS = [("entrance", "smpte"), ("loading-bay", "checkers-8"), ("yard", "pinwheel")]




class Browser:
    """Chromium with --remote-debugging-pipe: JSON messages, each ended by a NUL byte, on fds 3 (in) and 4 (out)."""

    def __init__(self, chromium, profile):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds():  # the child's fds 3 and 4 (moved above them first: a pipe's end may be 3 or 4 already, and a
            # dup2 onto itself would leave it close-on-exec)
            ends = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        self.process = subprocess.Popen(
            [chromium, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--mute-audio", f"--user-data-dir={profile}",
             "--window-size=1400,900", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,  # (closing fds would close 3 and 4 again)
            stderr=open(Path(profile) / "chromium.log", "wb"))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def send(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            reply = self.receive(deadline)
            if reply is None:
                break
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise Failure(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise Failure(f"{method}: no answer from chromium within {timeout} s")

    def receive(self, deadline):
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.from_browser], [], [], max(0.0, deadline - time.time()))
            if not ready:
                return None
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise Failure("chromium closed its pipe (see chromium.log)")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def pump(self, seconds):
        """Takes in the events that arrive within `seconds`."""
        deadline = time.time() + seconds
        while True:
            message = self.receive(deadline)
            if message is None:
                return
            self.events.append(message)

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise Failure(f"evaluating {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, what, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.evaluate(expression):
                return
            self.pump(0.25)
        tiles = self.evaluate("JSON.stringify([...document.querySelectorAll('.tile')].map(t => Object.assign({}, t.dataset)))")
        raise Failure(f"the page never showed {what} (within {timeout} s); tiles: {tiles}; "
                      f"errors: {console_errors(self.events)[:5]}")

    def close(self):
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Failure:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def console_errors(events):
    """What the page said was wrong: console.error/assert, uncaught exceptions, failed loads and other error logs."""
    errors = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append("exception: " + details.get("exception", {}).get("description", details.get("text", "")))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"log ({params['entry']['source']}): {params['entry']['text']} {params['entry'].get('url', '')}")
    return errors


def label_in_results(results_file):
    """The label the results file has for its stream now: the last frame's top-1 (what the service shows, as the
    overlay's headline does)."""
    last = None
    for line in Path(results_file).read_text().splitlines():
        item = json.loads(line)
        if "top" in item:
            last = item
    return None if last is None else last["top"][0]["label"]


def api_get(base, path):
    with urllib.request.urlopen(urllib.request.Request(base + path, headers={"Authorization": f"Bearer {TOKEN}"}),
                                timeout=10) as r:
        return json.loads(r.read())


def api_put(base, path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="PUT",
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read())


def close_all(browser, profile, app):
    """The browser closed, its profile removed, the app stopped (SIGINT: its outputs finalized)."""
    if browser:
        browser.close()
    if profile:
        shutil.rmtree(profile, ignore_errors=True)
    app.send_signal(signal.SIGINT)
    try:
        app.wait(timeout=60)
    except subprocess.TimeoutExpired:
        app.kill()


def wait_ready(app, base, log):
    deadline = time.time() + 120
    while True:
        try:
            if urllib.request.urlopen(base + "/readyz", timeout=2).status == 200:
                return
        except OSError:
            pass
        if app.poll() is not None or time.time() > deadline:
            raise Failure(f"the app did not become ready: {Path(log).read_text()[-2000:]}")
        time.sleep(0.2)


def open_page(chromium, url):
    """A headless chromium with one page at `url`; returns (browser, its profile folder)."""
    profile = tempfile.mkdtemp(prefix="vc-chromium-")  # (removed at the end)
    browser = Browser(chromium, profile)
    target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)
    browser.session = browser.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                   session=False)["sessionId"]
    for domain in ("Runtime", "Log", "Page"):
        browser.send(f"{domain}.enable")
    browser.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    browser.send("Page.navigate", {"url": url})
    return browser, profile


def run_protected(args, chromium):
    """A service whose reads need the token, with event rules: the page says so, takes the token, then shows the
    tiles, the events' thumbnails and their clips through its session cookie."""
    out = Path(args.out).resolve() / "protected"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "token").write_text(TOKEN + "\n")
    port = free_port()
    (out / "service.yaml").write_text(
        f"api:\n  enabled: true\n  token_file: token\n  protect_reads: true\n  snapshot_interval_s: 0.5\n"
        f"metrics:\n  port: {port}\ninputs:\n  - {{name: door, kind: test, pattern: ball, fps: 10}}\n"
        f"events:\n  dir: events\n  pre_s: 0.5\n  post_s: 0.5\n  rules: [{{name: any, labels: ['*'], min_confidence: 0, "
        f"min_duration_s: 0.2, max_duration_s: 1, cooldown_s: 0.5}}]\nsmoothing:\n  threshold: 0\n")
    log = open(out / "app.log", "wb")
    app = subprocess.Popen([str(Path(args.app).resolve()), "--config", str(out / "service.yaml")], stdout=log,
                           stderr=subprocess.STDOUT, cwd=out)
    base = f"http://127.0.0.1:{port}"
    browser = profile = None
    try:
        wait_ready(app, base, out / "app.log")
        browser, profile = open_page(chromium, base + "/")
        browser.wait_for("(document.getElementById('connection') || {textContent: ''}).textContent.includes('token')",
                         "the request for a token")
        browser.evaluate("""(() => { const t = document.getElementById('add-token'); t.value = '%s';
                                     t.dispatchEvent(new Event('change')); return true; })()""" % TOKEN)
        browser.wait_for("Number((document.querySelector('.tile') || {dataset: {}}).dataset.pictures || 0) >= 1",
                         "the tile's picture")
        browser.wait_for("[...document.querySelectorAll('#events img')].some(i => i.complete && i.naturalWidth > 0)",
                         "an event's thumbnail, loaded", 90)
        browser.wait_for("!!document.querySelector('#events a')", "an event's clip link", 60)
        fetch = "fetch(document.querySelector('#events a').href, {cache: 'no-store'%s}).then(r => r.status)"
        clip, without = browser.evaluate(fetch % ""), browser.evaluate(fetch % ", credentials: 'omit'")
        if clip not in (200, 206) or without != 401:
            raise Failure(f"the clip link answered {clip} with the page's session and {without} without (want 200, 401)")
        errors = [e for e in console_errors(browser.events) if "401" not in e]  # (the page's first, refused reads)
        if errors:
            raise Failure("the protected page reported errors:\n  " + "\n  ".join(errors))
        print("web page, reads protected: the page asked for the token, then showed the tile, the events' thumbnails "
              "and their clip through its session (401 without it)")
    finally:
        close_all(browser, profile, app)


def run(args):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("skipped: no chromium on this machine (scripts/install-deps.sh installs it)")
        return 77
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "token").write_text(TOKEN + "\n")
    port = free_port()
    if args.demo:
        names = ["dock-1", "dock-2", "shelf", "packing"]
        command = ["--config", str(ROOT / "assets/configs/web-demo.yaml"), "--set", f"metrics.port={port}",
                   "--set", f"api.token_file={out / 'token'}", "--set", f"api.state_file={out / 'state.yaml'}",
                   "--set", f"events.dir={out / 'events'}"]
    else:
        names = [name for name, _ in STREAMS]
        inputs = "".join(f"  - {{name: {name}, kind: test, pattern: {pattern}, fps: 10}}\n" for name, pattern in STREAMS)
        (out / "service.yaml").write_text(
            f"api:\n  enabled: true\n  token_file: token\n  snapshot_interval_s: 0.5\nmetrics:\n  port: {port}\n"
            f"inputs:\n{inputs}output:\n  results: results/{{stream}}.jsonl\n")
        command = ["--config", str(out / "service.yaml")]
    log = open(out / "app.log", "wb")
    app = subprocess.Popen([str(Path(args.app).resolve())] + command, stdout=log, stderr=subprocess.STDOUT, cwd=out)
    base = f"http://127.0.0.1:{port}"
    browser = None
    profile = None
    try:
        wait_ready(app, base, out / "app.log")
        browser, profile = open_page(chromium, base + "/")

        # One tile per stream, each with a picture and a label.
        browser.wait_for(f"document.querySelectorAll('.tile').length === {len(names)}", f"{len(names)} tiles")
        browser.wait_for("[...document.querySelectorAll('.tile')].every(t => Number(t.dataset.pictures || 0) >= 1 "
                         "&& t.dataset.label)", "a snapshot and a label on every tile")
        shown = browser.evaluate("Object.fromEntries([...document.querySelectorAll('.tile')]"
                                 ".map(t => [t.dataset.stream, t.dataset.label]))")
        if sorted(shown) != sorted(names):
            raise Failure(f"tiles for {sorted(shown)}, streams {sorted(names)}")
        if args.demo:
            browser.wait_for("document.querySelectorAll('#events img').length >= 3", "events with thumbnails", 120)
            browser.pump(2.0)
            shot = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"})["data"])
            Path(args.screenshot or out / "web-page.png").write_bytes(shot)
            print(f"web page demo: screenshot {args.screenshot or out / 'web-page.png'}")
            return 0

        # The header names the weights each model runs (its id, as the results lines carry it).
        model = api_get(base, "/api/v1/models")["models"][0]["id"]
        browser.wait_for("document.querySelector('#model-ids .model-id') !== null", "the model's id in the header")
        shown_id = browser.evaluate("document.querySelector('#model-ids .model-id').textContent")
        if not model.startswith("default@") or shown_id != model:
            raise Failure(f"the header shows model {shown_id!r}, the API {model!r}")
        for name in names:
            # The page shows what the service had at its last look; the label of a still pattern holds.
            expected = label_in_results(out / "results" / f"{name}.jsonl")
            if shown[name] != expected:
                raise Failure(f"tile {name} shows {shown[name]!r}, the results file says {expected!r}")
        browser.wait_for("document.querySelectorAll('#events li:not(.empty)').length >= 1", "the recent events")
        browser.pump(1.0)
        shot = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"})["data"])
        (out / "web-page.png").write_bytes(shot)
        if args.screenshot:
            Path(args.screenshot).write_bytes(shot)

        # Regions: one set over the API shows as a box on its tile; one drawn on another tile through the page (its
        # edit mode, a drag on the picture, a name typed) is classified from then on, without a restart.
        api_put(base, "/api/v1/streams/entrance/regions",
                {"regions": [{"name": "gate", "box": [0.1, 0.1, 0.3, 0.4]}], "whole": True})
        browser.wait_for("(() => { const t = document.querySelector('.tile[data-stream=\"entrance\"]');"
                         " return t.dataset.regions === 'gate' && t.querySelectorAll('svg.regions rect').length === 1"
                         " && !t.querySelector('svg.regions').hidden; })()", "the gate's box on the entrance tile")
        browser.evaluate("""(() => { document.getElementById('add-token').value = '%s';
            window.prompt = () => 'door';
            document.querySelector('.tile[data-stream="yard"] .edit').click(); return true; })()""" % TOKEN)
        box = browser.evaluate("(() => { const r = document.querySelector('.tile[data-stream=\"yard\"] svg.regions')"
                               ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
        left, top, width, height = box
        for kind, fx, fy in [("mousePressed", 0.3, 0.3), ("mouseMoved", 0.5, 0.5), ("mouseMoved", 0.6, 0.7),
                             ("mouseReleased", 0.6, 0.7)]:
            browser.send("Input.dispatchMouseEvent", {"type": kind, "x": left + fx * width, "y": top + fy * height,
                                                      "button": "left", "buttons": 0 if kind == "mouseReleased" else 1,
                                                      "clickCount": 1})
        browser.wait_for("document.querySelector('.tile[data-stream=\"yard\"]').dataset.regions === 'door'",
                         "the region drawn on the yard tile")
        for _ in range(100):
            yard = api_get(base, "/api/v1/streams/yard")
            if any(r["name"] == "door" and r["results"] > 0 for r in yard.get("regions", [])):
                break
            time.sleep(0.1)
        else:
            raise Failure(f"the drawn region has no results: {yard}")
        if yard["restarts"] != 0:
            raise Failure("the stream restarted when its regions changed")
        drawn = api_get(base, "/api/v1/streams/yard/regions")["regions"][0]["pixels"]
        # Dragged from 30 % to 60 % of the tile's 16:9 picture area, where the 320x240 picture fills the middle 75 %:
        # x from (0.3 - 0.125) / 0.75 = 23 % of the picture, 40 % of it wide.
        if not (0.2 < drawn[0] / 320 < 0.27 and 0.36 < drawn[2] / 320 < 0.44):
            raise Failure(f"the drawn box is {drawn} in the 320x240 picture, not where it was dragged")

        # The add form adds a tile, and the new stream runs.
        browser.evaluate("""(() => {
            const f = document.getElementById('add');
            f.name.value = 'added'; f.kind.value = 'test'; f.source.value = 'smpte'; f.token.value = '%s';
            f.requestSubmit(); return true; })()""" % TOKEN)
        browser.wait_for("!!document.querySelector('.tile[data-stream=\"added\"]')", "the added stream's tile")
        browser.wait_for("Number(document.querySelector('.tile[data-stream=\"added\"]').dataset.pictures || 0) >= 1",
                         "the added stream's snapshot")
        message = browser.evaluate("document.getElementById('form-message').textContent")
        if message != "added added":
            raise Failure(f"the form said {message!r}")
        # The remove button removes it (the page asks first: answered yes), and its results are finalized.
        browser.evaluate("window.confirm = () => true; "
                         "document.querySelector('.tile[data-stream=\"added\"] .remove').click(); true")
        browser.wait_for("!document.querySelector('.tile[data-stream=\"added\"]')", "the added tile gone")
        last = json.loads((out / "results" / "added.jsonl").read_text().splitlines()[-1])
        if last.get("event") != "stream_end" or last.get("reason") != "removed":
            raise Failure(f"added.jsonl ends with {last}, not its stream_end")
        if browser.evaluate("document.querySelectorAll('.tile').length") != len(names):
            raise Failure("the other tiles did not stay")

        browser.pump(1.0)
        errors = console_errors(browser.events)
        if errors:
            raise Failure("the page reported errors:\n  " + "\n  ".join(errors))
        print(f"web page: {len(names)} tiles with their results' labels {shown}, add and remove through the page, "
              f"no console errors; screenshot {out / 'web-page.png'}")
    finally:
        close_all(browser, profile, app)
    run_protected(args, chromium)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--screenshot", help="also save the screenshot here")
    parser.add_argument("--demo", action="store_true", help="assets/configs/web-demo.yaml, a screenshot only")
    args = parser.parse_args()
    try:
        return run(args)
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
