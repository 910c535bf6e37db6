#!/usr/bin/env bash
# Configures and builds into build/ (Release). CUDA_ARCHS overrides the GPU architectures ("75;86;89;90");
# VC_BUILD_TARGET builds that one target only (deploy/Containerfile: video-classifier).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
dir=${VC_BUILD_DIR:-build}
args=(-S . -B "$dir" -DCMAKE_BUILD_TYPE=Release ${VC_CMAKE_ARGS:-})
[ -n "${CUDA_ARCHS:-}" ] && args+=("-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS}")
mkdir -p "$dir" && cmake "${args[@]}" >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
echo "build: compiling in $dir/ (log: $dir/build.log)"
target=(); [ -n "${VC_BUILD_TARGET:-}" ] && target=(--target "$VC_BUILD_TARGET")
if ! cmake --build "$dir" -j "$(nproc)" "${target[@]}" >"$dir/build.log" 2>&1; then
  grep -E -A4 'error|Error' "$dir/build.log" | head -80; echo "build: FAILED (full log: $dir/build.log)" >&2; exit 1
fi
echo "build: done"
