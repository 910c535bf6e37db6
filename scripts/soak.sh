#!/usr/bin/env bash
# soak.sh [MINUTES] [OUTDIR] — a long run of 8 streams in one process, one of them from an RTSP server that is
# killed and restarted every 2 minutes; the others test patterns and a looped file paced in real time. Samples the
# client's RSS (and GPU memory where nvidia-smi exists) every 10 s, then checks: memory flat after warm-up (±2 %),
# every server restart recovered (stream_down followed by stream_up), every results line whole, no frame twice.
# Writes OUTDIR/soak.json and OUTDIR/soak.txt; exit 0 only if every check passed. Not part of CI (it takes minutes):
#   scripts/soak.sh 30 out/soak                       # this machine, CPU engine, small frames
#   VC_SOAK_ENGINE=cuda scripts/soak.sh 8 $OUT/soak   # the GPU machine (scripts/device-run.sh stage soak)
set -uo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
out=${2:-out/soak}
engine=${VC_SOAK_ENGINE:-cpu}
app=${VC_APP:-$(command -v video-classifier || echo build/app/video-classifier)}
mkdir -p "$out"
port=$((30000 + $$ % 20000))
if [ "$engine" = cpu ]; then
  model=(--model tests/fixtures/basic_narrow.safetensors --set model.input_size=64)
  size=(--set input.width=160 --set input.height=120)
else
  model=()  # the bundled default model
  size=(--set input.width=640 --set input.height=480)
fi
media=$out/soak-clip.mp4
[ -f "$media" ] || gst-launch-1.0 -q videotestsrc num-buffers=300 pattern=ball ! video/x-raw,width=320,height=240,framerate=30/1,format=I420 \
  ! x264enc ! h264parse ! mp4mux ! filesink location="$media" || { echo "soak: cannot make the test clip"; exit 69; }

server_pid=""
start_server() {
  "$app" "${model[@]}" --set inference.device=cpu --input test:ball --set input.fps=15 --set input.width=160 \
    --set input.height=120 --output "rtsp://127.0.0.1:$port/soak" --log-level warn >>"$out/server.log" 2>&1 &
  server_pid=$!
}
start_server
sleep 2

inputs=(--input test --input test:ball --input test:snow --input test:smpte75 --input test:gradient --input test:pinwheel
        --input "$media" --input "rtsp://127.0.0.1:$port/soak")
"$app" "${model[@]}" --set inference.device="$engine" "${inputs[@]}" "${size[@]}" --set input.fps=10 \
  --set inputs.6.width=0 --set inputs.6.height=0 --set inputs.6.fps=0 --set inputs.6.realtime=true --set inputs.6.loop=true \
  --set inputs.7.width=0 --set inputs.7.height=0 --set inputs.7.fps=0 --set inputs.7.name=rtsp \
  --set inputs.7.stall_timeout_s=5 --set inputs.7.reconnect.delay_s=1 --set inputs.7.reconnect.max_delay_s=4 \
  --set inputs.7.reconnect.attempts=0 --set inference.batch_size=8 --set logging.perf_interval_s=60 \
  --output none --set output.results="$out/soak.jsonl" >"$out/client.log" 2>&1 &
client=$!

echo "time_s rss_kib gpu_mib" >"$out/memory.txt"
start=$(date +%s)
restarts=0
next_restart=$((start + 120))
while [ $(( $(date +%s) - start )) -lt $((minutes * 60)) ]; do
  sleep 10
  kill -0 $client 2>/dev/null || { echo "soak: the client died"; break; }
  now=$(date +%s)
  rss=$(awk '/VmRSS/ {print $2}' /proc/$client/status)
  gpu=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null | awk -F', ' -v p=$client '$1 == p {print $2}')
  echo "$((now - start)) $rss ${gpu:-0}" >>"$out/memory.txt"
  if [ "$now" -ge "$next_restart" ]; then
    kill -KILL "$server_pid"; wait "$server_pid" 2>/dev/null
    sleep 3
    start_server
    restarts=$((restarts + 1))
    next_restart=$((now + 120))
  fi
done
sleep 15  # let the last restart recover
kill -INT $client; wait $client; client_rc=$?
kill -INT "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null

python3 - "$out" "$restarts" "$client_rc" "$minutes" "$engine" <<'PY'
import json, sys
out, restarts, rc, minutes, engine = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
rows = [list(map(float, l.split())) for l in open(f"{out}/memory.txt").read().splitlines()[1:] if l.strip()]
warm = [r for r in rows if r[0] >= 120] or rows
def drift(col):
    if len(warm) < 2 or warm[0][col] == 0:
        return 0.0
    half = max(1, len(warm) // 4)
    first = sum(r[col] for r in warm[:half]) / half
    last = sum(r[col] for r in warm[-half:]) / half
    return (last - first) / first
bad_lines, frames, seen, dup = 0, 0, set(), 0
downs = ups = 0
for line in open(f"{out}/soak.jsonl", encoding="utf-8", errors="replace"):
    try:
        j = json.loads(line)
    except ValueError:
        bad_lines += 1
        continue
    if "top" in j:
        frames += 1
        key = (j["stream"], j["frame"])
        dup += key in seen
        seen.add(key)
    elif j.get("event") == "stream_down" and j.get("stream") == "rtsp":
        downs += 1
    elif j.get("event") == "stream_up" and j.get("stream") == "rtsp":
        ups += 1
report = {
    "minutes": minutes, "engine": engine, "server_restarts": restarts, "stream_down": downs, "stream_up": ups,
    "frames": frames, "bad_lines": bad_lines, "duplicate_frames": dup, "client_exit": rc,
    "rss_kib_first": warm[0][1] if warm else 0, "rss_kib_last": warm[-1][1] if warm else 0,
    "rss_drift": drift(1), "gpu_mib_first": warm[0][2] if warm else 0, "gpu_mib_last": warm[-1][2] if warm else 0,
    "gpu_drift": drift(2),
}
checks = {
    "memory flat (RSS within 2 % after warm-up)": abs(report["rss_drift"]) <= 0.02,
    "GPU memory flat (within 2 %)": abs(report["gpu_drift"]) <= 0.02,
    "every server restart recovered": restarts > 0 and downs >= restarts and ups >= downs,
    "every results line whole": bad_lines == 0,
    "no frame twice": dup == 0,
    "client finished cleanly (exit 0)": rc == 0,
}
report["checks"] = checks
json.dump(report, open(f"{out}/soak.json", "w"), indent=2)
with open(f"{out}/soak.txt", "w") as f:
    f.write(f"soak: {minutes:g} min, {engine} engine, 8 streams, {frames} results, {restarts} RTSP server restarts "
            f"({downs} down / {ups} up)\n")
    f.write(f"RSS {report['rss_kib_first']/1024:.1f} -> {report['rss_kib_last']/1024:.1f} MiB after warm-up "
            f"({report['rss_drift']*100:+.2f} %), GPU {report['gpu_mib_first']:.0f} -> {report['gpu_mib_last']:.0f} MiB "
            f"({report['gpu_drift']*100:+.2f} %)\n")
    for name, ok in checks.items():
        f.write(f"  [{'ok' if ok else 'FAIL'}] {name}\n")
print(open(f"{out}/soak.txt").read(), end="")
sys.exit(0 if all(checks.values()) else 1)
PY
