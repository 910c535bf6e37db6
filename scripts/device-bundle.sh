#!/usr/bin/env bash
# Builds for the GPU machine (Hopper, sm_90) and bundles the binaries with their libraries into .device/
# (see ../shared/device/README.md). Then, with the device tool:  carry [".device"], command "scripts/device-run.sh".
set -euo pipefail
cd "$(dirname "$0")/.."
# A build of its own: sm_90 only, OpenCV linked statically (see cmake/FindOpenCVDrawing.cmake).
VC_BUILD_DIR=build-device VC_CMAKE_ARGS="-DVC_OPENCV_STATIC=ON" CUDA_ARCHS=${CUDA_ARCHS:-90} scripts/build.sh
bundle=${VC_BUNDLE_SCRIPT:-../shared/device/bundle.sh}
[ -x "$bundle" ] || bundle="bash $bundle"
# Only the plugins the device runs need (no GL/X11/Wayland stack from nvcodec, no V4L2, no display): the whole
# tree, bundle included, must stay under the device tool's 64 MiB.
# nvcodec (NVDEC/NVENC, and the CUDA memory the pipeline reads directly) pulls in the GL stack; libav is left out
# (200 MB of codecs): on the device the CPU decoder is openh264.
# libav stays out (with what Debian links it to, over 200 MB): there, files NVDEC cannot decode and no small CPU
# decoder here can — MPEG-4 Part 2, H.264 High 4:4:4 — are refused, and openh264 takes only Constrained Baseline.
# The others decode the media zoo (scripts/make-media-zoo.sh) beside NVDEC.
export GST_PLUGINS=${GST_PLUGINS:-"coreelements app videoconvertscale videotestsrc videorate playback typefindfunctions
  isomp4 matroska videoparsersbad x264 openh264 nvcodec rtsp rtp rtpmanager udp deinterlace videofilter vpx aom
  mpeg2dec jpeg avi mpegtsdemux"}
bins=(build-device/app/video-classifier build-device/tests/gpu_tests build-device/tools/bench build-device/tools/infer_tensors
      build-device/tools/bench_pipeline build-device/tools/nvdec_create)
# A broker and a subscriber, so that the soak also runs the service side there (MQTT, /metrics).
for b in /usr/sbin/mosquitto /usr/bin/mosquitto_sub; do [ -x "$b" ] && bins+=("$b"); done
$bundle .device "${bins[@]}"
for b in "${bins[@]}"; do strip --strip-unneeded ".device/bin/$(basename "$b")"; done
# The density stage's HEVC camera: 10 s of 1080p30 H.265 (x265 here; the device has no encoder), looped there.
mkdir -p .device/media
gst-launch-1.0 -q videotestsrc num-buffers=300 pattern=ball ! video/x-raw,width=1920,height=1080,framerate=30/1,format=I420 \
  ! x265enc bitrate=4000 speed-preset=superfast key-int-max=60 ! video/x-h265,profile=main ! h265parse ! mp4mux \
  ! filesink location=.device/media/hevc-1080p30.mp4 || { echo "device-bundle: could not make the HEVC media (x265enc)" >&2; exit 1; }
# The media zoo, made here (the device has none of the encoders), with each file's CPU results (libav decoding, the
# CPU engine): the zoo stage classifies it there with NVDEC and cuDNN and compares every frame's top-1.
scripts/make-media-zoo.sh .device/zoo 40 >/dev/null
while IFS=$'\t' read -r name file what; do
  build-device/app/video-classifier --config assets/configs/default.yaml --set inference.device=cpu --log-level error \
    --input ".device/zoo/$file" --output none --set output.results=".device/zoo/$name.cpu.jsonl" ||
    { echo "device-bundle: the CPU run of $file failed" >&2; exit 1; }
done <.device/zoo/manifest.tsv
# The fine-tuning set's items (device-run.sh's finetune stage renders them there): 5,000 training and 1,000 validation
# items of Fashion-MNIST's training split, 2.6 MB, where Debian's dataset-fashion-mnist is installed.
if [ -d /usr/share/datasets/fashion-mnist ]; then
  "$(scripts/tools-env.sh)" tools/fashion/render_fashion_set.py --subset .device/finetune/items.npz --per-class 500 --val-per-class 100
else
  echo "device bundle: no fine-tuning items (apt-get install dataset-fashion-mnist for the finetune stage)" >&2
fi
# The whole tree travels to the device (64 MiB): ship the bundle xz-compressed; device-run.sh unpacks it in /tmp.
tar -C . -cJf .device.tar.xz .device
echo "device bundle: $(du -sh .device | cut -f1), compressed $(du -sh .device.tar.xz | cut -f1) (.device.tar.xz)"
