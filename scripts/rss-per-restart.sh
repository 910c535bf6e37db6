#!/usr/bin/env bash
# rss-per-restart.sh [RESTARTS] [OUTDIR] — how much the client's RSS moves per RTSP reconnect: one client classifies
# an RTSP stream from a server (the app itself) that is killed and restarted RESTARTS times (default 8), ~7 s apart;
# the client's RSS is sampled once frames flow again after each restart. Prints one line per restart and the mean
# growth per restart. VC_DECODER (auto|gpu|cpu, default auto) and VC_ENGINE (cpu|cuda, default cpu) pick the path.
# A diagnostic, not a test: the soak (scripts/soak.sh) is the check.
#   scripts/rss-per-restart.sh 8 out/rss                       # this machine, CPU decoding
#   VC_ENGINE=cuda VC_DECODER=gpu scripts/rss-per-restart.sh    # the GPU machine, NVDEC
set -uo pipefail
cd "$(dirname "$0")/.."
restarts=${1:-8}
out=${2:-out/rss-per-restart}
app=${VC_APP:-$(command -v video-classifier || echo build/app/video-classifier)}
decoder=${VC_DECODER:-auto}
engine=${VC_ENGINE:-cpu}
mkdir -p "$out"
port=$((30000 + $$ % 20000))
url="rtsp://127.0.0.1:$port/rss"

server=""
start_server() {
  "$app" --model tests/fixtures/basic_narrow.safetensors --set model.input_size=64 --set inference.device=cpu \
    --input test:ball --set input.fps=30 --set input.width=640 --set input.height=480 --output "$url" \
    --log-level warn >>"$out/server.log" 2>&1 &
  server=$!
}
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
results() { local n; n=$(grep -c "\"top\"" "$out/results.jsonl" 2>/dev/null); echo "${n:-0}"; }
# Waits until the client has classified 30 more frames than $1 (at most 20 s).
wait_frames() {
  local n=0
  while [ "$(results)" -lt $(($1 + 30)) ] && [ $n -lt 200 ]; do sleep 0.1; n=$((n + 1)); done
}

start_server
sleep 2
"$app" --input "$url" --output none --set input.decoder="$decoder" --set inference.device="$engine" \
  --set output.results="$out/results.jsonl" --set input.stall_timeout_s=3 --set input.reconnect.delay_s=0.5 \
  --set input.reconnect.max_delay_s=1 --set input.reconnect.attempts=0 --log-level info >"$out/client.log" 2>&1 &
client=$!
wait_frames 0
sleep 2
base=$(rss_kib $client)
echo "rss-per-restart: decoder $decoder, engine $engine; RSS before the first restart $((base / 1024)) MiB"
echo "restart rss_kib" >"$out/rss.txt"
echo "0 $base" >>"$out/rss.txt"
for i in $(seq 1 "$restarts"); do
  kill "$server"; wait "$server" 2>/dev/null
  sleep 1
  before=$(results)
  start_server
  wait_frames "$before"
  sleep 2
  r=$(rss_kib $client)
  echo "$i $r" >>"$out/rss.txt"
  echo "  restart $i: RSS $((r / 1024)) MiB ($(( (r - base) / 1024 )) MiB above the first sample), $(results) results"
done
last=$(rss_kib $client)
kill -INT "$client"; wait "$client"; rc=$?
kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
echo "rss-per-restart: $(( (last - base) / restarts )) KiB per restart on average over $restarts; client exit $rc" |
  tee "$out/summary.txt"
