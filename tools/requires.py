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
            "Run the tools with the python of their environment, made once by (from the repository root):\n"
            "  scripts/tools-env.sh        # prints that python: $(scripts/tools-env.sh) tools/NAME.py …\n")
        sys.exit(69)
    return modules if len(modules) > 1 else modules[0]
