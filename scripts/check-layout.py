#!/usr/bin/env python3
"""The source tree's shape, checked (ctest: layout): the include graph between its parts has no circle and never
runs from a lower floor up to a higher one; no source file is over 600 lines; no folder holds more than 10
source files (.cpp, .cu, .py; headers go with their .cpp). A part is a library: a top-level folder (config, inference, …), or one room of the
pipeline (pipeline/core, pipeline/sources, …). Prints the floors and the arrows between parts; exits 1 on a
violation."""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Floors, lowest first: a folder may include from its own floor or any lower one, never from a higher one.
FLOORS = [
    ["config"],
    ["inference"],
    ["pipeline/core"],
    ["pipeline/batching", "pipeline/sources", "pipeline/results", "pipeline/regions"],
    ["pipeline/outputs"],
    ["pipeline/events", "pipeline/live"],
    ["pipeline"],
    ["service"],
    ["app"],
    ["tools", "tests", "fuzz"],
]
CODE_DIRS = ["config", "inference", "pipeline", "service", "app", "tools", "tests", "fuzz"]
MAX_LINES = 600
MAX_UNITS = 10

floor_of = {part: i for i, floor in enumerate(FLOORS) for part in floor}


def part_of(folder):
    """The library a folder belongs to: a room of the pipeline, else its top-level folder."""
    top = folder.split("/")[0]
    return "/".join(folder.split("/")[:2]) if top == "pipeline" else top


problems = []
edges = collections.Counter()
units = collections.Counter()
for top in CODE_DIRS:
    for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
        rel_dir = os.path.relpath(dirpath, ROOT)
        if "/fixtures" in rel_dir or "/corpus" in rel_dir:
            continue
        for name in names:
            if not name.endswith((".cpp", ".hpp", ".cu", ".h", ".py")):
                continue
            path = os.path.join(dirpath, name)
            text = open(path, encoding="utf-8", errors="replace").read()
            lines = text.count("\n")
            if lines > MAX_LINES:
                problems.append(f"{rel_dir}/{name}: {lines} lines (at most {MAX_LINES})")
            if name.endswith((".cpp", ".cu", ".py")):
                units[rel_dir] += 1
            for include in re.findall(r'^#include "([^"]+)"', text, re.M):
                target = os.path.dirname(include)
                if not target or not os.path.isdir(os.path.join(ROOT, target)):
                    continue
                if part_of(target) != part_of(rel_dir):
                    edges[(part_of(rel_dir), part_of(target))] += 1
for folder, n in sorted(units.items()):
    if n > MAX_UNITS:
        problems.append(f"{folder}/: {n} source files (at most {MAX_UNITS})")
for (src, dst), n in sorted(edges.items()):
    if src not in floor_of or dst not in floor_of:
        problems.append(f"{src} -> {dst}: a part with no floor in scripts/check-layout.py")
    elif floor_of[dst] > floor_of[src]:
        problems.append(f"{src} -> {dst}: includes from a higher floor ({n} include(s))")
# Circles: depth-first search over the folder graph.
graph = collections.defaultdict(set)
for src, dst in edges:
    graph[src].add(dst)
state = {}
def visit(node, stack):
    state[node] = 1
    for nxt in sorted(graph[node]):
        if state.get(nxt) == 1:
            problems.append("circle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]) if nxt in stack else f"circle at {nxt}")
        elif nxt not in state:
            visit(nxt, stack + [nxt])
    state[node] = 2
for node in sorted(graph):
    if node not in state:
        visit(node, [node])

for i, floor in enumerate(FLOORS):
    print(f"floor {i}: " + ", ".join(floor))
print(f"{len(edges)} arrows between parts, {sum(edges.values())} includes")
if "-v" in sys.argv:
    for (src, dst), n in sorted(edges.items()):
        print(f"  {src} -> {dst} ({n})")
for p in problems:
    print("LAYOUT:", p)
sys.exit(1 if problems else 0)
