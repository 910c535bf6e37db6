#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build, and run the main job on the bundled defaults
# (the sample video through the default model, writing out/labelled.mp4 and out/results.jsonl). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo
build/app/video-classifier doctor || true   # 69 = no GPU: the CPU engine runs the job instead
echo
mkdir -p out
exec build/app/video-classifier --config assets/configs/default.yaml "$@"
