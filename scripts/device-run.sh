#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/device-bundle.sh here — in one call, building
# nothing. Logs and JSON go to out/device, or on the device to $OUT, packed at the end into $OUT/results.tgz; a short
# table is printed last. Stages (VC_STAGES, comma separated, default all but soak and sanitizer):
#   cold       scripts/cold-start-check.py: exec -> first result with empty caches, -> the tuned engine, and a second
#              start with the caches it left (cold_start.json: first_result_s, full_speed_s, second_start_s); nothing
#              dropped or classified twice across the switch to the tuned engine (not in the default)
#   doctor     video-classifier doctor (GPU, cuDNN, NVDEC decoders)
#   tests      every GPU test suite (gpu_tests; VC_GPU_TEST_ARGS narrows it, e.g. --test-suite=gpu.cold_start)
#   nvdec      NVDEC with frames in GPU memory vs CPU decoding: the same top-1 on every frame of a test file
#   decoders   what making an NVDEC decoder costs, alone and many at once, per count of surfaces (tools/bench/
#              nvdec_create.cpp; VC_DECODERS_ARGS adds its options; not in the default)
#   procs      the same, 32 decoders made at once by each of 1, 2 and 4 processes (VC_DECODERS_PROCS): whether the
#              driver makes them one at a time per process or per GPU (not in the default)
#   shared     whether an NVDEC decoder can serve several streams: a 1080p H.264 and the bundle's HEVC elementary
#              stream each decoded as VC_SHARED_STREAMS (default "4 8") streams through decoders shared by as many
#              as 32 surfaces hold, and through one each, every picture against the file decoded alone; a control
#              that must differ (nvdec_create --share; not in the default)
#   zoo        the media zoo (scripts/make-media-zoo.sh, carried in the bundle with each file's CPU results: libav
#              decoding, the CPU engine): every file decoded as the app chooses there (NVDEC where it decodes the
#              codec) and classified by cuDNN, the same top-1 as the CPU on every frame — or refused, saying why
#   latency    capture-to-result latency of 1 and of 4 live 30 fps streams (the results' latency_ms: p50, p99)
#   e2e        the sample video on the cuDNN engine vs the CPU engine; exported torchvision models vs PyTorch
#   stem       the stem and classifier-head benchmark (fused kernel vs cuDNN)
#   bench      the engine benchmark beside PyTorch (tools/bench/: bench, bench_pytorch.py, compare_bench.py)
#   variants   the engine benchmark again with other engine options: VC_BENCH_VARIANTS, ';'-separated option sets
#              (e.g. "--branches serial;--max-plans 64 --batches 1"), each into bench-variant-N.{log,json}
#   rss        scripts/rss-per-restart.sh with the cuDNN engine, NVDEC then CPU decoding (VC_RSS_RESTARTS, default 6)
#   pipeline   tools/bench/bench_pipeline: 1..64 streams in one process beside the decode-only ceiling, live streams
#   density    bench_pipeline's live runs at VC_DENSITY_LIVE (104,128,150) H.264 and VC_DENSITY_HEVC (250) HEVC 1080p30
#              streams of VC_DENSITY_SECONDS (60), VC_DENSITY_RUNS (1) times: held or not, the steady window's drops by
#              stage, stage times and frames in flight per stream, where each stream's start went (not in the default)
#              VC_DENSITY_ARGS adds bench_pipeline options (e.g. --batch 64)
#   events     bench_pipeline's live run of 64 1080p30 streams, then again with an event rule firing on every stream
#              every few seconds (clips, snapshots): drops, p99 and the CPU that recording costs (not in the default)
#   api        bench_pipeline's live run of 64 1080p30 streams as a service while one more stream is added and
#              removed over and over through the run's control interface (what the REST API calls): the 64 must
#              drop nothing; time to the added stream's first result and to a removal finalized (not in the default)
#   live       scripts/live-check.py: VC_LIVE_STREAMS (64) live 1080p30 H.264 streams as a service, measured in windows:
#              nobody watching, live.mp4 viewers (20 of one stream; one on each of VC_LIVE_WATCHED, 16, streams),
#              an MJPEG viewer — the app's CPU, p99, fps; nothing may drop (not in the default)
#   gpus       inference.gpus on the GPUs there (VC_GPUS, default "0,0": two engines on one GPU when there is only one): 4
#              NVDEC streams spread over the engines, the same top-1 on every frame as one engine, each engine's
#              share in the summary; then bench_pipeline's live run with --gpus (VC_GPUS_LIVE streams, default 64)
#   finetune   tools/train.py on CUDA: the bundled model fine-tuned on 5,000 Fashion-MNIST training items rendered onto
#              varied backgrounds (tools/fashion/render_fashion_set.py, from the items device-bundle.sh picked), then the app's
#              top-1 (cuDNN) on the 1,000 validation images beside PyTorch's (tools/compare_predictions.py, >= 99.9 %)
#   sanitizer  compute-sanitizer memcheck and racecheck over the GPU tests
#   regions    64 live streams whole, then with 4 regions each on 2 models (VC_REGIONS_LIVE); the preprocessing
#              kernel on a batch of 256 crops against 256 whole frames (not in the default)
#   swap       model hot swaps over the API under live streams (scripts/swap-check.py): the bundled ResNet-18 to a
#              ResNet-50 (exported with random weights) and back under VC_SWAP_LIVE (default 64) live 1080p30 H.264
#              streams, then to a ResNet-18 with other weights and back under 16 test patterns: 0 drops, every frame
#              classified once, the model ids old -> new -> old, no restart, exit 0; the switch time and the latency
#              p99 during the swap against the steady p99 (not in the default)
#   soak       scripts/soak.sh on the GPU engine (VC_SOAK_MINUTES, default 8)
# VC_BENCH_MODELS / VC_BENCH_BATCHES narrow the engine benchmark; VC_PIPELINE_ARGS adds bench_pipeline options;
# VC_LIVE_SECONDS (default 30) is how long the events and api stages' live runs last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/device}
mkdir -p "$out"
stages=",${VC_STAGES:-doctor,tests,nvdec,e2e,stem,bench,pipeline},"
want() { [[ $stages == *",$1,"* ]]; }

# The bundle travels compressed: unpack it once into /tmp (the tree's 64 MiB limit counts the repository too).
bundle=.device
if [ -f .device.tar.xz ]; then
  # (once per bundle: device-run.sh may be called several times in one device call, a few stages each)
  if [ ! -f /tmp/vc-bundle/.unpacked ] || [ .device.tar.xz -nt /tmp/vc-bundle/.unpacked ]; then
    rm -rf /tmp/vc-bundle && mkdir -p /tmp/vc-bundle && tar -C /tmp/vc-bundle -xJf .device.tar.xz && touch /tmp/vc-bundle/.unpacked
  fi
  bundle=/tmp/vc-bundle/.device
fi
. "$bundle/env.sh"
# PyTorch's CUDA 13 wheels keep NVRTC (which cuDNN's runtime-compiled engines load) in nvidia/cu13/lib.
cu13=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null)
[ -d "$cu13" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$cu13"
export VC_SOURCE_DIR=$PWD
models=${VC_BENCH_MODELS:-resnet18,resnet34,resnet50,resnet101,resnet152}
batches=${VC_BENCH_BATCHES:-1,8,32,128,256}
status=0
stage() { echo; echo "== $1 ($(date +%T))"; }
# A 10 s 720p30 H.264 clip of a moving ball (profile $2, default high).
make_clip() {
  gst-launch-1.0 -q videotestsrc num-buffers=300 pattern=ball ! video/x-raw,width=1280,height=720,framerate=30/1,format=I420 \
    ! x264enc bitrate=4000 speed-preset=superfast ! video/x-h264,profile="${2:-high}" ! h264parse ! mp4mux ! filesink location="$1"
}

# First, on the machine as it came: a cold start (empty caches), then a second one (scripts/cold-start-check.py).
if want cold; then
  stage "cold start: a live 1080p30 test pattern, first result and the tuned engine after exec; then a second start"
  scripts/cold-start-check.py --app "$(command -v video-classifier)" --json "$out/cold_start.json" 2>&1 |
    tee "$out/cold_start.log" || status=1
  # Where a start's first second goes before the first log line: the dynamic loader (its own statistics), the whole
  # exec of a command that needs no GPU.
  { LD_DEBUG=statistics video-classifier --version; time video-classifier --version; } >"$out/cold_loader.log" 2>&1 || true
  cp /tmp/vc-cold-*/*.log "$out/" 2>/dev/null
fi
if want doctor; then
  stage doctor
  video-classifier doctor 2>&1 | tee "$out/doctor.txt" || status=1
fi
if want tests; then
  stage gpu_tests
  gpu_tests --force-colors=false ${VC_GPU_TEST_ARGS:-} > "$out/gpu_tests.log" 2>&1 || status=1
  grep -E "ERROR|FATAL" -A3 "$out/gpu_tests.log" | head -n 60
  grep -E "MESSAGE" -A1 "$out/gpu_tests.log" | grep -v "^--" | head -n 40
  grep -E '^\[doctest\] (test cases|assertions)' "$out/gpu_tests.log"
fi
if want decoders; then
  stage "NVDEC decoders made one at a time and many at once (nvdec_create)"
  # shellcheck disable=SC2086  # (VC_DECODERS_ARGS: options, split into words)
  nvdec_create ${VC_DECODERS_ARGS:-} --json "$out/nvdec_create.json" 2>&1 | tee "$out/nvdec_create.log" || status=1
fi
if want procs; then
  stage "NVDEC decoders made by several processes at once (nvdec_create in VC_DECODERS_PROCS processes)"
  # Whether the driver makes decoders one at a time per process or per GPU: each process makes 32 at once (1 thread),
  # the processes started together; per GPU, P processes' wall times are ~P x one process's.
  : >"$out/nvdec_procs.log"
  for p in ${VC_DECODERS_PROCS:-1 2 4}; do
    for ((i = 0; i < p; i++)); do
      nvdec_create --decoders 32 --threads 1 --contexts 1 --surfaces 8 --outputs 1 --flags cuvid --repeats 1 \
        --json "$out/nvdec_procs_${p}_$i.json" >"$out/nvdec_procs_${p}_$i.log" 2>&1 &
    done
    wait
    echo "$p process(es), 32 decoders each (wall ms of each process's H.264 and HEVC at once):" | tee -a "$out/nvdec_procs.log"
    for ((i = 0; i < p; i++)); do
      python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("  ", *(round(r["wall_ms"]) for r in d["at_once"]))' \
        "$out/nvdec_procs_${p}_$i.json" | tee -a "$out/nvdec_procs.log" || status=1
    done
  done
fi
if want shared; then
  stage "NVDEC decoders shared by several streams (nvdec_create --share)"
  # (moving bars: every picture refers to the one before — a wrong reference changes it)
  gst-launch-1.0 -q videotestsrc num-buffers=300 pattern=smpte horizontal-speed=8 \
    ! video/x-raw,width=1920,height=1080,framerate=30/1,format=I420 ! x264enc bitrate=8000 speed-preset=superfast key-int-max=60 ! video/x-h264,profile=high ! h264parse \
    ! video/x-h264,stream-format=byte-stream,alignment=au ! filesink location=/tmp/vc-share.h264 || status=1
  gst-launch-1.0 -q filesrc location="$bundle/media/hevc-1080p30.mp4" ! qtdemux ! h265parse \
    ! video/x-h265,stream-format=byte-stream,alignment=au ! filesink location=/tmp/vc-share.h265 || status=1
  for n in ${VC_SHARED_STREAMS:-4 8}; do
    for codec in h264 hevc; do
      file=/tmp/vc-share.h264; [ $codec = hevc ] && file=/tmp/vc-share.h265
      nvdec_create --share $file --codec $codec --streams "$n" --json "$out/nvdec_share_${codec}_$n.json" 2>&1 |
        tee -a "$out/nvdec_share.log" || status=1
    done
  done
fi
if want nvdec; then
  stage "NVDEC (frames in GPU memory) vs CPU decoding"
  media=/tmp/vc-nvdec.mp4
  make_clip $media constrained-baseline  # (the bundle's only CPU H.264 decoder, openh264, decodes only that)
  for d in gpu cpu; do
    video-classifier --config assets/configs/default.yaml --input $media --output none --set input.decoder=$d \
      --set inference.device=cuda --set output.results=/tmp/nvdec-$d.jsonl 2>&1 | tee "$out/nvdec-$d.txt" | tail -n 4 || status=1
  done
  grep -q "GPU frames" "$out/nvdec-gpu.txt" && echo "the GPU-decoded run kept its frames in GPU memory" || { echo "NVDEC frames did NOT stay on the GPU"; status=1; }
  video-classifier evaluate --results /tmp/nvdec-gpu.jsonl --ground-truth /tmp/nvdec-cpu.jsonl | grep -m 1 "frame accuracy" |
    tee "$out/nvdec-compare.txt"
  grep -q "frame accuracy: 100.00% (300/300)" "$out/nvdec-compare.txt" || { echo "NVDEC and CPU decoding disagree"; status=1; }
fi
if want zoo; then
  stage "media zoo: NVDEC (where it decodes the codec) and cuDNN vs libav and the CPU engine, top-1 on every frame"
  zoo=${VC_ZOO_DIR:-$bundle/zoo}
  printf '%-24s %-28s %7s  %s\n' file "decoder here" frames "same top-1 as the CPU" | tee "$out/zoo.txt"
  while IFS=$'\t' read -r name file what; do
    rm -f /tmp/zoo.jsonl
    video-classifier --config assets/configs/default.yaml --set inference.device=cuda --input "$zoo/$file" --output none \
      --set output.results=/tmp/zoo.jsonl --log-level info >"$out/zoo-$name.txt" 2>&1
    rc=$?
    decoder=$(grep -oE 'stream0 .* (ok|failed)(, [^,]+)*' "$out/zoo-$name.txt" | grep -oE '(nv|av|vp|jpeg|mpeg2|openh264|av1)[a-z0-9_]*dec[a-z0-9_]*( \(GPU frames\))?' | head -n 1)
    if [ $rc -eq 0 ]; then
      same=$(video-classifier evaluate --results /tmp/zoo.jsonl --ground-truth "$zoo/$name.cpu.jsonl" 2>&1 |
             grep -m 1 "frame accuracy" | sed -E 's/frame accuracy: //; s/ of the top-1.*//')
      [[ $same == 100.00%* ]] || status=1
    else
      same="refused (exit $rc): $(grep -oE 'no [A-Za-z]* ?decoder here decodes [^(]*' "$out/zoo-$name.txt" | head -n 1)"
      [ $rc -eq 69 ] || status=1
    fi
    printf '%-24s %-28s %7s  %s\n' "$file" "${decoder:--}" "$(grep -c '"top"' /tmp/zoo.jsonl 2>/dev/null || echo 0)" \
      "$same" | tee -a "$out/zoo.txt"
  done <"$zoo/manifest.tsv"
fi
if want latency; then
  stage "latency: live 30 fps test patterns, capture to result"
  for n in 1 4; do
    inputs=()
    for ((i = 0; i < n; i++)); do inputs+=(--input test:ball); done
    video-classifier --config assets/configs/default.yaml --set inference.device=cuda "${inputs[@]}" --set input.fps=30 \
      --set input.max_frames=600 --output none --set output.results=/tmp/latency.jsonl --set inference.batch_size="$n" \
      >"$out/latency-$n.txt" 2>&1 || status=1
    python3 - "$n" /tmp/latency.jsonl <<'PY' | tee -a "$out/latency.txt"
import json, statistics, sys
lat = sorted(json.loads(l)["latency_ms"] for l in open(sys.argv[2]) if '"top"' in l)
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"{sys.argv[1]} live stream(s): {len(lat)} results, capture to result p50 {q(0.5):.2f} ms, p90 {q(0.9):.2f} ms, p99 {q(0.99):.2f} ms")
PY
  done
fi
if want e2e; then
  {
    stage "sample video, cuDNN engine (default config)"
    video-classifier --config assets/configs/default.yaml --set inference.device=cuda --output "$out/labelled.mp4" \
      --set output.results=/tmp/gpu.jsonl 2>&1 | tail -n 5 || status=1
    stage "sample video, CPU engine"
    if [ "${VC_SKIP_CPU:-0}" != 1 ]; then
      video-classifier --config assets/configs/default.yaml --set inference.device=cpu --output none \
        --set output.results=/tmp/cpu.jsonl 2>&1 | tail -n 3 || status=1
    fi
    echo "== cuDNN vs ground truth"
    video-classifier evaluate --results /tmp/gpu.jsonl --ground-truth assets/video/fashion-mnist-sample.truth.txt | head -n 2
    echo "== cuDNN top-1 vs CPU top-1"
    video-classifier evaluate --results /tmp/gpu.jsonl --ground-truth /tmp/cpu.jsonl | head -n 2
    echo "== diagnose: the default model layer by layer on the GPU beside the CPU reference"
    video-classifier diagnose --config assets/configs/default.yaml 2>&1 | tail -n 8 || status=1
    if [ "${VC_SKIP_EXPORT:-0}" != 1 ]; then
      echo "== exported torchvision models (random weights) vs PyTorch"
      PYTHONUNBUFFERED=1 python3 tools/verify_export.py --infer infer_tensors || status=1
    fi
  } 2>&1 | tee "$out/e2e.txt"
  rm -f "$out/labelled.mp4"
fi
if want stem; then
  stage "stem and head benchmark"
  bench --only stem,head,layers --json "$out/bench_stem.json" 2>&1 | tee "$out/bench_stem.log" | tail -n 150 || status=1
fi
if want bench; then
  stage "bench (cuDNN engine)"
  bench --models "$models" --batches "$batches" --json "$out/bench.json" > "$out/bench.log" 2>&1 || status=1
  stage bench_pytorch
  PYTHONUNBUFFERED=1 python3 tools/bench/bench_pytorch.py --models "$models" --batches "$batches" --json "$out/bench_pytorch.json" \
    > "$out/bench_pytorch.log" 2>&1 || status=1
  [ -f "$out/bench.json" ] && [ -f "$out/bench_pytorch.json" ] &&
    python3 tools/bench/compare_bench.py "$out/bench.json" "$out/bench_pytorch.json" | tee "$out/summary.txt"
fi
if want variants; then
  IFS=';' read -r -a variants <<<"${VC_BENCH_VARIANTS:-}"
  for i in "${!variants[@]}"; do
    stage "bench variant $i: ${variants[$i]}"
    defaults=()  # a variant may name its own sections, models or batches
    [[ " ${variants[$i]} " == *" --only "* ]] || defaults+=(--only engine)
    [[ " ${variants[$i]} " == *" --models "* ]] || defaults+=(--models "$models")
    [[ " ${variants[$i]} " == *" --batches "* ]] || defaults+=(--batches "$batches")
    # shellcheck disable=SC2086
    bench "${defaults[@]}" ${variants[$i]} --json "$out/bench-variant-$i.json" 2>&1 |
      tee "$out/bench-variant-$i.log" || status=1
  done
fi
if want rss; then
  for decoder in gpu cpu; do
    stage "RSS per RTSP reconnect, cuDNN engine, $decoder decoding"
    VC_ENGINE=cuda VC_DECODER=$decoder scripts/rss-per-restart.sh "${VC_RSS_RESTARTS:-6}" "$out/rss-$decoder" 2>&1 |
      tail -n 12 || status=1
  done
fi
if want pipeline; then
  stage "bench_pipeline"
  # shellcheck disable=SC2086
  bench_pipeline --app "$(command -v video-classifier)" --json "$out/bench_pipeline.json" --log-dir "$out/separate" ${VC_PIPELINE_ARGS:-} 2>&1 |
    tee "$out/bench_pipeline.log" | grep -v "^[0-9:. ]*warning" || status=1
fi
if want density; then
  # VC_DENSITY_RUNS times each (the acceptance: 3): density-h264-N.json, density-hevc-N.json and their logs. An empty
  # VC_DENSITY_LIVE or VC_DENSITY_HEVC leaves that codec out.
  h264=${VC_DENSITY_LIVE-104,128,150} hevc=${VC_DENSITY_HEVC-250}
  # Beside each run: its threads' states sampled for 10 s from the middle of its live seconds (scripts/thread-states.py:
  # running, or asleep where — a lock, the driver), into density-*-N-threads.log (several counts in one run: the
  # first count's).
  threads_beside() {
    (sleep 5; pid=$(pgrep -n -x bench_pipeline) &&
      scripts/thread-states.py "$pid" --after $((${VC_DENSITY_SECONDS:-60} / 2 + 10)) --seconds 10 --match vc- \
        --json "$out/$1-threads.json" >"$out/$1-threads.log" 2>&1) &
  }
  for ((run = 1; run <= ${VC_DENSITY_RUNS:-1}; run++)); do
    if [ -n "$h264" ]; then
      stage "density (run $run): $h264 live 1080p30 H.264 streams, the steady window's stages and drops"
      # shellcheck disable=SC2086  # (VC_DENSITY_ARGS: options, split into words)
      threads_beside "density-h264-$run"
      bench_pipeline --app "$(command -v video-classifier)" --streams "" --live "$h264" \
        --live-seconds "${VC_DENSITY_SECONDS:-60}" --separate-max 0 ${VC_DENSITY_ARGS:-} --json "$out/density-h264-$run.json" 2>&1 |
        tee "$out/density-h264-$run.log" | grep -v "^[0-9:. ]*warning" || status=1
    fi
    # HEVC: the bundle's 1080p30 H.265 file (device-bundle.sh makes it with x265), looped.
    if [ -n "$hevc" ]; then
      stage "density (run $run): $hevc live 1080p30 HEVC streams"
      # shellcheck disable=SC2086
      threads_beside "density-hevc-$run"
      bench_pipeline --app "$(command -v video-classifier)" --streams "" --live "$hevc" \
        --live-media "$bundle/media/hevc-1080p30.mp4" --live-seconds "${VC_DENSITY_SECONDS:-60}" --separate-max 0 \
        ${VC_DENSITY_ARGS:-} --json "$out/density-hevc-$run.json" 2>&1 | tee "$out/density-hevc-$run.log" | grep -v "^[0-9:. ]*warning" || status=1
    fi
  done
fi
if want events; then
  stage "events: 64 live streams, recording on every stream every few seconds"
  bench_pipeline --app "$(command -v video-classifier)" --streams "" --live 64 --live-seconds "${VC_LIVE_SECONDS:-30}" --events \
    --json "$out/bench_events.json" 2>&1 | tee "$out/bench_events.log" | grep -v "^[0-9:. ]*warning" || status=1
fi
if want api; then
  stage "api: 64 live streams, a stream added and removed beside them over and over"
  bench_pipeline --app "$(command -v video-classifier)" --streams "" --live 64 --live-seconds "${VC_LIVE_SECONDS:-30}" --churn \
    --json "$out/bench_api.json" 2>&1 | tee "$out/bench_api.log" | grep -v "^[0-9:. ]*warning" || status=1
fi
if want regions; then
  stage "regions: 64 live streams classified whole, then 4 regions each on 2 models; preprocessing of 256 crops"
  bench --only preprocess --json "$out/bench_preprocess.json" 2>&1 | tee "$out/bench_preprocess.log" | grep "preprocess" || status=1
  bench_pipeline --app "$(command -v video-classifier)" --streams "" --live "${VC_REGIONS_LIVE:-64}" \
    --live-seconds "${VC_LIVE_SECONDS:-30}" --regions --json "$out/bench_regions.json" 2>&1 | tee "$out/bench_regions.log" |
    grep -v "^[0-9:. ]*warning" || status=1
fi
if want swap; then
  stage "model hot swap (cuDNN engine): ResNet-18 -> ResNet-50 -> back under ${VC_SWAP_LIVE:-64} live 1080p30 H.264 streams"
  gst-launch-1.0 -q videotestsrc num-buffers=300 pattern=ball ! video/x-raw,width=1920,height=1080,framerate=30/1,format=I420 \
    ! x264enc bitrate=6000 speed-preset=superfast ! video/x-h264,profile=high ! h264parse ! mp4mux \
    ! filesink location=/tmp/vc-swap-1080.mp4 || status=1
  PYTHONUNBUFFERED=1 python3 tools/export_model.py resnet50 --random --out /tmp/vc-swap-models >"$out/swap-export.log" 2>&1 ||
    { echo "export of a ResNet-50 failed (see swap-export.log)"; status=1; }
  scripts/swap-check.py --app "$(command -v video-classifier)" --streams "${VC_SWAP_LIVE:-64}" --file /tmp/vc-swap-1080.mp4 \
    --new /tmp/vc-swap-models/resnet50.safetensors --device cuda --seconds "${VC_SWAP_SECONDS:-10}" --json "$out/swap.json" 2>&1 | tee "$out/swap.log" || status=1
  # (and the same network with other weights, under test patterns: the quick swap a fine-tuned model makes)
  scripts/swap-check.py --app "$(command -v video-classifier)" --streams 16 --device cuda --json "$out/swap-tuned.json" 2>&1 |
    tee "$out/swap-tuned.log" || status=1
fi
if want live; then
  stage "live view: ${VC_LIVE_STREAMS:-64} live 1080p30 H.264 streams classified while ${VC_LIVE_WATCHED:-16} are watched (live.mp4)"
  gst-launch-1.0 -q videotestsrc num-buffers=300 pattern=ball ! video/x-raw,width=1920,height=1080,framerate=30/1,format=I420 \
    ! x264enc bitrate=6000 speed-preset=superfast key-int-max=30 ! video/x-h264,profile=high ! h264parse ! mp4mux \
    ! filesink location=/tmp/vc-live-1080.mp4 || status=1
  scripts/live-check.py --app "$(command -v video-classifier)" --streams "${VC_LIVE_STREAMS:-64}" --file /tmp/vc-live-1080.mp4 \
    --viewers 20 --watch "${VC_LIVE_WATCHED:-16}" --device cuda --seconds "${VC_LIVE_WINDOW_S:-15}" --json "$out/live.json" 2>&1 |
    tee "$out/live.log" || status=1
  for log in /tmp/vc-live-*/*/app.log; do [ -f "$log" ] && cp "$log" "$out/live-app-$(basename "$(dirname "$log")").log"; done
  # (#41: a crash at the stop prints its thread and call stack — shown here, to read with addr2line against the
  # unstripped build-device/app/video-classifier of the same bundle)
  grep -h -A40 "video-classifier crashed" "$out"/live-app-*.log 2>/dev/null | head -n 60
fi
if want gpus; then
  stage "inference.gpus=[${VC_GPUS:-0,0}]: streams spread over the engines, the same top-1 as one engine"
  media=/tmp/vc-gpus.mp4
  make_clip $media
  for run in one gpus; do
    extra=()
    [ $run = gpus ] && extra=(--set "inference.gpus=[${VC_GPUS:-0,0}]")
    video-classifier --config assets/configs/default.yaml --set inference.device=cuda --input $media --input $media \
      --input $media --input $media --output none --set "output.results=/tmp/gpus-$run-{stream}.jsonl" "${extra[@]}" \
      >"$out/gpus-$run.txt" 2>&1 || status=1
  done
  grep -E "^engine [0-9]+ \(" "$out/gpus-gpus.txt" | tee "$out/gpus-engines.txt"
  [ "$(grep -cE '^engine [0-9]+ \(.*: [1-9][0-9]* stream' "$out/gpus-engines.txt")" -ge 2 ] ||
    { echo "the streams were NOT spread over the engines"; status=1; }
  for i in 0 1 2 3; do
    video-classifier evaluate --results /tmp/gpus-gpus-stream$i.jsonl --ground-truth /tmp/gpus-one-stream$i.jsonl |
      grep -m 1 "frame accuracy" | sed "s/^/stream$i: /" | tee -a "$out/gpus-compare.txt"
  done
  [ "$(grep -c "frame accuracy: 100.00% (300/300)" "$out/gpus-compare.txt")" = 4 ] ||
    { echo "several engines and one disagree"; status=1; }
  bench_pipeline --app "$(command -v video-classifier)" --streams "" --live "${VC_GPUS_LIVE:-64}" --live-seconds 20 \
    --gpus "${VC_GPUS:-0,0}" --json "$out/bench_gpus.json" 2>&1 | tee "$out/bench_gpus.log" | grep -v "^[0-9:. ]*warning" || status=1
fi
if want finetune; then
  stage "fine-tune: the bundled ResNet-18 on Fashion-MNIST training items on varied backgrounds, PyTorch on CUDA"
  set=/tmp/vc-fashion-set
  if [ ! -f "$bundle/finetune/items.npz" ]; then
    echo "finetune: $bundle/finetune/items.npz is missing (device-bundle.sh makes it where dataset-fashion-mnist is installed)"
    status=1
  else
    rm -rf $set
    python3 tools/fashion/render_fashion_set.py --from-subset "$bundle/finetune/items.npz" --out $set | tee "$out/finetune.txt"
    PYTHONUNBUFFERED=1 python3 tools/train.py --data $set --out /tmp/vc-fashion.safetensors --device cuda \
      --epochs "${VC_FINETUNE_EPOCHS:-8}" --batch 64 --workers 12 --predictions /tmp/vc-fashion-pytorch.jsonl 2>&1 |
      tee -a "$out/finetune.txt" || status=1
    inputs=()
    for d in $set/val/*/; do inputs+=(--input "$d"); done
    video-classifier --model /tmp/vc-fashion.safetensors "${inputs[@]}" --set inference.device=cuda --output none \
      --set output.results=/tmp/vc-fashion-app.jsonl --log-level warn >>"$out/finetune.txt" 2>&1 || status=1
    python3 tools/compare_predictions.py --results /tmp/vc-fashion-app.jsonl --predictions /tmp/vc-fashion-pytorch.jsonl \
      --min 99.9 | tee -a "$out/finetune.txt" || status=1
  fi
fi
if want sanitizer; then
  stage "compute-sanitizer (memcheck, racecheck) over the GPU tests"
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ -z "$sanitizer" ]; then
    echo "compute-sanitizer: not on this machine" | tee "$out/sanitizer.txt"
  else
    for tool in memcheck racecheck; do
      "$sanitizer" --tool $tool --error-exitcode 99 gpu_tests --test-suite=gpu.preprocess,gpu.stem --force-colors=false \
        > "$out/sanitizer-$tool.log" 2>&1
      echo "$tool: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.log" | tail -n 1)" | tee -a "$out/sanitizer.txt"
    done
  fi
fi
if want soak; then
  stage "soak (GPU engine)"
  VC_SOAK_ENGINE=cuda scripts/soak.sh "${VC_SOAK_MINUTES:-8}" "$out/soak" 2>&1 | tail -n 30 || status=1
fi
echo
echo "== done ($(date +%T)), status $status"
# The device tool brings back only a few files per call: on the device ($OUT set), everything goes back as one archive
# (unpack with: tar -xzf results.tgz). Soak media and results lines are large and are left out.
if [ -n "${OUT:-}" ] && [ "$out" = "$OUT" ]; then
  tar -C "$out" --exclude='*.mp4' --exclude='*.jsonl' -czf /tmp/vc-results.tgz . &&
    find "$out" -mindepth 1 -delete && mv /tmp/vc-results.tgz "$out/results.tgz"
fi
exit $status
