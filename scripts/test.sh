#!/usr/bin/env bash
# Quick start, step 2: build and run every test (GPU tests report themselves skipped without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The tools' PyTorch environment (tools/train.py and export_model.py are tested against the app): made once, outside
# the tree, reused by every later run (scripts/tools-env.sh).
scripts/tools-env.sh >/dev/null
scripts/build.sh
# A test-only Python environment: prometheus_client's parser checks the /metrics text (tests/service/test_service.cpp).
if [ ! -x build/test-venv/bin/python ] || ! build/test-venv/bin/python -c 'import prometheus_client' 2>/dev/null; then
  python3 -m venv build/test-venv && build/test-venv/bin/pip install -q prometheus_client==0.21.1
fi
cd build && ctest --output-on-failure -j "$(nproc)" "$@"
