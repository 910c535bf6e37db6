#!/usr/bin/env bash
# soak.sh [MINUTES] [OUTDIR] — a long run of 8 streams in one process, one of them from an RTSP server that is
# killed and restarted every 2 minutes; the others test patterns and a looped file paced in real time. Samples the
# client's RSS (and GPU memory where nvidia-smi exists) every 10 s, then checks: memory flat after warm-up (±2 %),
# every server restart recovered (stream_down followed by stream_up), every results line whole, no frame twice.
# Where a mosquitto broker binary is found (PATH, or VC_MOSQUITTO_DIR holding mosquitto and mosquitto_sub), the run is
# also a service: results and events go to a broker of its own over MQTT (QoS 1), /metrics is scraped every minute,
# and it checks that every event in the results file arrived over MQTT, nothing was dropped, and the counters moved.
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

# The service side, where a broker can be run.
[ -n "${VC_MOSQUITTO_DIR:-}" ] && export PATH="$VC_MOSQUITTO_DIR:$PATH"
service=()
broker_pid="" sub_pid=""
metrics_port=$((port + 1)) broker_port=$((port + 2))
if command -v mosquitto >/dev/null && command -v mosquitto_sub >/dev/null; then
  printf 'listener %s 127.0.0.1\nallow_anonymous true\n' "$broker_port" >"$out/mosquitto.conf"
  mosquitto -c "$out/mosquitto.conf" >"$out/mosquitto.log" 2>&1 &
  broker_pid=$!
  sleep 1
  mosquitto_sub -h 127.0.0.1 -p "$broker_port" -q 1 -v -t 'soak/+/event' >"$out/mqtt-events.txt" 2>"$out/mqtt-sub.log" &
  sub_pid=$!
  service=(--set mqtt.enabled=true --set mqtt.host=127.0.0.1 --set mqtt.port="$broker_port" --set mqtt.qos=1
           --set mqtt.topic_prefix=soak --set mqtt.result_interval_s=1
           --set metrics.enabled=true --set metrics.port="$metrics_port")
  echo "soak: service mode: MQTT broker on port $broker_port, metrics on port $metrics_port"
else
  echo "soak: no mosquitto here: MQTT and metrics not exercised"
fi
scrape() {  # scrape N: /metrics, /healthz and /readyz into $out/metrics-N.txt and $out/health.txt
  python3 - "http://127.0.0.1:$metrics_port" "$out/metrics-$1.txt" >>"$out/health.txt" 2>&1 <<'PY'
import sys, urllib.request, urllib.error
base, path = sys.argv[1], sys.argv[2]
open(path, "w").write(urllib.request.urlopen(base + "/metrics", timeout=5).read().decode())
for ep in ("/healthz", "/readyz"):
    try:
        code = urllib.request.urlopen(base + ep, timeout=5).status
    except urllib.error.HTTPError as e:
        code = e.code
    print(ep, code)
PY
}

inputs=(--input test --input test:ball --input test:snow --input test:smpte75 --input test:gradient --input test:pinwheel
        --input "$media" --input "rtsp://127.0.0.1:$port/soak")
"$app" "${model[@]}" --set inference.device="$engine" "${inputs[@]}" "${size[@]}" --set input.fps=10 \
  --set inputs.6.width=0 --set inputs.6.height=0 --set inputs.6.fps=0 --set inputs.6.realtime=true --set inputs.6.loop=true \
  --set inputs.7.width=0 --set inputs.7.height=0 --set inputs.7.fps=0 --set inputs.7.name=rtsp \
  --set inputs.7.stall_timeout_s=5 --set inputs.7.reconnect.delay_s=1 --set inputs.7.reconnect.max_delay_s=4 \
  --set inputs.7.reconnect.attempts=0 --set inference.batch_size=8 --set logging.perf_interval_s=60 \
  "${service[@]}" --output none --set output.results="$out/soak.jsonl" >"$out/client.log" 2>&1 &
client=$!

echo "time_s rss_kib gpu_mib" >"$out/memory.txt"
start=$(date +%s)
restarts=0 scrapes=0
next_restart=$((start + 120)) next_scrape=$((start + 60))
while [ $(( $(date +%s) - start )) -lt $((minutes * 60)) ]; do
  sleep 10
  kill -0 $client 2>/dev/null || { echo "soak: the client died"; break; }
  now=$(date +%s)
  rss=$(awk '/VmRSS/ {print $2}' /proc/$client/status)
  gpu=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null | awk -F', ' -v p=$client '$1 == p {print $2}')
  echo "$((now - start)) $rss ${gpu:-0}" >>"$out/memory.txt"
  if [ ${#service[@]} -gt 0 ] && [ "$now" -ge "$next_scrape" ]; then
    scrapes=$((scrapes + 1)); scrape "$scrapes" || echo "scrape $scrapes failed" >>"$out/health.txt"
    next_scrape=$((now + 60))
  fi
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
if [ -n "$broker_pid" ]; then
  sleep 2  # the subscriber takes the last messages
  kill "$sub_pid" 2>/dev/null; wait "$sub_pid" 2>/dev/null
  kill "$broker_pid" 2>/dev/null; wait "$broker_pid" 2>/dev/null
fi

python3 - "$out" "$restarts" "$client_rc" "$minutes" "$engine" "$scrapes" "${#service[@]}" <<'PY'
import json, os, re, sys
out, restarts, rc, minutes, engine = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
scrapes, service = int(sys.argv[6]), int(sys.argv[7]) > 0
rows = [list(map(float, l.split())) for l in open(f"{out}/memory.txt").read().splitlines()[1:] if l.strip()]
warm = [r for r in rows if r[0] >= 120] or rows
def quarters(col):  # the means of the first and the last quarter of the samples after warm-up
    q = max(1, len(warm) // 4)
    return sum(r[col] for r in warm[:q]) / q, sum(r[col] for r in warm[-q:]) / q
def drift(first_last):
    first, last = first_last
    return 0.0 if len(warm) < 2 or first == 0 else (last - first) / first
rss_q, gpu_q = quarters(1), quarters(2)
bad_lines, frames, seen, dup = 0, 0, set(), 0
downs = ups = events = 0
for line in open(f"{out}/soak.jsonl", encoding="utf-8", errors="replace"):
    try:
        j = json.loads(line)
    except ValueError:
        bad_lines += 1
        continue
    if "event" in j:
        events += 1
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
    # Drift: the mean of the last quarter of the samples after warm-up against that of the first quarter.
    "rss_kib_first_quarter": rss_q[0], "rss_kib_last_quarter": rss_q[1],
    "rss_kib_min": min((r[1] for r in warm), default=0), "rss_kib_max": max((r[1] for r in warm), default=0),
    "rss_drift": drift(rss_q), "gpu_mib_first_quarter": gpu_q[0], "gpu_mib_last_quarter": gpu_q[1], "gpu_drift": drift(gpu_q),
}
checks = {
    "memory flat (RSS within 2 % after warm-up)": abs(report["rss_drift"]) <= 0.02,
    "GPU memory flat (within 2 %)": abs(report["gpu_drift"]) <= 0.02,
    "every server restart recovered": restarts > 0 and downs >= restarts and ups >= downs,
    "every results line whole": bad_lines == 0,
    "no frame twice": dup == 0,
    "client finished cleanly (exit 0)": rc == 0,
}
if service:
    # Every event line of the results file arrived over MQTT (QoS 1: at least once, so at least as many).
    mqtt_events = sum(1 for l in open(f"{out}/mqtt-events.txt", errors="replace") if l.strip())
    def metric(n, name):
        path = f"{out}/metrics-{n}.txt"
        if not os.path.exists(path):
            return None
        vals = [float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? ([0-9.eE+-]+)$", open(path).read(), re.M)]
        return sum(vals) if vals else None
    first, last = metric(1, "vc_stream_frames_total"), metric(scrapes, "vc_stream_frames_total")
    dropped = metric(scrapes, "vc_sink_dropped_total")
    health = open(f"{out}/health.txt").read() if os.path.exists(f"{out}/health.txt") else ""
    report.update({"mqtt_events": mqtt_events, "result_events": events, "scrapes": scrapes,
                   "metrics_frames_first": first, "metrics_frames_last": last, "metrics_sink_dropped": dropped})
    checks["every event delivered over MQTT"] = events > 0 and mqtt_events >= events
    checks["/metrics scraped and counting"] = scrapes >= 2 and first is not None and last is not None and last > first
    checks["no sink drops (/metrics)"] = dropped == 0
    checks["/readyz ready at every scrape"] = health.count("/readyz 200") == scrapes
report["checks"] = checks
json.dump(report, open(f"{out}/soak.json", "w"), indent=2)
with open(f"{out}/soak.txt", "w") as f:
    f.write(f"soak: {minutes:g} min, {engine} engine, 8 streams, {frames} results, {restarts} RTSP server restarts "
            f"({downs} down / {ups} up)\n")
    f.write(f"after warm-up, mean of the first quarter -> the last: RSS {report['rss_kib_first_quarter']/1024:.1f} -> "
            f"{report['rss_kib_last_quarter']/1024:.1f} MiB ({report['rss_drift']*100:+.2f} %; samples "
            f"{report['rss_kib_min']/1024:.1f}-{report['rss_kib_max']/1024:.1f}), GPU "
            f"{report['gpu_mib_first_quarter']:.0f} -> {report['gpu_mib_last_quarter']:.0f} MiB ({report['gpu_drift']*100:+.2f} %)\n")
    if service:
        f.write(f"service: {report['mqtt_events']} events over MQTT for {events} in the results file; /metrics frames "
                f"{first} -> {last} over {scrapes} scrapes; sink drops {dropped}\n")
    for name, ok in checks.items():
        f.write(f"  [{'ok' if ok else 'FAIL'}] {name}\n")
print(open(f"{out}/soak.txt").read(), end="")
sys.exit(0 if all(checks.values()) else 1)
PY
