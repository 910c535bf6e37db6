#!/usr/bin/env bash
# CI (no GPU): the media fuzzer (scripts/media-fuzz.py) against the AddressSanitizer + UBSan build of the app that
# scripts/ci-sanitize.sh made in build-asan/, for SECONDS (default 60), on a small media zoo (12 frames a file).
# A fixed seed (VC_MEDIA_FUZZ_SEED, default 2026) makes CI's cases the same every run; by hand, give another seed and
# more time:  VC_MEDIA_FUZZ_SEED=$RANDOM scripts/ci-media-fuzz.sh 1800
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
dir=build-asan
app="$dir/app/video-classifier"
[ -x "$app" ] || { echo "ci-media-fuzz: $app is missing: run scripts/ci-sanitize.sh first" >&2; exit 1; }
# As in ci-sanitize.sh: without a GPU driver, the CUDA toolkit's stub library answers "no GPU".
if ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  export LD_LIBRARY_PATH="$PWD/$dir/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# Memory errors and undefined behaviour are findings; leaks are not (GLib and GStreamer keep what they load).
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=86"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
scripts/make-media-zoo.sh "$dir/media-zoo" 12 >/dev/null
python3 scripts/media-fuzz.py --app "$app" --corpus "$dir/media-zoo" --seconds "$seconds" \
  --seed "${VC_MEDIA_FUZZ_SEED:-2026}" --out "$dir/media-fuzz" \
  --model-args "--model tests/fixtures/basic_narrow.safetensors --set model.input_size=64 --set inference.device=cpu"
