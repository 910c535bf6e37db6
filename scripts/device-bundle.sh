#!/usr/bin/env bash
# Builds for the GPU machine (Hopper, sm_90) and bundles the binaries with their libraries into .device/
# (see ../shared/device/README.md). Then, with the device tool:  carry [".device"], command "scripts/device-run.sh".
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_ARCHS=${CUDA_ARCHS:-90} scripts/build.sh
bundle=${VC_BUNDLE_SCRIPT:-../shared/device/bundle.sh}
[ -x "$bundle" ] || bundle="bash $bundle"
$bundle .device build/app/video-classifier build/tests/gpu_tests build/tests/unit_tests build/tools/bench
