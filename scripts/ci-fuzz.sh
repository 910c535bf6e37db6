#!/usr/bin/env bash
# CI (no GPU): builds the libFuzzer targets of fuzz/ into build-fuzz/ (clang, ASan + UBSan) and runs each for
# SECONDS_PER_TARGET seconds (default 30) on a copy of its seed corpus in fuzz/corpus/, so CI never grows the
# committed corpus. Exits non-zero on any finding (a crash, an escaping exception, a sanitizer report, a leak,
# a timeout or running out of memory) and prints the path of the input that reproduces it.
#   usage: scripts/ci-fuzz.sh [SECONDS_PER_TARGET]
#   replay a finding: build-fuzz/fuzz_NAME PATH
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
dir=build-fuzz
cxx=${VC_FUZZ_CXX:-clang++-14}
targets=(config set_value safetensors results http)
declare -A dict=([config]=config [set_value]=config [safetensors]=safetensors [results]=results [http]=http)
# Longer inputs where the limits under test are long: the HTTP server's header (16 KiB) and body (64 KiB) bounds; and
# at least 60 s for what a network client reaches first, the HTTP request parser and router.
declare -A max_len=([http]=70000)
declare -A min_seconds=([http]=60)

start=$(date +%s)
mkdir -p "$dir"
if ! cmake -S fuzz -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" >"$dir/configure.log" 2>&1; then
  cat "$dir/configure.log"; exit 1
fi
if ! cmake --build "$dir" -j "$(nproc)" >"$dir/build.log" 2>&1; then
  grep -E -A4 'error|Error' "$dir/build.log" | head -80; echo "ci-fuzz: build FAILED (full log: $dir/build.log)" >&2; exit 1
fi
echo "ci-fuzz: built in $(( $(date +%s) - start )) s; running ${#targets[@]} targets for ${seconds} s each"

failed=0
for t in "${targets[@]}"; do
  run="$dir/run/$t"
  rm -rf "$run" && mkdir -p "$run/corpus" "$run/findings"
  cp fuzz/corpus/"$t"/* "$run/corpus/"
  # -timeout: an input that takes over 10 s is a finding (a hang); -rss_limit_mb: so is one that needs 2 GiB.
  len=(); [ -n "${max_len[$t]:-}" ] && len=(-max_len="${max_len[$t]}")
  time_for=$seconds; [ "${min_seconds[$t]:-0}" -gt "$seconds" ] && time_for=${min_seconds[$t]}
  if "$dir/fuzz_$t" -max_total_time="$time_for" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${len[@]}" \
       -dict="fuzz/${dict[$t]}.dict" -artifact_prefix="$run/findings/" "$run/corpus" >"$run/log" 2>&1; then
    runs=$(awk '/^stat::number_of_executed_units/ {print $2}' "$run/log")
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$run/log" | tail -1 || true)
    echo "ci-fuzz: $t: clean (${runs:-?} inputs run, ${cov:-cov: ?}, corpus $(ls "$run/corpus" | wc -l) files)"
  else
    failed=1
    echo "ci-fuzz: $t: FINDING (log: $run/log)" >&2
    # The report and the top of its stack (nlohmann's and the standard library's frames are long: cut to 200).
    grep -E -m1 -A24 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|FUZZ FINDING|terminate called' \
      "$run/log" | cut -c1-200 >&2 || tail -40 "$run/log" >&2
    for f in "$run/findings"/*; do
      [ -e "$f" ] || continue
      echo "ci-fuzz: reproduce with: $dir/fuzz_$t $f  (add it to fuzz/corpus/$t/ once fixed)" >&2
      # The input itself (its first 400 bytes, escaped): a CI log is often all there is of a finding.
      echo "ci-fuzz: the input: $(python3 -c 'import sys; print(repr(open(sys.argv[1], "rb").read(400)))' "$f")" >&2
    done
  fi
done
echo "ci-fuzz: done in $(( $(date +%s) - start )) s"
exit "$failed"
