#!/usr/bin/env python3
"""Media fuzzer: mutates real video files — bit flips, overwritten blocks, truncation, corrupted MP4 box sizes and
Matroska/WebM element sizes, repeated chunks — and runs each through the whole app (ideally the ASan + UBSan build).
A finding is a crash (a signal, a sanitizer report), a hang past the stall timeout, an internal error (70) or any
exit code outside what a bad file may give (0, 65, 66, 69). Findings are kept with the command that replays them.
Standard library only; deterministic for a given --seed.

  usage: scripts/media-fuzz.py --app BUILD/app/video-classifier --corpus DIR --seconds 60 [--seed N] [--out DIR]
"""
import argparse
import os
import random
import shlex
import shutil
import subprocess
import sys
import time

ALLOWED = {0, 65, 66, 69}
STALL_S = 5
# MP4 boxes whose 32-bit size is worth breaking, and Matroska element IDs whose size (an EBML vint) follows the ID.
MP4_BOXES = [b"moov", b"trak", b"mdia", b"minf", b"stbl", b"stsd", b"stsz", b"stco", b"co64", b"stts", b"stss",
             b"ctts", b"stsc", b"avcC", b"hvcC", b"mdat", b"tkhd", b"mvhd", b"moof", b"traf", b"trun"]
EBML_IDS = [bytes.fromhex(h) for h in ("18538067", "1F43B675", "1654AE6B", "AE", "A3", "A0", "A1", "E0", "63A2",
                                        "1C53BB6B", "114D9B74")]


def mutate(data: bytearray, rng: random.Random) -> str:
    """Applies one mutation in place; returns what it did."""
    n = len(data)
    kind = rng.choice(["flip", "block", "truncate", "box", "ebml", "repeat"])
    if kind == "flip":
        k = rng.randint(1, 64)
        for _ in range(k):
            i = rng.randrange(n)
            data[i] ^= 1 << rng.randrange(8)
        return f"{k} bit flips"
    if kind == "block":
        size = rng.choice([16, 256, 4096])
        at = rng.randrange(max(1, n - size))
        data[at:at + size] = bytes(rng.randrange(256) for _ in range(min(size, n - at)))
        return f"{size} random bytes at {at}"
    if kind == "truncate":
        cut = rng.randrange(max(1, n))
        del data[cut:]
        return f"truncated at {cut} of {n}"
    if kind == "box":
        hits = [i for box in MP4_BOXES for i in find_all(data, box) if i >= 4]
        if hits:
            i = rng.choice(hits) - 4
            value = rng.choice([0, 1, 7, 8, 0x7FFFFFFF, 0xFFFFFFFF, rng.randrange(1 << 32),
                                int.from_bytes(data[i:i + 4], "big") + rng.randint(-64, 64)]) & 0xFFFFFFFF
            data[i:i + 4] = value.to_bytes(4, "big")
            return f"MP4 box {bytes(data[i + 4:i + 8])!r} size -> {value}"
    if kind == "ebml":
        hits = [(i, len(eid)) for eid in EBML_IDS for i in find_all(data, eid)]
        if hits:
            i, length = rng.choice(hits)
            j = i + length
            if j < n:
                data[j] = rng.choice([0x00, 0x01, 0x80, 0xFF, 0x08, rng.randrange(256)])
                return f"EBML element at {i}: size byte -> {data[j]:#x}"
    at = rng.randrange(n)
    size = rng.randint(1, min(65536, n - at))
    data[at:at] = data[at:at + size]
    return f"{size} bytes at {at} repeated"


def find_all(data: bytes, needle: bytes):
    start = 0
    while True:
        i = data.find(needle, start)
        if i < 0:
            return
        yield i
        start = i + 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    parser.add_argument("--corpus", required=True, help="folder of valid media files (scripts/make-media-zoo.sh)")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--out", default="build/media-fuzz")
    parser.add_argument("--model-args", default="", help="extra app arguments (model, engine)")
    args = parser.parse_args()
    seeds = sorted(os.path.join(args.corpus, f) for f in os.listdir(args.corpus)
                   if not f.endswith((".tsv", ".log", ".json", ".jsonl")))
    if not seeds:
        sys.exit(f"media-fuzz: no media in {args.corpus}")
    work = os.path.join(args.out, "work")
    findings = os.path.join(args.out, "findings")
    os.makedirs(work, exist_ok=True)
    os.makedirs(findings, exist_ok=True)
    rng = random.Random(args.seed)
    print(f"media-fuzz: seed {args.seed}, {len(seeds)} seed files, {args.seconds:.0f} s")
    deadline = time.monotonic() + args.seconds
    runs, found, codes = 0, 0, {}
    while time.monotonic() < deadline:
        seed_file = rng.choice(seeds)
        data = bytearray(open(seed_file, "rb").read())
        what = [mutate(data, rng) for _ in range(rng.choice([1, 1, 2, 3]))]
        ext = os.path.splitext(seed_file)[1]
        case = os.path.join(work, f"case-{runs}{ext}")
        with open(case, "wb") as f:
            f.write(data)
        results = os.path.join(work, "results.jsonl")
        command = [args.app, *shlex.split(args.model_args), "--input", case, "--output", "none",
                   "--set", f"input.stall_timeout_s={STALL_S}", "--set", "input.start_timeout_s=0",
                   "--set", f"output.results={results}", "--log-level", "error"]
        started = time.monotonic()
        try:
            proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=STALL_S + 60)
            code, output = proc.returncode, proc.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            code, output = "hang", (e.stdout or b"").decode(errors="replace")
        runs += 1
        codes[code] = codes.get(code, 0) + 1
        bad = code == "hang" or code not in ALLOWED or "AddressSanitizer" in output or "runtime error:" in output
        if bad:
            found += 1
            keep = os.path.join(findings, f"finding-{found}{ext}")
            shutil.copy(case, keep)
            command[command.index(case)] = keep
            with open(keep + ".txt", "w") as f:
                f.write(f"exit {code} after {time.monotonic() - started:.1f} s from {seed_file}: {'; '.join(what)}\n")
                f.write("replay: " + shlex.join(command) + "\n\n" + output[-6000:])
            print(f"media-fuzz: FINDING {found}: exit {code} from {os.path.basename(seed_file)} ({'; '.join(what)}): "
                  f"{keep}", file=sys.stderr)
        os.remove(case)
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(codes.items(), key=lambda kv: str(kv[0])))
    print(f"media-fuzz: {runs} runs (exit codes {summary}), {found} finding(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
