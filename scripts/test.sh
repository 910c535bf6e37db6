#!/usr/bin/env bash
# Quick start, step 2: build and run every test (GPU tests report themselves skipped without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build && ctest --output-on-failure -j "$(nproc)" "$@"
