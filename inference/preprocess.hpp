// Frame -> normalized NHWC FP16 model input. The geometry and colour rules are defined here once; the CPU
// reference below implements them plainly, and the CUDA kernel (preprocess_gpu.hpp) must match it.
//
// Rules: every output pixel's centre is mapped back into the frame as it is shown — upright: a frame stored sideways
// (a phone video's rotation tag) is read through its rotation — (half-pixel centres, as OpenCV and PyTorch's
// align_corners=False), sampled bilinearly with edges clamped — each of the four taps converted to RGB first (YUV:
// BT.601 or BT.709, limited (16-235) or full (0-255) range, chroma taken from the tap's 2x2 block) — then divided
// by 255, normalized with mean/std, rounded to FP16. 10-bit samples (P010, I420_10) are read as they are, in
// 8-bit units (value / 4: the 10-bit code of an 8-bit value is 4 times it, as BT.709/BT.2020 define), never rounded
// to 8 bits first. Letterbox bars are black (RGB 0,0,0, normalized). Channels past the third (padding for the
// first layer) are 0.
//
// A crop (a region of the picture) is read as if it were the whole picture: the box, in whole pixels of the frame
// as shown, is resized by the model's rule, and its taps are clamped to the box's own edges — exactly what
// converting the frame to RGB, cutting the box out and preprocessing the cut image gives.
#pragma once
#include <cstdint>
#include <string>

namespace vc::inference {

// P010: NV12's layout with 16-bit little-endian samples holding 10 bits at the top (NVDEC's and VA's 10-bit output);
// I420_10: I420's layout with 16-bit little-endian samples holding 10 bits at the bottom (libav's 10-bit output).
enum class PixelFormat { RGB, BGR, RGBA, BGRx, NV12, I420, P010, I420_10 };
enum class ResizeMode { Stretch, Crop, Letterbox };
enum class YuvMatrix { BT601, BT709 };
enum class MemoryKind { Host, Device };  // where a frame's planes live

// "RGB", "BGR", "RGBA", "BGRx", "NV12", "I420", "P010_10LE", "I420_10LE" (GStreamer's names)
PixelFormat parse_pixel_format(const std::string& name);
ResizeMode parse_resize_mode(const std::string& name);    // "stretch", "crop", "letterbox"
const char* pixel_format_name(PixelFormat f);

// A part of the picture as shown (after rotation), in whole pixels; empty (width 0): the whole picture.
struct CropBox {
  int x = 0, y = 0, width = 0, height = 0;
  [[nodiscard]] bool whole() const { return width <= 0 || height <= 0; }
};

// One frame in memory (host or device): up to three planes with their row strides in bytes.
struct FrameView {
  PixelFormat format = PixelFormat::RGB;
  int width = 0, height = 0;
  const uint8_t* planes[3] = {nullptr, nullptr, nullptr};  // packed: [0]; NV12/P010: Y, UV; I420(_10): Y, U, V
  int strides[3] = {0, 0, 0};
  YuvMatrix matrix = YuvMatrix::BT601;
  bool full_range = false;            // YUV: 0-255 (JPEG) instead of 16-235 (video)
  MemoryKind memory = MemoryKind::Host;
  int rotation = 0;                   // clockwise degrees (0, 90, 180, 270) that turn the stored frame upright
  CropBox crop;                       // the part classified (whole when empty)

  // The frame as shown, after its rotation.
  [[nodiscard]] int shown_width() const { return rotation == 90 || rotation == 270 ? height : width; }
  [[nodiscard]] int shown_height() const { return rotation == 90 || rotation == 270 ? width : height; }
  // What is classified: the crop, or the whole picture as shown.
  [[nodiscard]] CropBox input_box() const { return crop.whole() ? CropBox{0, 0, shown_width(), shown_height()} : crop; }
};

struct PreprocessParams {
  int size = 224;                    // output is size x size
  ResizeMode mode = ResizeMode::Crop;
  float crop_ratio = 0.875f;         // Crop: the shorter side is resized to size / crop_ratio
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
  int channels = 3;                  // output channels (>= 3; extra ones are zero padding)
};

// Output pixel x (centre x + 0.5) samples the frame at sx = (x + 0.5 - offset_x) * scale_x - 0.5, and
// likewise for y; outside [content_x0, content_x1) x [content_y0, content_y1) it is a letterbox bar.
struct ResizeGeometry {
  float scale_x, scale_y, offset_x, offset_y;
  float content_x0, content_x1, content_y0, content_y1;
};
ResizeGeometry resize_geometry(int frame_width, int frame_height, const PreprocessParams& p);

// Throws vc::DataError for an unusable frame (empty, null plane, stride too small, a rotation that is not a multiple
// of 90 degrees, a crop not inside the picture as shown) or parameters.
void validate_frame(const FrameView& frame);

// The CPU reference: writes size*size*channels FP16 values (NHWC, one image) to `out`.
void preprocess_cpu(const FrameView& frame, const PreprocessParams& p, uint16_t* out);

// The memory layout of a format's planes — the one rule every frame copy and check uses: how many planes, how many
// rows a plane has, the bytes of pixels in one of its rows (the smallest valid stride), and the bytes a plane
// spans in memory (every row's stride but the last row's, which may end at its last pixel).
int plane_count(PixelFormat f);
int plane_rows(PixelFormat f, int height, int plane);
size_t plane_row_bytes(PixelFormat f, int width, int plane);
size_t plane_span_bytes(const FrameView& frame, int plane);

// Bytes a tightly packed frame of this format occupies (plane sizes for width x height), and a view of such a
// buffer; used by tests and by the pipeline for frames it copies.
size_t packed_frame_bytes(PixelFormat f, int width, int height);
FrameView packed_frame_view(PixelFormat f, int width, int height, const uint8_t* data);

}  // namespace vc::inference
