#include "pipeline/outputs/frame_image.hpp"

#include <cstring>

#include <opencv2/imgproc.hpp>

#include "config/errors.hpp"

namespace vc::pipeline {

cv::Mat to_bgr(const inference::FrameView& f) {
  using inference::PixelFormat;
  if (f.memory != inference::MemoryKind::Host) throw InternalError("to_bgr: the frame is in GPU memory");
  auto packed = [&](int type) {
    return cv::Mat(f.height, f.width, type, const_cast<uint8_t*>(f.planes[0]), size_t(f.strides[0]));
  };
  cv::Mat out;
  switch (f.format) {
    case PixelFormat::BGR: return packed(CV_8UC3).clone();
    case PixelFormat::RGB: cv::cvtColor(packed(CV_8UC3), out, cv::COLOR_RGB2BGR); return out;
    case PixelFormat::BGRx: cv::cvtColor(packed(CV_8UC4), out, cv::COLOR_BGRA2BGR); return out;
    case PixelFormat::RGBA: cv::cvtColor(packed(CV_8UC4), out, cv::COLOR_RGBA2BGR); return out;
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
