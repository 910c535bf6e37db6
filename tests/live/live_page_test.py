#!/usr/bin/env python3
"""Live video in the page (issue #41's acceptance), in a real browser: Debian's chromium, headless, over the DevTools
protocol (web_page_test.py's Browser), against a real run of the app on the CPU engine with four streams — an H.264
file looping, an H.265 file looping (when x265enc is there), a raw test pattern and another — results to files, an
event rule on one pattern.

In the page: every stream plays live from live.mp4 through Media Source Extensions (the H.265 one may fall back to its
snapshots where this chromium cannot play HEVC: reported, and then its codec string must name HEVC); each <video>'s
currentTime advances for 10 s; the label the page draws (window.vcLive[STREAM].shown: a frame and its top-1 label, and
the text over the picture) is the results file's label for that frame, checked twice a second, the result drawn is
never of a later frame than the one shown nor more than a frame earlier unless the page marks it as an earlier frame's
(`stale`: that frame's result has not come), and for the files the picture on screen is that of the frame whose
unmarked label is drawn (their patterns change every 2 s, dark and bright: the video's brightness says which is
shown); a tile opens to the large view, whose
timeline has a bar an event covers: clicking it plays the event's clip (its currentTime advances), as does the event
list's play button; no console error. A screenshot of the large view goes to --out (and to --screenshot, e.g.
docs/live-view.png).

Then, the browser closed, a measurement (printed, never asserted on): the app's CPU (utime + stime over 10 s) with no
viewer, with 1 and with 20 plain HTTP readers of the H.264 stream's live.mp4, with 1 MJPEG viewer, and with none again
(how much it varies by itself); asserted: every reader received video, and the stream's results kept coming as with
no viewer. The app ends with exit 0 on SIGINT.

    live_page_test.py --app build/app/video-classifier --out build/live-page [--screenshot docs/live-view.png]

Exit 0: passed; 1: failed (what, on stderr); 77: skipped (no chromium, or no GStreamer x264enc to make the media).
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from raw_http import Failure, free_port, read_new_lines, stop_process  # noqa: E402  (tests/service)
from web_page_test import console_errors, open_page, wait_ready  # noqa: E402

TOKEN = "live-page-test-token"
FPS = 4         # every stream's frame rate: 4 streams on the CPU engine of 2 cores (about 18 frames/s), the browser beside
SIZE = (320, 240)
# The files' pictures: a few seconds of each of these patterns, so that their labels change as they play.
FILE_PATTERNS = ["smpte", "ball", "checkers-8", "snow"]
SECONDS_EACH = 2
WATCH_S = 10    # currentTime must advance over this long
MEASURE_S = 10  # each phase of the measurement
READERS = 20


def sh(command, what):
    r = subprocess.run(command, shell=True, capture_output=True, text=True)
    if r.returncode != 0:
        raise Failure(f"{what}: {r.stderr.strip()[-500:]}")


def has_element(name):
    return bool(shutil.which("gst-inspect-1.0")) and \
        subprocess.run(["gst-inspect-1.0", name], capture_output=True).returncode == 0


def make_media(media):
    """The H.264 file and, with x265enc, the H.265 one: the same pictures, a keyframe every 2 s. Returns {name: path}."""
    media.mkdir()
    raw = media / "pictures.yuv"
    caps = f"video/x-raw,format=I420,width={SIZE[0]},height={SIZE[1]},framerate={FPS}/1"
    with raw.open("wb") as out:
        for pattern in FILE_PATTERNS:
            part = media / f"{pattern}.yuv"
            sh(f"gst-launch-1.0 -q videotestsrc num-buffers={FPS * SECONDS_EACH} pattern={pattern} ! {caps} ! "
               f"filesink location='{part}'", f"making the {pattern} pictures")
            out.write(part.read_bytes())
            part.unlink()
    source = (f"gst-launch-1.0 -q filesrc location='{raw}' ! rawvideoparse width={SIZE[0]} height={SIZE[1]} format=i420 "
              f"framerate={FPS}/1")
    files = {"h264": media / "h264.mp4"}
    sh(f"{source} ! x264enc key-int-max={2 * FPS} speed-preset=veryfast ! h264parse ! mp4mux ! "
       f"filesink location='{files['h264']}'", "making the H.264 file")
    if has_element("x265enc"):
        files["hevc"] = media / "hevc.mp4"
        sh(f"{source} ! x265enc key-int-max={2 * FPS} speed-preset=veryfast ! h265parse ! mp4mux ! "
           f"filesink location='{files['hevc']}'", "making the H.265 file")
    raw.unlink()
    return files


class App:
    def __init__(self, binary, out, files):
        self.out = out
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        inputs = [f"  - {{name: {name}, kind: file, path: '{path}', loop: true, realtime: true}}\n"
                  for name, path in files.items()]
        inputs += [f"  - {{name: {name}, kind: test, pattern: {pattern}, fps: {FPS}, width: {SIZE[0]}, "
                   f"height: {SIZE[1]}}}\n" for name, pattern in (("bars", "smpte"), ("ball", "ball"))]
        self.names = list(files) + ["bars", "ball"]
        # An event on `bars` every few seconds (its label holds: the rule holds, ends at max_duration_s, waits cooldown_s).
        (out / "service.yaml").write_text(
            f"api:\n  enabled: true\n  token_file: token\n  snapshot_interval_s: 0.5\n  live_clients: {READERS + 12}\n"
            f"  live_clients_per_stream: {READERS + 4}\n"
            f"metrics:\n  port: {self.port}\ninputs:\n{''.join(inputs)}"
            f"output:\n  results: results/{{stream}}.jsonl\n"
            f"events:\n  dir: events\n  pre_s: 0.5\n  post_s: 0.5\n  rules: [{{name: any, labels: ['*'], "
            f"min_confidence: 0, min_duration_s: 0.2, max_duration_s: 1.5, cooldown_s: 4, streams: [bars]}}]\n"
            f"smoothing:\n  threshold: 0\n")
        (out / "token").write_text(TOKEN + "\n")
        self.log = out / "app.log"
        self.process = subprocess.Popen([str(binary), "--config", str(out / "service.yaml")],
                                        stdout=self.log.open("wb"), stderr=subprocess.STDOUT, cwd=out)
        self.read = {}  # stream -> (bytes of its results file read, {frame: its whole picture's line})

    def get(self, path):
        request = urllib.request.Request(self.base + path, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as r:
            return json.loads(r.read())

    def results(self, stream):
        """{frame: the whole picture's results line} of the stream so far (read on from where the last call stopped)."""
        offset, lines = self.read.get(stream, (0, {}))
        new, offset = read_new_lines(self.out / "results" / f"{stream}.jsonl", offset)
        lines.update((line["frame"], line) for line in new if "top" in line and "region" not in line)
        self.read[stream] = (offset, lines)
        return lines

    def cpu_s(self):
        """The app's CPU time so far (user + system), in seconds."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # (utime, stime: fields 14 and 15)

    def log_tail(self, chars=3000):
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self):
        return stop_process(self.process)


# What the page says about every stream at once: its live state, what is drawn over its picture (in its tile, or in
# the large view while that is open), and how bright the video's picture is (0-1: its frame drawn small on a canvas).
STATE = """JSON.stringify(Object.fromEntries(Object.entries(window.vcLive).map(([name, s]) => {
  const picture = document.body.dataset.large === name ? document.querySelector('#large-stage .picture')
                : document.querySelector(`.tile[data-stream="${name}"] .picture`);
  const label = picture && picture.querySelector('.live-label'), video = picture && picture.querySelector('video');
  let luma = null;
  if (video && !video.hidden && video.readyState >= 2) {
    const c = window.liveTestCanvas || (window.liveTestCanvas = Object.assign(document.createElement('canvas'),
                                                                             {width: 32, height: 24}));
    const g = c.getContext('2d', {willReadFrequently: true});
    g.drawImage(video, 0, 0, 32, 24);
    const d = g.getImageData(0, 0, 32, 24).data;
    let sum = 0;
    for (let i = 0; i < d.length; i += 4) sum += d[i] + d[i + 1] + d[i + 2];
    luma = sum / (3 * 255 * 32 * 24);
  }
  return [name, Object.assign({}, s, {drawn: label && !label.hidden ? label.textContent : null, luma,
                                     seeking: !!video && video.seeking,
                                     video: !!picture && !picture.querySelector('video').hidden})];
})))"""


def page_state(browser):
    return json.loads(browser.evaluate(STATE))


def check_picture(name, state, pictures):
    """For a file stream playing live: the picture on screen is of the frame whose label is drawn. The files show
    FILE_PATTERNS for SECONDS_EACH each, in turn: the ball's is dark, the others' bright, so the video's brightness
    says which the picture is; the frame's number says which it should be (a stream numbers every picture its source
    gives, from the file's first, across loops, dropped ones too: the file holds each pattern's pictures exactly). A
    frame next to a change of pattern may be the one before or after (the page draws at the frame's own time; the
    canvas may catch the next one). Counts the frames checked in `pictures`."""
    shown = state.get("shown")
    if name not in ("h264", "hevc") or state["mode"] != "mse" or not shown or state.get("luma") is None:
        return
    if shown.get("stale"):  # (the page says the label is an earlier frame's: this one's has not come)
        return
    if state.get("seeking"):  # (the page jumped to near the live edge: which picture the canvas gets is undefined)
        return
    each = FPS * SECONDS_EACH
    # (Not from the results' pts: the earliest pts the results have is the file's first picture only if that picture
    # was not dropped — the CPU engine drops some while it starts on a busy machine.)
    k = shown["frame"] % (each * len(FILE_PATTERNS))
    if k % each in (0, each - 1):
        return
    want_dark = FILE_PATTERNS[k // each] == "ball"
    if (state["luma"] < 0.15) != want_dark:
        raise Failure(f"{name}: the label drawn is frame {shown['frame']}'s ({FILE_PATTERNS[k // each]}), but the "
                      f"picture shown is {'dark' if state['luma'] < 0.15 else 'bright'} (brightness {state['luma']:.2f}): "
                      f"the label is not the picture's")
    pictures[name] = pictures.get(name, 0) + 1


def check_label(app, name, state, checked):
    """The label drawn for `name` is the results file's top-1 of the frame it says it is for; counts it in `checked`."""
    shown = state.get("shown")
    if not shown or shown.get("frame") is None or (state["mode"] == "mse" and not state["video"]):
        return  # (nothing yet, or the live video not on screen yet)
    frame = shown["frame"]
    deadline = time.time() + 5
    while frame not in app.results(name):  # (the file may be written a moment after the page was sent the line)
        if time.time() > deadline:
            raise Failure(f"{name}: the page shows frame {frame}, which its results file does not have")
        time.sleep(0.1)
    expected = app.results(name)[frame]["top"][0]["label"]
    if shown["label"] != expected:
        raise Failure(f"{name}: the page draws {shown['label']!r} for frame {frame}, the results file says {expected!r}")
    if state["mode"] == "mse":
        if shown.get("t") is None:
            raise Failure(f"{name}: plays live but its label is not from a result with a live time: {state}")
        if shown["t"] > state["mediaTime"] + 0.002:
            raise Failure(f"{name}: the label drawn is of a later frame (t {shown['t']}) than the one shown "
                          f"({state['mediaTime']})")
        if not shown.get("stale") and state["mediaTime"] - shown["t"] > 1.5 / FPS:
            raise Failure(f"{name}: the label drawn (t {shown['t']}) is not marked as an earlier frame's, but the frame "
                          f"shown is {state['mediaTime'] - shown['t']:.2f} s later")
        if state["drawn"] is None or not state["drawn"].startswith(shown["label"] + " "):
            raise Failure(f"{name}: over the picture is {state['drawn']!r}, not the label of frame {frame}")
    checked.setdefault(name, set()).add(frame)


def watch(browser, app):
    """WATCH_S seconds of every stream, looked at twice a second: currentTime advances in every 2 s of it, the labels
    drawn are right. Returns each stream's mode and what was seen."""
    checked, times, pictures = {}, {}, {}
    for _ in range(2 * WATCH_S + 1):
        browser.pump(0.5)
        for name, state in page_state(browser).items():
            check_label(app, name, state, checked)
            check_picture(name, state, pictures)
            if state["mode"] == "mse":
                times.setdefault(name, []).append((state["session"], state["currentTime"]))
    modes = page_state(browser)
    for name, state in modes.items():
        if state["mode"] != "mse":
            continue
        samples = times.get(name, [])
        if len(samples) < 2 * WATCH_S or len({s for s, _ in samples}) != 1:
            raise Failure(f"{name}: {len(samples)} looks at it playing live, sessions {sorted({s for s, _ in samples})}")
        stuck = [(a[1], b[1]) for a, b in zip(samples, samples[4:]) if b[1] <= a[1]]
        if stuck:
            raise Failure(f"{name}: currentTime did not advance over 2 s: {stuck[:3]} (all: {[t for _, t in samples]})")
        if len(checked.get(name, ())) < 3:
            raise Failure(f"{name}: only {len(checked.get(name, ()))} frames' labels could be checked: {state}")
        state["pictures"] = pictures.get(name, 0)
        if name == "h264" and state["pictures"] < 3:  # (a page that marked every label as an earlier frame's fails)
            raise Failure(f"{name}: the picture shown could be checked against the label drawn only "
                          f"{state['pictures']} times: {state}")
    return modes, checked, times


def play_clip(browser, what):
    """The clip player of the large view plays: its currentTime advances over 3 s, without an error."""
    browser.wait_for("(() => { const v = document.querySelector('#clip video'); return !document.getElementById('clip')"
                     ".hidden && v.readyState >= 2 && !v.paused; })()", f"{what}: its clip playing", 30)
    clip = "(() => { const v = document.querySelector('#clip video'); return [v.currentTime, v.error && v.error.message]; })()"
    first, _ = browser.evaluate(clip)
    browser.pump(3.0)
    later, error = browser.evaluate(clip)
    if error or later <= first:
        raise Failure(f"{what}: the clip's currentTime went from {first} to {later} (error: {error})")
    label = browser.evaluate("document.querySelector('#clip .live-label').textContent")
    return first, later, label


def run_page(args, chromium, app, out):
    browser, profile = open_page(chromium, app.base + "/")
    try:
        browser.wait_for(f"document.querySelectorAll('.tile').length === {len(app.names)}", f"{len(app.names)} tiles")
        # Every stream playing live with a label drawn from its results, or (H.265) fallen back for want of a codec.
        ready = ("Object.keys(window.vcLive).length === %d && Object.values(window.vcLive).every(s => (s.mode === 'mse' "
                 "&& s.currentTime > 0 && s.shown && s.shown.t != null) || (s.mode === 'fallback' && s.codecs && "
                 "/^(hvc1|hev1)/.test(s.codecs) && s.shown))" % len(app.names))
        try:
            browser.wait_for(ready, "every stream live, its label drawn", 90)
        except Failure:
            raise Failure(f"not every stream plays live: {json.dumps(page_state(browser))}")
        modes, checked, times = watch(browser, app)
        for name, state in modes.items():
            if state["mode"] != "mse" and name != "hevc":
                raise Failure(f"{name}: {state['mode']} ({state['reason']}), not live")
            played = times.get(name, [(None, 0)])
            print(f"{name}: {state['mode']} {state['codecs']}" +
                  (f", currentTime {played[0][1]:.2f} -> {played[-1][1]:.2f} s in {WATCH_S} s, the picture "
                   f"{state['delay']:.2f} s behind the newest video, {state['jumps']} jump(s)" if state["mode"] == "mse"
                   else f" ({state['reason']}): its snapshots") +
                  f"; the label drawn matched the results file for {len(checked.get(name, ()))} frames" +
                  (f", the picture shown matched the frame for {state['pictures']}" if state.get("pictures") else ""))
        shot = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"})["data"])
        (out / "live-tiles.png").write_bytes(shot)

        # The large view of `bars`: its live video plays on there; a bar of its timeline that an event covers opens
        # that event's clip, which plays.
        browser.evaluate("document.querySelector('.tile[data-stream=\"bars\"] .picture').click(), true")
        browser.wait_for("document.body.dataset.large === 'bars' && !!document.querySelector('#large-stage video')",
                         "the large view of bars")
        before = page_state(browser)["bars"]["currentTime"]
        browser.wait_for("!!document.querySelector('#timeline .run[data-event]')", "a bar of the timeline with an event", 60)
        browser.pump(2.0)
        after = page_state(browser)["bars"]
        if after["mode"] != "mse" or after["currentTime"] <= before:
            raise Failure(f"the large view's live video does not play: {after}")
        bar = browser.evaluate("(() => { const b = document.querySelector('#timeline .run[data-event]'); b.click();"
                               " return Object.assign({}, b.dataset); })()")
        first, later, label = play_clip(browser, f"the timeline's bar {bar}")
        print(f"large view: the timeline's bar {bar['label']!r} ({bar['from']}-{bar['to']} s) opened event {bar['event']}: "
              f"its clip played from {first:.2f} to {later:.2f} s, {label!r} drawn over it")
        shot = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"})["data"])
        (out / "live-view.png").write_bytes(shot)
        if args.screenshot:
            Path(args.screenshot).write_bytes(shot)
        browser.evaluate("document.getElementById('large-close').click(), true")
        browser.wait_for("!document.body.dataset.large && !!document.querySelector('.tile[data-stream=\"bars\"] video')",
                         "the large view closed, the picture back in its tile")

        # The event list's play button: the same player, from the event's start.
        browser.wait_for("!!document.querySelector('#events button.play')", "an event with a clip in the list")
        browser.evaluate("document.querySelector('#events button.play').click(), true")
        first, later, label = play_clip(browser, "the event list's play button")
        print(f"event list: its clip played from {first:.2f} to {later:.2f} s, {label!r} drawn over it")
        browser.evaluate("document.getElementById('large-close').click(), true")

        browser.pump(1.0)
        errors = console_errors(browser.events)
        if errors:
            raise Failure("the page reported errors:\n  " + "\n  ".join(errors))
        return modes
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


class Reader(threading.Thread):
    """One plain HTTP viewer: reads the body as it comes, counts its bytes, until stopped."""

    def __init__(self, port, path):
        super().__init__(daemon=True)
        self.port, self.path = port, path
        self.bytes, self.head, self.status, self.error = 0, b"", None, None
        self.stopped = threading.Event()

    def run(self):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("GET", self.path, headers={"Authorization": f"Bearer {TOKEN}"})
            response = connection.getresponse()
            self.status = response.status
            while not self.stopped.is_set():
                chunk = response.read1(65536)
                if not chunk:
                    break
                if len(self.head) < 16:
                    self.head += chunk[:16]
                self.bytes += len(chunk)
        except (OSError, http.client.HTTPException) as e:
            if not self.stopped.is_set():
                self.error = repr(e)
        finally:
            connection.close()


def measure(app):
    """The app's CPU with no viewer, 1 and READERS readers of the H.264 stream's live.mp4, 1 MJPEG viewer, and no
    viewer again (the two without say how much it varies by itself: the classification is most of it): a table."""
    stream = "h264"
    phases = [("no viewer", 0, None), ("1 live.mp4 reader", 1, "live.mp4"),
              (f"{READERS} live.mp4 readers", READERS, "live.mp4"), ("1 MJPEG viewer", 1, "live.mjpeg"),
              ("no viewer again", 0, None)]
    rows = []
    for what, count, route in phases:
        readers = [Reader(app.port, f"/api/v1/streams/{stream}/{route}") for _ in range(count)]
        for r in readers:
            r.start()
        time.sleep(2.0)  # (the muxer starts with the first viewer; the first bytes come)
        frames0, view0, cpu0, t0 = len(app.results(stream)), app.get(f"/api/v1/streams/{stream}"), app.cpu_s(), time.time()
        bytes0 = [r.bytes for r in readers]
        time.sleep(MEASURE_S)
        cpu1, t1, frames1, view1 = app.cpu_s(), time.time(), len(app.results(stream)), app.get(f"/api/v1/streams/{stream}")
        sent = [r.bytes - b for r, b in zip(readers, bytes0)]
        for r in readers:
            r.stopped.set()
        for r in readers:
            r.join(timeout=15)
        bad = [(r.status, r.error, r.bytes) for r in readers if r.status != 200 or r.error or r.bytes == 0]
        if bad:
            raise Failure(f"{what}: readers that got nothing or failed (status, error, bytes): {bad[:5]}")
        if route == "live.mp4" and any(r.head[4:8] != b"ftyp" for r in readers):
            raise Failure(f"{what}: a reader's body does not start with an ftyp box: {[r.head for r in readers][:3]}")
        if count and min(sent) == 0:
            raise Failure(f"{what}: a reader received nothing in the {MEASURE_S} s measured")
        rows.append({"what": what, "viewers": count, "cpu": 100 * (cpu1 - cpu0) / (t1 - t0), "frames": frames1 - frames0,
                     "dropped": view1.get("dropped", 0) - view0.get("dropped", 0),
                     "kbps": 8 * sum(sent) / (t1 - t0) / 1000 / max(count, 1), "state": view1.get("state")})
        time.sleep(1.0)  # (the readers gone: the muxer stops after the last)
    base = {"cpu": (rows[0]["cpu"] + rows[-1]["cpu"]) / 2, "frames": min(rows[0]["frames"], rows[-1]["frames"])}
    print(f"\nthe app's CPU, {MEASURE_S} s each, stream {stream} ({SIZE[0]}x{SIZE[1]} H.264 at {FPS} fps; "
          f"{len(app.names)} streams classified by {app.get('/api/v1/status')['engine']}):")
    print(f"  {'viewers':<22} {'CPU % of a core':>16} {'per viewer':>11} {'kbit/s each':>12} {'results':>8} {'dropped':>8}")
    for row in rows:
        per = "" if not row["viewers"] else f"{(row['cpu'] - base['cpu']) / row['viewers']:+.2f}"
        print(f"  {row['what']:<22} {row['cpu']:>16.1f} {per:>11} {row['kbps']:>12.0f} {row['frames']:>8} "
              f"{row['dropped']:>8}")
    print(f"  (per viewer: over the mean of the two without; those differ by {abs(rows[0]['cpu'] - rows[-1]['cpu']):.1f} "
          f"% of a core by themselves)")
    for row in rows[1:-1]:  # functional: the stream was classified on as with no viewer (no timing asserted)
        if row["state"] != "running" or row["frames"] < 0.5 * base["frames"]:
            raise Failure(f"with {row['what']} the stream gave {row['frames']} results in {MEASURE_S} s ({row['state']}), "
                          f"with none {base['frames']}")
    return rows


def run(args):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("skipped: no chromium on this machine (scripts/install-deps.sh installs it)")
        return 77
    if not shutil.which("gst-launch-1.0") or not has_element("x264enc"):
        print("skipped: no gst-launch-1.0 with x264enc to make the test's H.264 file")
        return 77
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    files = make_media(out / "media")
    if "hevc" not in files:
        print("no x265enc: the H.265 stream is left out")
    app = App(Path(args.app).resolve(), out, files)
    try:
        wait_ready(app.process, app.base, app.log)
        modes = run_page(args, chromium, app, out)
        rows = measure(app)
    except Failure:
        print(f"app log (end):\n{app.log_tail()}", file=sys.stderr)
        raise
    finally:
        code = app.stop()
    if code != 0:
        raise Failure(f"the app ended with {code} on SIGINT, not 0: {app.log_tail()}")
    live = sorted(n for n, s in modes.items() if s["mode"] == "mse")
    fallback = sorted(f"{n} ({s['codecs']})" for n, s in modes.items() if s["mode"] != "mse")
    base = (rows[0]["cpu"] + rows[-1]["cpu"]) / 2
    per = (rows[1]["cpu"] - base, (rows[2]["cpu"] - base) / READERS, rows[3]["cpu"] - base)
    print(f"live page: live through MSE {live}" + (f", snapshots for {fallback}" if fallback else "") +
          f"; labels drawn = the results' labels of the frames shown; clips play from the timeline and the event list; "
          f"no console errors; CPU per live.mp4 viewer {per[0]:+.2f} % of a core (1), {per[1]:+.2f} % ({READERS}), "
          f"MJPEG viewer {per[2]:+.2f} %; exit 0 on SIGINT; screenshots in {out}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--screenshot", help="also save the large view's screenshot here (docs/live-view.png)")
    args = parser.parse_args()
    try:
        return run(args)
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
