#!/usr/bin/env bash
# Configures and builds into build/ (Release). CUDA_ARCHS overrides the GPU architectures ("75;86;89;90").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
args=(-S . -B build -DCMAKE_BUILD_TYPE=Release)
[ -n "${CUDA_ARCHS:-}" ] && args+=("-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS}")
mkdir -p build && cmake "${args[@]}" >build/configure.log 2>&1 || { cat build/configure.log; exit 1; }
echo "build: compiling (log: build/build.log)"
if ! cmake --build build -j "$(nproc)" >build/build.log 2>&1; then
  grep -E -A4 'error|Error' build/build.log | head -80; echo "build: FAILED (full log: build/build.log)" >&2; exit 1
fi
echo "build: done"
