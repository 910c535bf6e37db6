#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/device-bundle.sh here: doctor, every GPU
# test, the application end to end on the sample video (cuDNN vs CPU engine), exported models vs PyTorch, the
# engine benchmark and the PyTorch baseline — in one call, building nothing. Logs and JSON go to $OUT (or
# out/device); a short table is printed last.
#   VC_BENCH_MODELS / VC_BENCH_BATCHES narrow the benchmarks; VC_SKIP_TESTS=1, VC_SKIP_E2E=1, VC_SKIP_BENCH=1 skip parts.
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
if [ "${VC_SKIP_TESTS:-0}" != 1 ]; then
  echo "== gpu_tests"
  gpu_tests --force-colors=false > "$out/gpu_tests.log" 2>&1 || status=1
  grep -E "ERROR|MESSAGE" -A2 "$out/gpu_tests.log" | tail -n 30
fi
if [ "${VC_SKIP_E2E:-0}" != 1 ]; then
  {
    echo "== sample video, cuDNN engine (default config)"
    video-classifier --config assets/configs/default.yaml --set inference.device=cuda --output "$out/labelled.mp4" \
      --set output.results=/tmp/gpu.jsonl 2>&1 | tail -n 3 || status=1
    echo "== sample video, CPU engine"
    video-classifier --config assets/configs/default.yaml --set inference.device=cpu --output none \
      --set output.results=/tmp/cpu.jsonl 2>&1 | tail -n 1 || status=1
    echo "== cuDNN vs ground truth"
    video-classifier evaluate --results /tmp/gpu.jsonl --ground-truth assets/video/fashion-mnist-sample.truth.txt | head -n 2
    echo "== cuDNN top-1 vs CPU top-1"
    video-classifier evaluate --results /tmp/gpu.jsonl --ground-truth /tmp/cpu.jsonl | head -n 2
    echo "== exported torchvision models (random weights) vs PyTorch"
    PYTHONUNBUFFERED=1 python3 tools/verify_export.py --infer infer_tensors || status=1
  } 2>&1 | tee "$out/e2e.txt"
  rm -f "$out/labelled.mp4"
fi
if [ "${VC_SKIP_BENCH:-0}" != 1 ]; then
  echo "== bench (cuDNN engine)"
  bench --models "$models" --batches "$batches" --json "$out/bench.json" > "$out/bench.log" 2>&1 || status=1
  echo "== bench_pytorch"
  PYTHONUNBUFFERED=1 python3 tools/bench_pytorch.py --models "$models" --batches "$batches" --json "$out/bench_pytorch.json" \
    > "$out/bench_pytorch.log" 2>&1 || status=1
  [ -f "$out/bench.json" ] && [ -f "$out/bench_pytorch.json" ] && python3 tools/compare_bench.py "$out/bench.json" "$out/bench_pytorch.json" | tee "$out/summary.txt"
  grep -E -A6 "^stem " "$out/bench.log" | head -n 8   # the stem alone: fused kernel vs cuDNN FP32 / TF32
  grep -E "^model|^resnet" "$out/bench.log" | head -n 30
fi
[ -f "$out/gpu_tests.log" ] && echo "== gpu_tests: $(grep -E '^\[doctest\] (test cases|assertions)' "$out/gpu_tests.log" | tr '\n' ' ')"
exit $status
