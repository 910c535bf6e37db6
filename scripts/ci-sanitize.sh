#!/usr/bin/env bash
# CI (no GPU): AddressSanitizer + UndefinedBehaviorSanitizer build of our C++ code in build-asan/, then the CPU unit
# tests under it. Any ASan, UBSan or LeakSanitizer report fails the job (non-zero exit).
# The .cu files keep nvcc's normal flags: the sanitizers go on the C++ compiler and the linker only.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
dir=build-asan
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# GCC's -Wmaybe-uninitialized is unreliable with the sanitizers' instrumentation (false alarms in libstdc++'s
# <regex>); the normal build keeps it, as an error.
warn="-Wno-maybe-uninitialized"
start=$(date +%s)
mkdir -p "$dir"
if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" \
     -DCMAKE_CXX_FLAGS="$san $warn" -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
     >"$dir/configure.log" 2>&1; then
  cat "$dir/configure.log"; exit 1
fi
echo "ci-sanitize: compiling in $dir/ (log: $dir/build.log)"
if ! cmake --build "$dir" -j "$(nproc)" --target unit_tests video-classifier >"$dir/build.log" 2>&1; then
  grep -E -A4 'error|Error' "$dir/build.log" | head -80; echo "ci-sanitize: build FAILED (full log: $dir/build.log)" >&2; exit 1
fi
built=$(date +%s)
echo "ci-sanitize: built in $((built - start)) s"
# The suites that need no GStreamer pipeline: GLib and GStreamer keep type registries and caches for the
# process's life, which LeakSanitizer would report as leaks that are not ours. The "cli" suite runs the
# sanitized video-classifier binary itself, so its error paths are checked too.
# The sanitized build references the CUDA driver library, and a machine without a GPU has none: the toolkit's stub
# (every call answers CUDA_ERROR_STUB_LIBRARY, i.e. "no GPU", as the tests expect) stands in for it, here only.
if ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  stub=$(ls /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/lib/stubs/libcuda.so 2>/dev/null | head -1)
  [ -n "$stub" ] || { echo "ci-sanitize: no libcuda.so.1 and no CUDA stub library" >&2; exit 1; }
  mkdir -p "$dir/stubs" && ln -sf "$stub" "$dir/stubs/libcuda.so.1"
  export LD_LIBRARY_PATH="$PWD/$dir/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
suites=(config cli safetensors resnet preprocess postprocess hub)
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:exitcode=86:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=0
for s in "${suites[@]}"; do
  log="$dir/test-$s.log"
  if "$dir/tests/unit_tests" --test-suite="$s" --force-colors=false >"$log" 2>&1 &&
     ! grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log"; then
    echo "ci-sanitize: $s: clean ($(grep -oE '[0-9]+ passed' "$log" | tail -1 || echo '?') assertions)"
  else
    failed=1
    echo "ci-sanitize: $s: FAILED (log: $log)" >&2
    grep -E -m1 -A30 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|FAILED|ERROR' "$log" | cut -c1-200 >&2 ||
      tail -40 "$log" >&2
  fi
done
# The service under the sanitizers, driven over HTTP: the server's bounds (raw sockets, 200 clients, oversized bodies
# and headers) and streams added and removed (every one let go of: joined, freed). GLib and GStreamer keep what they
# load, so leaks are not findings here; memory errors and undefined behaviour make the app exit 86, which fails them.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=86"
for t in http_limits churn; do
  args=(--app "$dir/app/video-classifier" --out "$dir/service-$t")
  # RSS is judged by the plain run of scripts/test.sh: ASan's quarantine holds freed memory (up to 256 MB) by design.
  [ "$t" = churn ] && args+=(--cycles 300 --warmup 100 --no-rss)
  if python3 "tests/service/${t}_test.py" "${args[@]}" >"$dir/test-$t.log" 2>&1 &&
     ! grep -qE 'ERROR: AddressSanitizer|runtime error:' "$dir/service-$t/app.log"; then
    echo "ci-sanitize: service $t: clean"
  else
    failed=1
    echo "ci-sanitize: service $t: FAILED (logs: $dir/test-$t.log, $dir/service-$t/app.log)" >&2
    grep -E -m1 -A30 'ERROR: AddressSanitizer|runtime error:' "$dir/service-$t/app.log" | cut -c1-200 >&2 ||
      tail -30 "$dir/test-$t.log" >&2
  fi
done
echo "ci-sanitize: done in $(( $(date +%s) - start )) s"
exit "$failed"
