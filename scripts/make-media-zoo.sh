#!/usr/bin/env bash
# The media zoo: a few dozen frames of the sample video (Fashion-MNIST items, 10 frames each) re-encoded with the
# encoders Debian ships, in every container the app reads, plus the awkward cases real media brings (B-frames,
# interlacing, 10 bits, a phone's rotation tag, odd sizes). Writes DIR/*.{mp4,mkv,…} and DIR/manifest.tsv:
#   name <TAB> file <TAB> what it is
# Used by tests/pipeline/test_media_zoo.cpp (CPU: every frame's top-1 equal to a libav reference decode) and by
# scripts/device-run.sh's zoo stage (NVDEC: every frame's top-1 equal to CPU decoding). Needs gst-launch-1.0 with
# x264, x265, libvpx, aom, libav (install-deps.sh).
#   usage: scripts/make-media-zoo.sh DIR [FRAMES]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: make-media-zoo.sh DIR [FRAMES]}
frames=${2:-40}
mkdir -p "$dir"
sample=assets/video/fashion-mnist-sample.mp4
manifest="$dir/manifest.tsv"
: >"$manifest"

# encode NAME FILE WIDTH HEIGHT "what it is" RAW-CAPS ENCODER... : the first FRAMES frames of the sample, scaled.
encode() {
  local name=$1 file=$2 w=$3 h=$4 what=$5 caps=$6
  shift 6
  # shellcheck disable=SC2068
  if ! gst-launch-1.0 -q filesrc location="$sample" ! qtdemux ! h264parse ! avdec_h264 ! identity eos-after="$frames" \
       ! videoconvert ! videoscale ! "video/x-raw,width=$w,height=$h" ! videoconvert ! "$caps" ! $@ \
       ! filesink location="$dir/$file" >"$dir/$name.log" 2>&1; then
    echo "make-media-zoo: $name: encoding failed (log: $dir/$name.log)" >&2
    exit 1
  fi
  rm -f "$dir/$name.log"
  printf '%s\t%s\t%s\n' "$name" "$file" "$what" >>"$manifest"
}

i420=video/x-raw,format=I420
encode h264-baseline-mp4 h264-baseline.mp4 320 240 "H.264 Constrained Baseline, MP4" "$i420" \
  x264enc bitrate=2000 ! video/x-h264,profile=constrained-baseline ! h264parse ! mp4mux
encode h264-main-bframes-mkv h264-main-bframes.mkv 320 240 "H.264 Main with B-frames, MKV" "$i420" \
  x264enc bitrate=2000 bframes=3 ! video/x-h264,profile=main ! h264parse ! matroskamux
encode h264-high-mov h264-high.mov 320 240 "H.264 High, MOV" "$i420" \
  x264enc bitrate=2000 bframes=2 ! video/x-h264,profile=high ! h264parse ! qtmux
encode h264-high-avi h264-high.avi 320 240 "H.264 High, AVI" "$i420" \
  x264enc bitrate=2000 ! video/x-h264,profile=high ! h264parse ! avimux
encode h264-interlaced-ts h264-interlaced.ts 320 240 "H.264 High interlaced (MBAFF), MPEG-TS" "$i420" \
  x264enc bitrate=2000 interlaced=true ! video/x-h264,profile=high ! h264parse ! mpegtsmux
encode h264-odd-size-mp4 h264-odd-size.mp4 330 186 "H.264 High at 330x186 (not a multiple of 16), MP4" "$i420" \
  x264enc bitrate=2000 ! video/x-h264,profile=high ! h264parse ! mp4mux
encode h264-high444-mkv h264-high444.mkv 320 240 "H.264 High 4:4:4, MKV" video/x-raw,format=Y444 \
  x264enc bitrate=3000 ! h264parse ! matroskamux
encode h265-main-mkv h265-main.mkv 320 240 "H.265 Main, MKV" "$i420" \
  x265enc bitrate=2000 ! h265parse ! matroskamux
encode h265-main10-mp4 h265-main10.mp4 320 240 "H.265 Main 10 (10-bit), MP4" video/x-raw,format=I420_10LE \
  x265enc bitrate=2000 ! h265parse ! mp4mux
encode h265-main10-mkv h265-main10.mkv 320 240 "H.265 Main 10 (10-bit), MKV" video/x-raw,format=I420_10LE \
  x265enc bitrate=2000 ! h265parse ! matroskamux
encode vp8-webm vp8.webm 320 240 "VP8, WebM" "$i420" vp8enc target-bitrate=2000000 deadline=1 ! webmmux
encode vp9-webm vp9.webm 320 240 "VP9 profile 0, WebM" "$i420" vp9enc target-bitrate=2000000 deadline=1 ! webmmux
encode vp9-10bit-mkv vp9-10bit.mkv 320 240 "VP9 profile 2 (10-bit), MKV" video/x-raw,format=I420_10LE \
  vp9enc target-bitrate=2000000 deadline=1 ! matroskamux
encode vp9-odd-size-webm vp9-odd-size.webm 327 245 "VP9 at 327x245 (odd), WebM" "$i420" \
  vp9enc target-bitrate=2000000 deadline=1 ! webmmux
encode av1-mkv av1.mkv 320 240 "AV1 Main, MKV" "$i420" av1enc cpu-used=8 target-bitrate=2000 ! av1parse ! matroskamux
encode mjpeg-avi mjpeg.avi 321 241 "MJPEG at 321x241 (odd), AVI" "$i420" jpegenc quality=90 ! avimux
encode mpeg2-ts mpeg2.ts 320 240 "MPEG-2, MPEG-TS" "$i420" mpeg2enc ! mpegvideoparse ! mpegtsmux
encode mpeg4-avi mpeg4.avi 320 240 "MPEG-4 Part 2, AVI" "$i420" avenc_mpeg4 bitrate=4000000 ! mpeg4videoparse ! avimux

# A phone's portrait video: stored sideways, with the MP4 track matrix that says "turn 90 degrees clockwise".
encode h264-rotated-mp4 h264-rotated.mp4 320 240 "H.264 stored sideways, rotation tag 90, MP4" "$i420" \
  videoflip video-direction=90l ! x264enc bitrate=2000 ! video/x-h264,profile=high ! h264parse ! mp4mux
python3 - "$dir/h264-rotated.mp4" <<'PY'
import struct, sys
# The tkhd box's matrix (9 x 32-bit at offset 48 of a version-0 box): a = 0, b = 1, c = -1, d = 0 is a quarter
# turn clockwise, which qtdemux reports as image-orientation rotate-90.
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
at = data.find(b"tkhd")
if at < 4 or data[at + 4] != 0:
    sys.exit("make-media-zoo: no version-0 tkhd box")
matrix = at - 4 + 48
data[matrix:matrix + 36] = struct.pack(">9i", 0, 0x10000, 0, -0x10000, 0, 0, 0, 0, 0x40000000)
open(path, "wb").write(data)
PY
echo "make-media-zoo: $(wc -l <"$manifest") files in $dir"
