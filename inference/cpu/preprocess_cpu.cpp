#include "inference/preprocess.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/model/half.hpp"

namespace vc::inference {
namespace {

struct Rgb {
  float r, g, b;
};

float clamp255(float v) { return std::min(255.f, std::max(0.f, v)); }

Rgb yuv_to_rgb(float y, float u, float v, YuvMatrix m, bool full_range) {
  const float d = u - 128.f, e = v - 128.f;
  if (full_range) {
    if (m == YuvMatrix::BT709) return {clamp255(y + 1.5748f * e), clamp255(y - 0.187324f * d - 0.468124f * e), clamp255(y + 1.8556f * d)};
    return {clamp255(y + 1.402f * e), clamp255(y - 0.344136f * d - 0.714136f * e), clamp255(y + 1.772f * d)};
  }
  const float c = 1.164383f * (y - 16.f);
  if (m == YuvMatrix::BT709) {
    return {clamp255(c + 1.792741f * e), clamp255(c - 0.213249f * d - 0.532909f * e), clamp255(c + 2.112402f * d)};
  }
  return {clamp255(c + 1.596027f * e), clamp255(c - 0.391762f * d - 0.812968f * e), clamp255(c + 2.017232f * d)};
}

// A 16-bit little-endian sample of a plane, as 8-bit units (10-bit value / 4).
float sample10(const uint8_t* plane, int stride, int x, int y, bool high_bits) {
  const uint8_t* p = plane + long(y) * stride + 2 * long(x);
  const unsigned v = unsigned(p[0]) | (unsigned(p[1]) << 8);
  return float(high_bits ? v >> 6 : v & 0x3ffu) * 0.25f;
}

// The stored pixel shown at (x, y) of the upright frame (x, y inside the shown frame).
void stored_xy(const FrameView& f, int& x, int& y) {
  const int sx = x, sy = y;
  switch (f.rotation) {
    case 90: x = sy, y = f.height - 1 - sx; break;
    case 180: x = f.width - 1 - sx, y = f.height - 1 - sy; break;
    case 270: x = f.width - 1 - sy, y = sx; break;
    default: break;
  }
}

// The RGB value of one pixel of the upright frame (x, y inside the shown frame).
Rgb pixel(const FrameView& f, int x, int y) {
  stored_xy(f, x, y);
  const uint8_t* row = f.planes[0] + long(y) * f.strides[0];
  switch (f.format) {
    case PixelFormat::RGB: return {float(row[3 * x]), float(row[3 * x + 1]), float(row[3 * x + 2])};
    case PixelFormat::BGR: return {float(row[3 * x + 2]), float(row[3 * x + 1]), float(row[3 * x])};
    case PixelFormat::RGBA: return {float(row[4 * x]), float(row[4 * x + 1]), float(row[4 * x + 2])};
    case PixelFormat::BGRx: return {float(row[4 * x + 2]), float(row[4 * x + 1]), float(row[4 * x])};
    case PixelFormat::NV12: {
      const uint8_t* uv = f.planes[1] + long(y / 2) * f.strides[1] + 2 * (x / 2);
      return yuv_to_rgb(row[x], uv[0], uv[1], f.matrix, f.full_range);
    }
    case PixelFormat::I420: {
      const uint8_t u = f.planes[1][long(y / 2) * f.strides[1] + x / 2];
      const uint8_t v = f.planes[2][long(y / 2) * f.strides[2] + x / 2];
      return yuv_to_rgb(row[x], u, v, f.matrix, f.full_range);
    }
    case PixelFormat::P010:
      return yuv_to_rgb(sample10(f.planes[0], f.strides[0], x, y, true),
                        sample10(f.planes[1], f.strides[1], 2 * (x / 2), y / 2, true),
                        sample10(f.planes[1], f.strides[1], 2 * (x / 2) + 1, y / 2, true), f.matrix, f.full_range);
    case PixelFormat::I420_10:
      return yuv_to_rgb(sample10(f.planes[0], f.strides[0], x, y, false),
                        sample10(f.planes[1], f.strides[1], x / 2, y / 2, false),
                        sample10(f.planes[2], f.strides[2], x / 2, y / 2, false), f.matrix, f.full_range);
  }
  return {0, 0, 0};
}

}  // namespace

PixelFormat parse_pixel_format(const std::string& n) {
  if (n == "RGB") return PixelFormat::RGB;
  if (n == "BGR") return PixelFormat::BGR;
  if (n == "RGBA" || n == "RGBx") return PixelFormat::RGBA;
  if (n == "BGRx" || n == "BGRA") return PixelFormat::BGRx;
  if (n == "NV12") return PixelFormat::NV12;
  if (n == "I420") return PixelFormat::I420;
  if (n == "P010_10LE" || n == "P010") return PixelFormat::P010;
  if (n == "I420_10LE" || n == "I420_10") return PixelFormat::I420_10;
  throw DataError(fmt::format("unsupported pixel format '{}' (RGB, BGR, RGBA, BGRx, NV12, I420, P010_10LE, I420_10LE)", n));
}

const char* pixel_format_name(PixelFormat f) {
  constexpr const char* names[] = {"RGB", "BGR", "RGBA", "BGRx", "NV12", "I420", "P010_10LE", "I420_10LE"};
  return names[int(f)];
}

ResizeMode parse_resize_mode(const std::string& n) {
  if (n == "stretch") return ResizeMode::Stretch;
  if (n == "crop") return ResizeMode::Crop;
  if (n == "letterbox") return ResizeMode::Letterbox;
  throw DataError(fmt::format("unknown resize mode '{}'", n));
}

ResizeGeometry resize_geometry(int fw, int fh, const PreprocessParams& p) {
  const float s = float(p.size), w = float(fw), h = float(fh);
  ResizeGeometry g{w / s, h / s, 0.f, 0.f, 0.f, s, 0.f, s};
  if (p.mode == ResizeMode::Crop) {
    const float scale = std::min(w, h) / (s / p.crop_ratio);  // frame pixels per resized pixel
    g.scale_x = g.scale_y = scale;
    g.offset_x = -(w / scale - s) / 2.f;
    g.offset_y = -(h / scale - s) / 2.f;
  } else if (p.mode == ResizeMode::Letterbox) {
    const float scale = std::max(w / s, h / s);
    g.scale_x = g.scale_y = scale;
    g.offset_x = (s - w / scale) / 2.f;
    g.offset_y = (s - h / scale) / 2.f;
    g.content_x0 = g.offset_x;
    g.content_x1 = g.offset_x + w / scale;
    g.content_y0 = g.offset_y;
    g.content_y1 = g.offset_y + h / scale;
  }
  return g;
}

int plane_count(PixelFormat f) {
  switch (f) {
    case PixelFormat::NV12:
    case PixelFormat::P010: return 2;
    case PixelFormat::I420:
    case PixelFormat::I420_10: return 3;
    default: return 1;
  }
}

int plane_rows(PixelFormat f, int height, int plane) {
  return plane == 0 || plane_count(f) == 1 ? height : (height + 1) / 2;
}

size_t plane_row_bytes(PixelFormat f, int width, int plane) {
  const size_t chroma = size_t(width + 1) / 2;  // 4:2:0 chroma samples per row
  switch (f) {
    case PixelFormat::RGB:
    case PixelFormat::BGR: return size_t(width) * 3;
    case PixelFormat::RGBA:
    case PixelFormat::BGRx: return size_t(width) * 4;
    case PixelFormat::NV12: return plane == 0 ? size_t(width) : 2 * chroma;
    case PixelFormat::I420: return plane == 0 ? size_t(width) : chroma;
    case PixelFormat::P010: return plane == 0 ? 2 * size_t(width) : 4 * chroma;
    case PixelFormat::I420_10: return plane == 0 ? 2 * size_t(width) : 2 * chroma;
  }
  return 0;
}

size_t plane_span_bytes(const FrameView& f, int plane) {
  const int rows = plane_rows(f.format, f.height, plane);
  return size_t(rows - 1) * size_t(f.strides[plane]) + plane_row_bytes(f.format, f.width, plane);
}

size_t packed_frame_bytes(PixelFormat f, int w, int h) {
  size_t total = 0;
  for (int i = 0; i < plane_count(f); ++i) total += size_t(plane_rows(f, h, i)) * plane_row_bytes(f, w, i);
  return total;
}

FrameView packed_frame_view(PixelFormat f, int w, int h, const uint8_t* data) {
  FrameView v;
  v.format = f;
  v.width = w;
  v.height = h;
  const uint8_t* plane = data;
  for (int i = 0; i < plane_count(f); ++i) {
    v.planes[i] = plane;
    v.strides[i] = int(plane_row_bytes(f, w, i));
    plane += size_t(plane_rows(f, h, i)) * plane_row_bytes(f, w, i);
  }
  return v;
}

void validate_frame(const FrameView& f) {
  if (f.width <= 0 || f.height <= 0) throw DataError(fmt::format("frame has size {}x{}", f.width, f.height));
  if (f.rotation != 0 && f.rotation != 90 && f.rotation != 180 && f.rotation != 270) {
    throw DataError(fmt::format("frame rotation {} is not 0, 90, 180 or 270 degrees", f.rotation));
  }
  for (int i = 0; i < plane_count(f.format); ++i) {
    if (!f.planes[i]) throw DataError(fmt::format("{} frame: plane {} is missing", pixel_format_name(f.format), i));
    const size_t min_stride = plane_row_bytes(f.format, f.width, i);
    if (f.strides[i] < 0 || size_t(f.strides[i]) < min_stride) {
      throw DataError(fmt::format("{} frame {}x{}: plane {} stride {} < {}", pixel_format_name(f.format), f.width,
                                  f.height, i, f.strides[i], min_stride));
    }
  }
  const CropBox& c = f.crop;
  if (!c.whole() && (c.x < 0 || c.y < 0 || c.x + c.width > f.shown_width() || c.y + c.height > f.shown_height())) {
    throw DataError(fmt::format("crop {}x{} at ({}, {}) is not inside the {}x{} picture", c.width, c.height, c.x, c.y,
                                f.shown_width(), f.shown_height()));
  }
}

void preprocess_cpu(const FrameView& f, const PreprocessParams& p, uint16_t* out) {
  validate_frame(f);
  if (p.size <= 0 || p.channels < 3) throw DataError("preprocess: size must be > 0 and channels >= 3");
  const CropBox box = f.input_box();
  const int w = box.width, h = box.height;
  const ResizeGeometry g = resize_geometry(w, h, p);
  for (int y = 0; y < p.size; ++y) {
    for (int x = 0; x < p.size; ++x) {
      const float cx = x + 0.5f, cy = y + 0.5f;
      Rgb c{0, 0, 0};
      if (cx >= g.content_x0 && cx < g.content_x1 && cy >= g.content_y0 && cy < g.content_y1) {
        const float sx = (cx - g.offset_x) * g.scale_x - 0.5f, sy = (cy - g.offset_y) * g.scale_y - 0.5f;
        const float fx0 = std::floor(sx), fy0 = std::floor(sy);
        const float ax = sx - fx0, ay = sy - fy0;
        const int x0 = std::clamp(int(fx0), 0, w - 1), x1 = std::clamp(int(fx0) + 1, 0, w - 1);
        const int y0 = std::clamp(int(fy0), 0, h - 1), y1 = std::clamp(int(fy0) + 1, 0, h - 1);
        const int bx0 = box.x + x0, bx1 = box.x + x1, by0 = box.y + y0, by1 = box.y + y1;
        const Rgb p00 = pixel(f, bx0, by0), p01 = pixel(f, bx1, by0), p10 = pixel(f, bx0, by1), p11 = pixel(f, bx1, by1);
        auto lerp2 = [&](float a, float b, float cc, float d) {
          return (1 - ay) * ((1 - ax) * a + ax * b) + ay * ((1 - ax) * cc + ax * d);
        };
        c = {lerp2(p00.r, p01.r, p10.r, p11.r), lerp2(p00.g, p01.g, p10.g, p11.g), lerp2(p00.b, p01.b, p10.b, p11.b)};
      }
      uint16_t* o = out + (long(y) * p.size + x) * p.channels;
      const float rgb[3] = {c.r, c.g, c.b};
      for (int ch = 0; ch < 3; ++ch) o[ch] = float_to_half((rgb[ch] / 255.f - p.mean[ch]) / p.std[ch]);
      for (int ch = 3; ch < p.channels; ++ch) o[ch] = 0;
    }
  }
}

}  // namespace vc::inference
