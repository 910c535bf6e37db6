"""Imports what a tool needs, or stops with a clear message naming what is missing and how to install it."""
import importlib
import os
import sys


def require(*names):
    """The named modules, imported; exits 69 (unavailable) with install instructions if any is missing."""
    modules, missing = [], []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as e:
            missing.append(e.name or name)
    if missing:
        tool = os.path.basename(sys.argv[0])
        sys.stderr.write(
            f"{tool}: needs the Python package(s) {', '.join(sorted(set(missing)))}, which are not installed.\n"
            "Set them up once in a virtual environment, from the repository root:\n"
            "  python3 -m venv .venv && . .venv/bin/activate && pip install -r tools/requirements.txt\n")
        sys.exit(69)
    return modules if len(modules) > 1 else modules[0]
