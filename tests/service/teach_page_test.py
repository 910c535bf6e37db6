#!/usr/bin/env python3
"""Teach it from the page (issue #40's acceptance), in a real browser: Debian's chromium, headless, over the DevTools
protocol (web_page_test.py's Browser), against a real run of the app on the CPU engine with two test-pattern streams
(`bars`: SMPTE bars, `noise`: snow), output.collect keeping every frame it is unsure of, and training for real with
PyTorch (tools/train.py in the tools environment, run by the service as a job).

Through the page: a few frames of the review queue are clicked one by one and discarded; the frames of one stream are
selected with a click and a shift-click, the other's with their groups' boxes, and labelled in bulk ("bars", "noise");
a tile's capture button adds its frame; a training job is started and cancelled (nothing of it left, the running model
untouched), another runs to its end while the page shows its progress, its candidate's accuracy per class and
confusion matrix beside the running model's; a click deploys it: both streams' results switch to the new labels and
model id without a restart and without a gap in their frame numbers; the header's roll-back button brings the old
model back, again without a gap. Over the API: the dataset's splits, the labelled frames gone from the queue, a corrupt
model file refused (422) with the running model untouched. No console error in the page; the app ends with exit 0 on
SIGINT. Screenshots of the review view and of the training result go to --out (and, with --docs DIR, to
DIR/teach-review.png and DIR/teach-training.png for the README). About 1.5 minutes on 2 cores.

    teach_page_test.py --app build/app/video-classifier --out build/teach-page
        --python ~/.cache/video-classifier/tools-venv/bin/python [--docs docs]

Exit 0: passed; 1: failed (what, on stderr); 77: skipped (no chromium, or no PyTorch in --python's environment).
"""
import argparse
import base64
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from raw_http import Failure, free_port, read_new_lines, stop_process  # (beside this file)
from web_page_test import console_errors, open_page, wait_ready

TOKEN = "teach-page-test-token"
STREAMS = {"bars": "smpte", "noise": "snow"}  # stream -> test pattern; each stream's frames are labelled its name
# Each stream's frame rate: the CPU engine classifies about 18 frames a second on 2 cores. Its frames are never dropped
# for load (drop: block; a live stream's default keeps 2 frames and drops the stalest, and on 2 cores the trainer, the
# browser and a model's build beside the running one do hold the engine up now and then): a gap in a stream's frame
# numbers can only be the switch's.
FPS = 5
PER_STREAM = 40     # frames of each stream waiting for review before labelling (about 80 % go to train: >= 20 needed)
DISCARD = 10        # and of noise, discarded first
EPOCHS = 4
AFTER_SWITCH = 20   # results of each stream looked at after a switch
DOC_LIMIT = 300 * 1024  # the README's pictures, at most


class App:
    """The app as a service, with its HTTP API."""

    def __init__(self, binary, out, python):
        self.out = out
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        inputs = "".join(f"  - {{name: {name}, kind: test, pattern: {pattern}, fps: {FPS}, width: 160, height: 120, "
                         f"drop: block}}\n"
                         for name, pattern in STREAMS.items())
        (out / "service.yaml").write_text(
            f"api:\n  enabled: true\n  token_file: token\n  snapshot_interval_s: 0.5\n  allowed_dirs: [upload]\n"
            f"metrics:\n  port: {self.port}\ninputs:\n{inputs}"
            f"output:\n  results: results/{{stream}}.jsonl\n"
            f"  collect: {{dir: review, below_confidence: 1.0, max_per_minute: 300, max_frames: 100000}}\n"
            f"teach: {{datasets_dir: datasets, models_dir: models, block_s: 1, epochs: {EPOCHS}}}\n")
        self.log = out / "app.log"
        self.read = {}  # stream -> (bytes of its results file read, the result lines in them)
        self.process = subprocess.Popen([str(binary), "--config", str(out / "service.yaml"), "--set",
                                         f"teach.python={python}"],
                                        stdout=self.log.open("wb"), stderr=subprocess.STDOUT, cwd=out)

    def request(self, method, path, body=None):
        """(status, answer as JSON) — an error status is an answer too."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Authorization": f"Bearer {TOKEN}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text.decode(errors="replace")

    def get(self, path):
        status, answer = self.request("GET", path)
        if status != 200:
            raise Failure(f"GET {path}: {status} {answer}")
        return answer

    def model(self):
        return self.get("/api/v1/models")["models"][0]

    def review(self):
        """The frames waiting: {file: stream}."""
        return {i["file"]: i["stream"] for i in self.get("/api/v1/datasets/review?limit=10000")["items"]}

    def dataset(self):
        return next(d for d in self.get("/api/v1/datasets")["datasets"] if d["name"] == "default")

    def results(self, stream):
        """The stream's result lines so far (those with a top-1), in the order written (read on from where the last
        call stopped: this is polled)."""
        offset, lines = self.read.get(stream, (0, []))
        new, offset = read_new_lines(self.out / "results" / f"{stream}.jsonl", offset)
        lines += [line for line in new if "top" in line]
        self.read[stream] = (offset, lines)
        return lines

    def log_tail(self, chars=3000):
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self):
        """SIGINT: outputs finalized; the exit status (None: it had to be killed)."""
        return stop_process(self.process)


class Page:
    """The page in chromium, with what the test does to it: clicks (the page's own handlers, run at once: the review
    list is redrawn every 2 s as frames arrive, so a click is never aimed at a position), typing (real key input)."""

    def __init__(self, browser):
        self.browser = browser

    def js(self, expression):
        return self.browser.evaluate(expression)

    def wait(self, expression, what, timeout=60):
        self.browser.wait_for(expression, what, timeout)

    def text(self, selector):
        return self.js(f"(document.querySelector({json.dumps(selector)}) || {{textContent: null}}).textContent")

    def click(self, selector):
        if not self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e || e.hidden || "
                       f"e.disabled) return false; e.scrollIntoView({{block: 'nearest'}}); e.click(); return true; }})()"):
            raise Failure(f"the page has no {selector} to click (or it is hidden or disabled)")

    def type(self, selector, text):
        """The field emptied, focused, and `text` typed into it."""
        self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.value = ''; e.focus(); "
                f"return true; }})()")
        self.browser.send("Input.insertText", {"text": text})
        value = self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.blur(); "
                        f"return e.value; }})()")
        if value != text:
            raise Failure(f"typed {text!r} into {selector}, it holds {value!r}")

    def selected(self):
        return self.js("[...document.querySelectorAll('.review-item.selected')].map(e => e.dataset.file)")

    def screenshot(self, selector, path, height=None, pad=8):
        """A PNG of the element (its top `height` pixels) and `pad` pixels around it, scrolled into view first (the
        viewport as it is: a capture beyond it would lay the page out anew, without its scroll bar)."""
        box = self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView(); "
                      f"scrollBy(0, -{pad}); const r = e.getBoundingClientRect(); "
                      f"return [r.left + scrollX, r.top + scrollY, r.width, r.height, innerHeight]; }})()")
        self.browser.pump(0.5)  # (the thumbnails scrolled into view load)
        x, y, width, h, viewport = box
        h = min(h, height or h, viewport - 2 * pad)
        clip = {"x": max(0, x - pad), "y": max(0, y - pad), "width": width + 2 * pad, "height": h + 2 * pad, "scale": 1}
        data = base64.b64decode(self.browser.send("Page.captureScreenshot", {"format": "png", "clip": clip})["data"])
        Path(path).write_bytes(data)
        return len(data)


def wait_until(what, condition, timeout, browser=None, every=0.2):
    """condition() until it returns something true (returned); the browser's events taken in meanwhile."""
    deadline = time.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.time() > deadline:
            raise Failure(f"{what}: not within {timeout} s")
        if browser:
            browser.pump(every)
        else:
            time.sleep(every)


def select_items(page, stream_of, stream, how):
    """Selects the frames of `stream` that the page shows — `how`: "range" (a click on the first, a shift-click on
    the last, then a click on each other stream's frame the range took in), "groups" (the box of every group that
    has some, then a click on each other frame selected) or a number n (a click on each of its last n) — and returns
    them and how many the range or the boxes took; the page must have selected exactly those."""
    expression = """((streamOf, want, how) => {
      const click = (e, shift) => e.dispatchEvent(new MouseEvent("click", {bubbles: true, cancelable: true,
                                                                            shiftKey: shift}));
      let mine = [...document.querySelectorAll(".review-item")].filter(e => streamOf[e.dataset.file] === want);
      if (!mine.length) return {mine: [], selected: [], count: document.body.dataset.selected, took: 0};
      if (typeof how === "number") {
        mine = mine.slice(-how);
        for (const e of mine) click(e, false);
      } else if (how === "range") {
        click(mine[0], false);
        click(mine[mine.length - 1], true);
      } else {
        for (const g of document.querySelectorAll(".review-group")) {
          if ([...g.querySelectorAll(".review-item")].some(e => streamOf[e.dataset.file] === want)) {
            g.querySelector(".select-group").click();
          }
        }
      }
      const took = document.querySelectorAll(".review-item.selected").length;
      for (const e of document.querySelectorAll(".review-item.selected")) {
        if (streamOf[e.dataset.file] !== want) click(e, false);
      }
      const boxes = [...document.querySelectorAll(".review-group")].map(g => [g.dataset.label,
        g.querySelector(".select-group").checked, [...g.querySelectorAll(".review-item")].every(e => e.classList.contains("selected"))]);
      return {mine: mine.map(e => e.dataset.file), took, count: document.body.dataset.selected, boxes,
              selected: [...document.querySelectorAll(".review-item.selected")].map(e => e.dataset.file)};
    })(%s, %s, %s)""" % (json.dumps(stream_of), json.dumps(stream), json.dumps(how))
    r = page.js(expression)
    if len(r["mine"]) < (how if isinstance(how, int) else PER_STREAM // 2):
        waiting = sum(1 for s in stream_of.values() if s == stream)
        raise Failure(f"the page shows only {len(r['mine'])} frames of {stream} (of {waiting} waiting)")
    if sorted(r["selected"]) != sorted(r["mine"]) or r["count"] != str(len(r["mine"])):
        raise Failure(f"selecting {stream}'s frames ({how}): {len(r['selected'])} selected (body says {r['count']}), "
                      f"want its {len(r['mine'])}")
    if any(checked != whole for _, checked, whole in r["boxes"]):
        raise Failure(f"a group's box does not say whether all of it is selected: {r['boxes']}")
    return r["mine"], r["took"]


def label_selected(page, app, label, files):
    page.type("#teach-label", label)
    page.click("#label-selected")
    message = f"{len(files)} labelled '{label}'"
    page.wait(f"document.getElementById('teach-message').textContent.startsWith({json.dumps(message)})",
              f"the message '{message}'", 30)
    waiting = app.review()
    if any(f in waiting for f in files):
        raise Failure(f"labelled frames still wait for review: {[f for f in files if f in waiting][:3]}")
    status, _ = app.request("GET", "/api/v1/datasets/review/" + files[0])
    if status != 404:
        raise Failure(f"a labelled frame's picture answered {status}, not 404")
    page.wait("document.body.dataset.selected === '0'", "the selection emptied after labelling", 10)


def check_switch(app, stream, old_id, new_id, labels, since):
    """The results of `stream` from `old_id`'s to `new_id`'s: the first line of the new model follows the last of the
    old one with no frame between, every later line is the new model's with one of `labels`; returns
    (lines of the new model, the share of them labelled `expected`)."""
    lines = [x for x in app.results(stream) if x["frame"] >= since]
    first = next(i for i, x in enumerate(lines) if x.get("model") == new_id)
    if first == 0 or lines[first - 1].get("model") != old_id:
        raise Failure(f"{stream}: the line before the first of {new_id} is {lines[first - 1] if first else None}")
    frames = [x["frame"] for x in lines]
    gaps = [(a, b) for a, b in zip(frames, frames[1:]) if b != a + 1]
    if gaps:
        dropped = app.get(f"/api/v1/streams/{stream}")["dropped"]
        raise Failure(f"{stream}: frame numbers jump across the switch to {new_id}: {gaps[:5]} "
                      f"(the switch between frames {frames[first - 1]} and {frames[first]}; {dropped} frames of the "
                      f"stream dropped in all)")
    after = lines[first:]
    others = [x for x in after if x.get("model") != new_id]
    if others:
        raise Failure(f"{stream}: after the switch to {new_id}, a line of {others[0].get('model')}: {others[0]}")
    wrong = [x["top"][0]["label"] for x in after if x["top"][0]["label"] not in labels]
    if wrong:
        raise Failure(f"{stream}: {new_id} gave labels {sorted(set(wrong))}, not its own ({labels[:4]}…)")
    return after, frames[first]


def run(args):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("skipped: no chromium on this machine (scripts/install-deps.sh installs it)")
        return 77
    probe = subprocess.run([args.python, "-c", "import torch, torchvision, safetensors, PIL, numpy"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"skipped: {args.python} has no PyTorch (scripts/tools-env.sh makes the tools environment): "
              f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else probe.returncode}")
        return 77
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "token").write_text(TOKEN + "\n")
    (out / "upload").mkdir()
    corrupt = out / "upload" / "corrupt.safetensors"
    corrupt.write_bytes(b"\x40\x00\x00\x00\x00\x00\x00\x00{\"fc.weight\": {\"dtype\": \"F32\", \"shape\": [10, 512], "
                        b"\"data_offsets\": [0, 20480]}}" + b"\x00" * 100)  # (a header that promises more than there is)
    started = time.time()
    app = App(Path(args.app).resolve(), out, args.python)
    browser = profile = None
    timings = {}
    try:
        wait_ready(app.process, app.base, app.log)
        pid = app.process.pid
        old = app.model()
        old_id, old_labels = old["id"], old["labels"]
        if not old_id.startswith("default@") or "Trouser" not in old_labels:
            raise Failure(f"the run's model is {old_id} with labels {old_labels}, not the bundled Fashion-MNIST one")
        browser, profile = open_page(chromium, app.base + "/")
        page = Page(browser)
        page.wait("!!document.getElementById('add-token')", "the page")
        page.js("""(() => { const t = document.getElementById('add-token'); t.value = '%s';
                           t.dispatchEvent(new Event('change')); return localStorage.getItem('vc-token'); })()""" % TOKEN)
        page.wait(f"document.querySelectorAll('.tile').length === {len(STREAMS)} && [...document.querySelectorAll('.tile')]"
                  ".every(t => Number(t.dataset.pictures || 0) >= 1)", "both tiles with a picture", 60)

        # 1. Review: enough of each stream's frames wait (a few seconds of each, as the model is unsure of them all).
        def enough():
            waiting = app.review()
            per = {s: sum(1 for x in waiting.values() if x == s) for s in STREAMS}
            return waiting if per["bars"] >= PER_STREAM and per["noise"] >= PER_STREAM + DISCARD else None
        stream_of = wait_until(f"{PER_STREAM} frames of each stream (and {DISCARD} more of noise) waiting for review",
                               enough, 90, browser)
        page.wait(f"document.querySelectorAll('.review-item').length >= {2 * PER_STREAM + DISCARD}", "the review items", 30)
        timings["frames collected"] = time.time() - started

        # 2. Discard a few, clicked one by one (and the group of bars, the biggest now, is shown first).
        discard, _ = select_items(page, stream_of, "noise", DISCARD)
        page.click("#discard-selected")
        page.wait(f"document.getElementById('teach-message').textContent === '{DISCARD} discarded'",
                  "the discard's message", 30)
        waiting = app.review()
        if any(f in waiting for f in discard):
            raise Failure(f"discarded frames still wait for review: {[f for f in discard if f in waiting][:3]}")
        if app.dataset()["images"] != 0:
            raise Failure(f"the dataset has images after a discard: {app.dataset()}")
        page.wait("document.body.dataset.selected === '0' && !document.querySelector('.review-item.selected')",
                  "the selection emptied after the discard", 10)

        # 3. Label in bulk: bars with a click and a shift-click, noise with its groups' boxes.
        bars, took = select_items(page, stream_of, "bars", "range")
        page.type("#teach-label", "bars")
        shot = page.screenshot("#teach", out / "teach-review.png", height=600)
        label_selected(page, app, "bars", bars)
        stream_of = app.review()
        page.wait("document.querySelectorAll('.review-item').length > 0 && !document.querySelector('.review-item.selected')",
                  "the review list redrawn", 10)
        noise, took_noise = select_items(page, stream_of, "noise", "groups")
        label_selected(page, app, "noise", noise)
        dataset = app.dataset()
        counts = dataset["labels"]
        for label in STREAMS:
            split = counts.get(label, {})
            if split.get("train", 0) < 20 or split.get("val", 0) < 1:
                raise Failure(f"the dataset's {label}: {split} (want >= 20 in train and some in val): {counts}")
        print(f"review: {len(bars)} frames of bars labelled through a click and a shift-click (the range took {took}), "
              f"{len(noise)} of noise through their groups' boxes (which took {took_noise}); dataset {counts}")

        # 4. Capture now: the bars tile's button, with the label typed.
        images = dataset["images"]
        page.type("#teach-label", "bars")
        page.click('.tile[data-stream="bars"] .capture')
        page.wait("document.getElementById('teach-message').textContent === \"captured 1 picture(s) of bars as 'bars'\"",
                  "the capture's message", 30)
        if app.dataset()["images"] != images + 1:
            raise Failure(f"the capture button: the dataset has {app.dataset()['images']} images, want {images + 1}")

        # 5. A training job cancelled from the page once it shows progress: nothing of it is left, the model runs on.
        page.type("#train-epochs", str(EPOCHS))
        candidates = out / "models" / "default"

        def candidate_files():
            return sorted(p.name for p in candidates.glob("*") if not p.name.endswith((".log", ".progress.jsonl")))
        before = candidate_files() if candidates.exists() else []
        page.click("#train-start")
        progress = re.compile(rf"^running: epoch \d+/{EPOCHS}, loss \d+\.\d+.*, about .+ left$")
        page.wait(f"new RegExp({json.dumps(progress.pattern)}).test(document.getElementById('train-state').textContent)",
                  "the training's progress (epoch, loss, ETA)", 120)
        page.click("#train-cancel")
        page.wait("document.getElementById('train-panel').dataset.state === 'cancelled'", "the job cancelled", 60)
        message, state = page.text("#train-message"), page.text("#train-state")
        if message != "cancelled: nothing of it was kept" or state != "cancelled":
            raise Failure(f"after the cancel the page says {message!r}, its state {state!r}")
        if candidate_files() != before:
            raise Failure(f"the cancelled job left {sorted(set(candidate_files()) - set(before))} in {candidates}")
        if app.model()["id"] != old_id:
            raise Failure(f"after a cancelled training the model is {app.model()['id']}, not {old_id}")

        # 6. A training job to its end, its progress watched in the page.
        page.click("#train-start")
        train_started = time.time()
        page.wait("document.getElementById('train-panel').dataset.state === 'running'", "the second job running", 30)
        seen = []
        deadline = train_started + 240
        while True:
            state, panel = page.js("[document.getElementById('train-state').textContent, "
                                   "document.getElementById('train-panel').dataset.state]")
            if not seen or seen[-1] != state:
                seen.append(state)
            if panel == "done":
                break
            if panel in ("failed", "cancelled") or time.time() > deadline:
                job = app.request("GET", "/api/v1/models/default/train")[1]
                raise Failure(f"the training job is {panel} after {time.time() - train_started:.0f} s: states {seen}; "
                              f"job {json.dumps(job)[:3000]}")
            browser.pump(0.25)
        timings["training"] = time.time() - train_started
        shown = [s for s in seen if progress.match(s)]
        job = app.get("/api/v1/models/default/train")
        epochs_s = sum(e["seconds"] for e in job["epochs"])
        if not shown and epochs_s >= 5:  # (the page looks every 2 s: a job on a GPU may be done between two looks)
            raise Failure(f"the page never showed the job's progress (epoch, loss, ETA) in {epochs_s:.0f} s of "
                          f"training: {seen}")
        result = job["result"]
        if result["val_accuracy"] < 0.9:  # (two test patterns: told apart after an epoch or two)
            raise Failure(f"the candidate's val accuracy is {result['val_accuracy']}: epochs {job['epochs']}")
        summary = page.text("#train-summary")
        if not re.search(r"val accuracy \d+\.\d %.* the running model on the same images: \d+\.\d %", summary):
            raise Failure(f"the candidate's summary: {summary!r} (want its accuracy beside the running model's)")
        tables = page.js("""[...document.querySelectorAll('#train-tables table')].map(t => [...t.rows].map(r =>
                            [...r.cells].map(c => c.textContent)))""")
        if len(tables) != 2:
            raise Failure(f"#train-tables holds {len(tables)} tables, want 2 (per class, confusion)")
        per_class, confusion = tables
        if per_class[0] != ["class", "candidate", "images", "running model"] or \
                sorted(r[0] for r in per_class[1:]) != sorted(STREAMS) or \
                not all(re.fullmatch(r"\d+\.\d %", r[1]) for r in per_class[1:]):
            raise Failure(f"the per-class table: {per_class}")
        if confusion[0][1:] != result["labels"] or [r[0] for r in confusion[1:]] != result["labels"] or \
                [[int(v) for v in r[1:]] for r in confusion[1:]] != result["confusion"]:
            raise Failure(f"the confusion matrix shown {confusion}, the job's {result['labels']} {result['confusion']}")
        candidate = Path(result["out"])
        if not candidate.exists() or candidate.parent.resolve() != candidates.resolve():
            raise Failure(f"the candidate {candidate} is not in {candidates}")
        shot2 = page.screenshot("#train-panel", out / "teach-training.png")
        print(f"training: {timings['training']:.1f} s from the click to 'done', {epochs_s:.1f} s of it in "
              f"{len(job['epochs'])} epochs; the page showed {seen}; {summary}")

        # 7. A corrupt model file: 422, the model runs on.
        status, answer = app.request("PUT", "/api/v1/models/default", {"weights": str(corrupt)})
        if status != 422 or app.model()["id"] != old_id:
            raise Failure(f"deploying a corrupt file: {status} {answer}; the model is {app.model()['id']}")

        # 8. Deploy from the page: both streams switch to the new labels and id, no restart, no frame missed.
        since = {s: (app.results(s) or [{"frame": 0}])[-1]["frame"] for s in STREAMS}
        clicked = time.time()
        page.click("#train-deploy")
        first_new = {}

        def switched():
            now = app.model()["id"]
            if now == old_id:
                return None
            for s in STREAMS:
                if s not in first_new and any(x.get("model") == now for x in app.results(s)[-50:]):
                    first_new[s] = time.time() - clicked
            return now if len(first_new) == len(STREAMS) else None
        new_id = wait_until("both streams' results from the deployed model", switched, 60, browser, 0.05)
        timings["switch"] = max(first_new.values())
        page.wait(f"document.getElementById('train-message').textContent === {json.dumps('deployed: ' + new_id)}",
                  "the deploy's message", 10)
        wait_until(f"{AFTER_SWITCH} results of each stream from {new_id}",
                   lambda: all(sum(x.get("model") == new_id for x in app.results(s)) >= AFTER_SWITCH for s in STREAMS),
                   60, browser)
        switch_frames = {}
        for s in STREAMS:
            after, switch_frames[s] = check_switch(app, s, old_id, new_id, result["labels"], since[s])
            right = sum(x["top"][0]["label"] == s for x in after) / len(after)
            if right < 0.8:
                raise Failure(f"{s}: the new model calls {100 * (1 - right):.0f} % of its frames something else: "
                              f"{[x['top'][0]['label'] for x in after]}")
            print(f"deploy: {s} switched to {new_id} between frames {switch_frames[s] - 1} and {switch_frames[s]}, "
                  f"{100 * right:.0f} % of {len(after)} frames since labelled {s!r}")
        if app.process.poll() is not None or app.process.pid != pid:
            raise Failure("the app is not the same process after the deploy")
        for s in STREAMS:
            if app.get(f"/api/v1/streams/{s}")["restarts"] != 0:
                raise Failure(f"stream {s} restarted")

        # 9. Roll back with the header's button (the page asks first: answered yes).
        page.wait("!!document.querySelector('#model-ids button[data-model=\"default\"]')", "the roll-back button", 30)
        since = {s: switch_frames[s] for s in STREAMS}
        page.js("window.confirm = () => true; true")
        clicked = time.time()
        page.click('#model-ids button[data-model="default"]')
        page.wait(f"document.getElementById('form-message').textContent === {json.dumps('model default: ' + old_id)}",
                  "the roll back's message", 30)
        back = {}

        def rolled_back():
            for s in STREAMS:
                lines = app.results(s)
                if s not in back and lines and lines[-1].get("model") == old_id:
                    back[s] = time.time() - clicked
            return len(back) == len(STREAMS)
        wait_until(f"both streams' results from {old_id} again", rolled_back, 60, browser, 0.05)
        timings["rollback"] = max(back.values())
        wait_until(f"{AFTER_SWITCH} results of each stream from {old_id} again",
                   lambda: all(sum(x.get("model") == old_id and x["frame"] > since[s] for x in app.results(s))
                               >= AFTER_SWITCH for s in STREAMS), 60, browser)
        for s in STREAMS:
            after, frame = check_switch(app, s, new_id, old_id, old_labels, since[s])
            print(f"roll back: {s} back on {old_id} between frames {frame - 1} and {frame}, labels "
                  f"{sorted(set(x['top'][0]['label'] for x in after))}")
        if app.model()["id"] != old_id or app.process.pid != pid or app.process.poll() is not None:
            raise Failure(f"after the roll back the model is {app.model()['id']} (pid {app.process.pid}, was {pid})")
        page.wait(f"document.querySelector('#model-ids .model-id').textContent === {json.dumps(old_id)}",
                  "the header's model id back", 10)

        drops = {s: app.get(f"/api/v1/streams/{s}")["dropped"] for s in STREAMS}
        if any(drops.values()):
            raise Failure(f"frames dropped (drop: block): {drops}")
        # 10. The page said nothing was wrong.
        browser.pump(0.5)
        errors = console_errors(browser.events)
        if errors:
            raise Failure("the page reported errors:\n  " + "\n  ".join(errors))
        for name, size in (("teach-review.png", shot), ("teach-training.png", shot2)):
            if args.docs:
                docs = Path(args.docs)
                if size > DOC_LIMIT:
                    raise Failure(f"{name}: {size // 1024} KB, over {DOC_LIMIT // 1024} KB for the README")
                shutil.copyfile(out / name, docs / name)
                print(f"screenshot {docs / name} ({size // 1024} KB)")
    except Failure:
        job = app.request("GET", "/api/v1/models/default/train")[1] if app.process.poll() is None else None
        print(f"app log (end):\n{app.log_tail()}\ntraining job: {json.dumps(job)[-2000:]}", file=sys.stderr)
        raise
    finally:
        if browser:
            browser.close()
        if profile:
            shutil.rmtree(profile, ignore_errors=True)
        code = app.stop()
    if code != 0:
        raise Failure(f"the app ended with {code} on SIGINT, not 0: {app.log_tail()}")
    print(f"teach page: frames collected in {timings['frames collected']:.1f} s, training {timings['training']:.1f} s, "
          f"switch {timings['switch']:.2f} s (click -> first result of the new model in both streams), roll back "
          f"{timings['rollback']:.2f} s; no frame dropped; no console errors; exit 0 on SIGINT; "
          f"{time.time() - started:.0f} s in all; "
          f"screenshots in {out}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--python", default=sys.executable, help="the tools' Python (with PyTorch): teach.python")
    parser.add_argument("--docs", help="also copy the screenshots here (teach-review.png, teach-training.png)")
    args = parser.parse_args()
    try:
        return run(args)
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
