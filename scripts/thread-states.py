#!/usr/bin/env python3
"""Where a running process's threads spend their time, by sampling: every --every seconds for --seconds, each
thread's state (R running or runnable, S sleeping, D in the kernel uninterruptibly) and, when not running, the kernel
function it sleeps in (/proc/PID/task/TID/wchan: futex_wait_queue = a lock or condition variable, an ioctl's = the
driver). Threads are grouped by name with their digits taken out (vc-post, vc-dec*, …); prints the groups with
--match in their name (all when empty), each state's share of the samples, largest first.

  usage: thread-states.py PID [--after 20] [--seconds 10] [--every 0.01] [--match vc-] [--json out.json]
"""
import argparse
import collections
import json
import os
import re
import sys
import time


def sample(pid, tally, threads):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat") as f:
                stat = f.read()
            with open(f"{base}/wchan") as f:
                wchan = f.read().strip() or "-"
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        # (comm may hold spaces and parentheses: it is between the first "(" and the last ")")
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        group = re.sub(r"\d+", "#", name)
        threads[group].add(tid)
        tally[group][state if state == "R" else f"{state} {wchan}"] += 1
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pid", type=int)
    p.add_argument("--after", type=float, default=20, help="seconds to wait before sampling")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--every", type=float, default=0.01)
    p.add_argument("--match", default="")
    p.add_argument("--json")
    a = p.parse_args()
    time.sleep(a.after)
    tally = collections.defaultdict(collections.Counter)
    threads = collections.defaultdict(set)
    end = time.monotonic() + a.seconds
    samples = 0
    while time.monotonic() < end and sample(a.pid, tally, threads):
        samples += 1
        time.sleep(a.every)
    if not samples:
        print(f"thread-states: process {a.pid} gone before sampling", file=sys.stderr)
        return 1
    out = {}
    print(f"thread states of process {a.pid}: {samples} samples over {a.seconds:g} s (share of each group's samples)")
    for group, counts in sorted(tally.items(), key=lambda kv: -sum(kv[1].values())):
        if a.match not in group:
            continue
        total = sum(counts.values())
        shares = [(state, n / total) for state, n in counts.most_common(6)]
        out[group] = {"threads": len(threads[group]), "states": dict(shares)}
        print(f"  {group:<20} x{len(threads[group]):<4} " + ", ".join(f"{s} {100 * v:.0f}%" for s, v in shares))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pid": a.pid, "samples": samples, "groups": out}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
