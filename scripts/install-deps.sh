#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages video-classifier builds and runs with, if any is missing. Idempotent.
# (xvfb, mosquitto, curl and chromium are for the tests: a virtual display, a real MQTT broker, an HTTP client, a
#  headless browser for the web page (fonts-dejavu-core: its text); clang-14 and libclang-rt-14-dev build the
#  libFuzzer targets that CI runs, scripts/ci-fuzz.sh; dataset-fashion-mnist is what tools/train_default_model.py,
#  tools/fashion/make_sample_video.py and the device bundle's fine-tuning set are made from; python3-torch and
#  python3-torchvision are the CPU PyTorch of the tools' light environment, scripts/tools-env.sh.)
# The CUDA toolkit and cuDNN 9 are not installed here (see README.md, "CUDA and cuDNN").
set -euo pipefail
packages=(
  build-essential cmake pkg-config ccache git python3 python3-pip python3-venv curl
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev libgstrtspserver-1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-base-apps gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  gstreamer1.0-plugins-ugly gstreamer1.0-libav gstreamer1.0-x
  libopencv-core-dev libopencv-imgproc-dev
  libeigen3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev doctest-dev
  libmosquitto-dev libboost1.81-dev libffmpeg-nvenc-dev
  xvfb xauth mosquitto mosquitto-clients chromium fonts-dejavu-core
  clang-14 libclang-rt-14-dev
  dataset-fashion-mnist python3-torch python3-torchvision
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA toolkit and cuDNN come from NVIDIA; say plainly what is missing and how to get it.
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -z "$nvcc" ]; then
  echo "install-deps: the CUDA toolkit (nvcc) is missing: see README.md, 'CUDA and cuDNN'" >&2; exit 69
fi
cudnn_found=""
for h in "${CUDNN_ROOT:-/nonexistent}/include/cudnn_version.h" "$(dirname "$(dirname "$nvcc")")/include/cudnn_version.h" \
         /usr/include/cudnn_version.h /usr/include/x86_64-linux-gnu/cudnn_version_v9.h; do
  [ -f "$h" ] && cudnn_found=$h
done
if [ -z "$cudnn_found" ]; then
  echo "install-deps: cuDNN 9 headers are missing: see README.md, 'CUDA and cuDNN'" >&2; exit 69
fi
# cuDNN's C++ frontend (header-only, MIT) is not packaged for Debian 12: take its headers from NVIDIA's PyPI wheel.
frontend_version=1.32.0
frontend_dir="$(dirname "$0")/../third_party/cudnn_frontend"
if [ ! -f "$frontend_dir/include/cudnn_frontend.h" ] || [ "$(cat "$frontend_dir/VERSION" 2>/dev/null)" != "$frontend_version" ]; then
  echo "install-deps: fetching cudnn_frontend $frontend_version headers"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-cudnn-frontend==$frontend_version"
  rm -rf "$frontend_dir" && mkdir -p "$frontend_dir"
  python3 - "$tmp"/*.whl "$frontend_dir" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    wheel.extractall(sys.argv[2], [n for n in wheel.namelist() if n.startswith("include/")])
PY
  echo "$frontend_version" > "$frontend_dir/VERSION"
  rm -rf "$tmp"
fi
echo "install-deps: all dependencies present"
