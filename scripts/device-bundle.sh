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
# libav is the conforming CPU decoder for H.264 High and HEVC (openh264 decodes only Constrained Baseline correctly,
# so without libav High-profile files are refused); the rest decode the media zoo (scripts/make-media-zoo.sh).
export GST_PLUGINS=${GST_PLUGINS:-"coreelements app videoconvertscale videotestsrc videorate playback typefindfunctions
  isomp4 matroska videoparsersbad x264 openh264 nvcodec rtsp rtp rtpmanager udp libav deinterlace videofilter vpx aom
  mpeg2dec jpeg avi mpegtsdemux soup"}
bins=(build-device/app/video-classifier build-device/tests/gpu_tests build-device/tools/bench build-device/tools/infer_tensors
      build-device/tools/bench_pipeline)
# A broker and a subscriber, so that the soak also runs the service side there (MQTT, /metrics).
for b in /usr/sbin/mosquitto /usr/bin/mosquitto_sub; do [ -x "$b" ] && bins+=("$b"); done
$bundle .device "${bins[@]}"
for b in "${bins[@]}"; do strip --strip-unneeded ".device/bin/$(basename "$b")"; done
# The media zoo, made here (the device has none of the encoders): the zoo stage decodes it there.
scripts/make-media-zoo.sh .device/zoo 40 >/dev/null
# The whole tree travels to the device (64 MiB): ship the bundle xz-compressed; device-run.sh unpacks it in /tmp.
tar -C . -cJf .device.tar.xz .device
echo "device bundle: $(du -sh .device | cut -f1), compressed $(du -sh .device.tar.xz | cut -f1) (.device.tar.xz)"
