#include "pipeline/outputs/frame_image.hpp"

#include <cstring>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "config/errors.hpp"

namespace vc::pipeline {

namespace {

// A 10-bit frame's 8-bit counterpart (NV12 or I420), for drawing only: each sample's top 8 of its 10 bits.
cv::Mat to_bgr_8bit(const inference::FrameView& f, std::vector<uint8_t>& buffer) {
  using inference::PixelFormat;
  const bool semi_planar = f.format == PixelFormat::P010;
  inference::FrameView v = f;
  v.format = semi_planar ? PixelFormat::NV12 : PixelFormat::I420;
  v.rotation = 0;
  buffer.resize(inference::packed_frame_bytes(v.format, f.width, f.height));
  uint8_t* dst = buffer.data();
  for (int plane = 0; plane < inference::plane_count(v.format); ++plane) {
    const int rows = inference::plane_rows(v.format, f.height, plane);
    const size_t samples = inference::plane_row_bytes(v.format, f.width, plane);
    v.planes[plane] = dst;
    v.strides[plane] = int(samples);
    for (int y = 0; y < rows; ++y) {
      const auto* src = reinterpret_cast<const uint16_t*>(f.planes[plane] + size_t(y) * f.strides[plane]);
      for (size_t x = 0; x < samples; ++x) *dst++ = uint8_t(semi_planar ? src[x] >> 8 : (src[x] & 0x3ffu) >> 2);
    }
  }
  return to_bgr(v);
}

}  // namespace

cv::Mat to_bgr(const inference::FrameView& f) {
  using inference::PixelFormat;
  if (f.memory != inference::MemoryKind::Host) throw InternalError("to_bgr: the frame is in GPU memory");
  if (f.rotation != 0) {  // drawn upright, as classified
    inference::FrameView stored = f;
    stored.rotation = 0;
    cv::Mat out;
    cv::rotate(to_bgr(stored), out, f.rotation == 90 ? cv::ROTATE_90_CLOCKWISE
                                    : f.rotation == 180 ? cv::ROTATE_180 : cv::ROTATE_90_COUNTERCLOCKWISE);
    return out;
  }
  auto packed = [&](int type) {
    return cv::Mat(f.height, f.width, type, const_cast<uint8_t*>(f.planes[0]), size_t(f.strides[0]));
  };
  cv::Mat out;
  switch (f.format) {
    case PixelFormat::BGR: return packed(CV_8UC3).clone();
    case PixelFormat::RGB: cv::cvtColor(packed(CV_8UC3), out, cv::COLOR_RGB2BGR); return out;
    case PixelFormat::BGRx: cv::cvtColor(packed(CV_8UC4), out, cv::COLOR_BGRA2BGR); return out;
    case PixelFormat::RGBA: cv::cvtColor(packed(CV_8UC4), out, cv::COLOR_RGBA2BGR); return out;
    case PixelFormat::P010:
    case PixelFormat::I420_10: {
      std::vector<uint8_t> buffer;
      return to_bgr_8bit(f, buffer);
    }
    case PixelFormat::NV12:
    case PixelFormat::I420: {
      // OpenCV wants the planes back to back, tightly packed, at an even size.
      const int w = std::max(2, f.width & ~1), h = std::max(2, f.height & ~1);
      cv::Mat yuv(h * 3 / 2, w, CV_8UC1);
      uint8_t* dst = yuv.data;
      for (int y = 0; y < h; ++y, dst += w) std::memcpy(dst, f.planes[0] + size_t(y) * f.strides[0], size_t(std::min(w, f.width)));
      if (f.format == PixelFormat::NV12) {
        for (int y = 0; y < h / 2; ++y, dst += w) std::memcpy(dst, f.planes[1] + size_t(y) * f.strides[1], size_t(w));
        cv::cvtColor(yuv, out, cv::COLOR_YUV2BGR_NV12);
      } else {
        for (int plane = 1; plane <= 2; ++plane) {
          for (int y = 0; y < h / 2; ++y, dst += w / 2) {
            std::memcpy(dst, f.planes[plane] + size_t(y) * f.strides[plane], size_t(w / 2));
          }
        }
        cv::cvtColor(yuv, out, cv::COLOR_YUV2BGR_I420);
      }
      return out;
    }
  }
  throw InternalError("to_bgr: unknown pixel format");
}

cv::Mat fit_into(const cv::Mat& image, cv::Size size) {
  if (image.size() == size) return image;
  cv::Mat out(size, CV_8UC3, cv::Scalar(0, 0, 0));
  const double scale = std::min(double(size.width) / image.cols, double(size.height) / image.rows);
  const int w = std::clamp(int(image.cols * scale + 0.5), 1, size.width);
  const int h = std::clamp(int(image.rows * scale + 0.5), 1, size.height);
  cv::resize(image, out(cv::Rect((size.width - w) / 2, (size.height - h) / 2, w, h)), cv::Size(w, h), 0, 0, cv::INTER_AREA);
  return out;
}

}  // namespace vc::pipeline
