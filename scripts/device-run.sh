#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/device-bundle.sh here: doctor, every GPU
# test, the engine benchmark and the PyTorch baseline in one call. Builds nothing. Logs and JSON go to $OUT
# (or out/device); a short table is printed last.
#   VC_BENCH_MODELS / VC_BENCH_BATCHES narrow the benchmarks; VC_SKIP_BENCH=1 runs only doctor and the tests.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/device}
mkdir -p "$out"
. .device/env.sh
# PyTorch's CUDA 13 wheels keep NVRTC (which cuDNN's runtime-compiled engines load) in nvidia/cu13/lib.
cu13=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null)
[ -d "$cu13" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$cu13"
export VC_SOURCE_DIR=$PWD
models=${VC_BENCH_MODELS:-resnet18,resnet34,resnet50,resnet101,resnet152}
batches=${VC_BENCH_BATCHES:-1,8,32,128,256}
status=0

echo "== doctor"; video-classifier doctor 2>&1 | tee "$out/doctor.txt" || status=1
echo "== gpu_tests"
gpu_tests --force-colors=false 2>&1 | tee "$out/gpu_tests.log" | tail -n 40
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if [ "${VC_SKIP_BENCH:-0}" != 1 ]; then
  echo "== bench (cuDNN engine)"
  bench --models "$models" --batches "$batches" --json "$out/bench.json" 2>&1 | tee "$out/bench.log" || status=1
  echo "== bench_pytorch"
  PYTHONUNBUFFERED=1 python3 tools/bench_pytorch.py --models "$models" --batches "$batches" --json "$out/bench_pytorch.json" \
    2>&1 | tee "$out/bench_pytorch.log" || status=1
  [ -f "$out/bench.json" ] && [ -f "$out/bench_pytorch.json" ] && python3 tools/compare_bench.py "$out/bench.json" "$out/bench_pytorch.json" | tee "$out/summary.txt"
fi
echo "== gpu_tests: $(grep -E '^\[doctest\] (test cases|assertions)' "$out/gpu_tests.log" | tr '\n' ' ')"
exit $status
