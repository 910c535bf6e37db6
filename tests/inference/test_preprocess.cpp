// The CPU reference preprocessing: geometry of each resize mode, colour conversion, normalization.
#include <doctest/doctest.h>

#include "config/errors.hpp"
#include "inference/model/half.hpp"
#include "inference/preprocess.hpp"
#include "test_helpers.hpp"

using namespace vc;
using namespace vc::inference;

TEST_SUITE_BEGIN("preprocess");

namespace {

PreprocessParams identity_params(int size, ResizeMode mode) {
  PreprocessParams p;
  p.size = size;
  p.mode = mode;
  for (int c = 0; c < 3; ++c) {
    p.mean[c] = 0.f;
    p.std[c] = 1.f;
  }
  return p;
}

std::vector<uint8_t> random_bytes(size_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(d(vc::test::rng()));
  return v;
}

float at(const std::vector<uint16_t>& out, const PreprocessParams& p, int x, int y, int c) {
  return half_to_float(out[(size_t(y) * p.size + x) * p.channels + c]);
}

}  // namespace

TEST_CASE("same size, stretch: every packed format gives the pixels themselves") {
  const int w = 13, h = 9;
  const auto rgb = random_bytes(size_t(w) * h * 3);
  std::vector<uint8_t> bgr(rgb.size()), rgba(size_t(w) * h * 4), bgrx(rgba.size());
  for (int i = 0; i < w * h; ++i) {
    for (int c = 0; c < 3; ++c) {
      bgr[3 * i + c] = rgb[3 * i + 2 - c];
      rgba[4 * i + c] = rgb[3 * i + c];
      bgrx[4 * i + c] = rgb[3 * i + 2 - c];
    }
    rgba[4 * i + 3] = bgrx[4 * i + 3] = 77;
  }
  PreprocessParams p = identity_params(13, ResizeMode::Stretch);
  p.channels = 4;  // one padding channel
  for (auto [format, data] : {std::pair{PixelFormat::RGB, &rgb}, {PixelFormat::BGR, &bgr}, {PixelFormat::RGBA, &rgba},
                              {PixelFormat::BGRx, &bgrx}}) {
    CAPTURE(pixel_format_name(format));
    // A 13x9 frame stretched to 13x13 keeps columns exactly; check column sampling on row 0 of a 13x13 frame.
    std::vector<uint8_t> square;
    const int bpp = data->size() / (w * h);
    for (int y = 0; y < 13; ++y) square.insert(square.end(), data->begin() + (y % h) * w * bpp, data->begin() + (y % h + 1) * w * bpp);
    std::vector<uint16_t> out(13 * 13 * 4);
    preprocess_cpu(packed_frame_view(format, 13, 13, square.data()), p, out.data());
    bool exact = true;
    for (int y = 0; y < 13; ++y)
      for (int x = 0; x < 13; ++x) {
        for (int c = 0; c < 3; ++c) exact &= at(out, p, x, y, c) == round_to_half(rgb[(size_t(y % h) * w + x) * 3 + c] / 255.f);
        exact &= at(out, p, x, y, 3) == 0.f;
      }
    CHECK(exact);
  }
}

TEST_CASE("halving with stretch averages pixel pairs; mean/std normalize") {
  const int w = 8, h = 8;
  const auto rgb = random_bytes(size_t(w) * h * 3);
  PreprocessParams p = identity_params(4, ResizeMode::Stretch);
  p.mean[1] = 0.5f;
  p.std[1] = 0.25f;
  std::vector<uint16_t> out(4 * 4 * 3);
  preprocess_cpu(packed_frame_view(PixelFormat::RGB, w, h, rgb.data()), p, out.data());
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      for (int c = 0; c < 3; ++c) {
        auto px = [&](int xx, int yy) { return float(rgb[(size_t(yy) * w + xx) * 3 + c]); };
        const float avg = (px(2 * x, 2 * y) + px(2 * x + 1, 2 * y) + px(2 * x, 2 * y + 1) + px(2 * x + 1, 2 * y + 1)) / 4;
        const float want = (avg / 255.f - p.mean[c]) / p.std[c];
        CHECK(at(out, p, x, y, c) == doctest::Approx(want).epsilon(2e-3));
      }
}

TEST_CASE("letterbox puts black bars on the long sides; crop keeps the centre") {
  const int w = 200, h = 100;
  std::vector<uint8_t> white(size_t(w) * h * 3, 255);
  // Left quarter red, so crop (the centre square) must not see it.
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w / 4; ++x) white[(size_t(y) * w + x) * 3 + 1] = white[(size_t(y) * w + x) * 3 + 2] = 0;
  const auto frame = packed_frame_view(PixelFormat::RGB, w, h, white.data());

  PreprocessParams p = identity_params(64, ResizeMode::Letterbox);
  std::vector<uint16_t> out(64 * 64 * 3);
  preprocess_cpu(frame, p, out.data());
  CHECK(at(out, p, 32, 0, 0) == 0.f);   // top bar
  CHECK(at(out, p, 32, 15, 1) == 0.f);  // last bar row (content is 32 rows, 16..47)
  CHECK(at(out, p, 40, 16, 1) == 1.f);  // first content row, white part
  CHECK(at(out, p, 40, 47, 1) == 1.f);
  CHECK(at(out, p, 40, 48, 1) == 0.f);  // bottom bar
  CHECK(at(out, p, 2, 32, 0) == 1.f);   // red part: R = 1, G = 0
  CHECK(at(out, p, 2, 32, 1) == 0.f);

  p.mode = ResizeMode::Crop;
  p.crop_ratio = 1.f;  // the shorter side fills the output: a centre 100x100 square, x in [50, 150)
  preprocess_cpu(frame, p, out.data());
  bool all_white = true;
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) all_white &= at(out, p, x, y, 1) == 1.f;
  CHECK(all_white);
  p.mode = ResizeMode::Stretch;
  preprocess_cpu(frame, p, out.data());
  CHECK(at(out, p, 0, 10, 1) == 0.f);  // stretch keeps the red quarter
}

TEST_CASE("YUV formats convert with BT.601 / BT.709 limited range") {
  const int w = 6, h = 4;
  std::vector<uint8_t> nv12(packed_frame_bytes(PixelFormat::NV12, w, h), 128);
  std::vector<uint8_t> i420(packed_frame_bytes(PixelFormat::I420, w, h), 128);
  std::fill(nv12.begin(), nv12.begin() + w * h, 126);  // Y = 126, U = V = 128: grey 1.164 * 110 = 128.08
  std::fill(i420.begin(), i420.begin() + w * h, 235);  // Y = 235: white
  PreprocessParams p = identity_params(3, ResizeMode::Stretch);
  std::vector<uint16_t> out(27);
  preprocess_cpu(packed_frame_view(PixelFormat::NV12, w, h, nv12.data()), p, out.data());
  for (int c = 0; c < 3; ++c) CHECK(at(out, p, 1, 1, c) == doctest::Approx(128.08f / 255.f).epsilon(1e-3));
  preprocess_cpu(packed_frame_view(PixelFormat::I420, w, h, i420.data()), p, out.data());
  for (int c = 0; c < 3; ++c) CHECK(at(out, p, 2, 2, c) == doctest::Approx(1.f).epsilon(1e-3));
  // Pure red in BT.709: Y=63, U=102, V=240.
  std::fill(nv12.begin(), nv12.begin() + w * h, 63);
  for (size_t i = w * h; i < nv12.size(); i += 2) {
    nv12[i] = 102;
    nv12[i + 1] = 240;
  }
  auto view = packed_frame_view(PixelFormat::NV12, w, h, nv12.data());
  view.matrix = YuvMatrix::BT709;
  preprocess_cpu(view, p, out.data());
  CHECK(at(out, p, 1, 1, 0) > 0.98f);
  CHECK(at(out, p, 1, 1, 1) < 0.02f);
  CHECK(at(out, p, 1, 1, 2) < 0.02f);
}

TEST_CASE("unusable frames are errors, 1x1 frames work") {
  uint8_t px[3] = {10, 20, 30};
  PreprocessParams p = identity_params(5, ResizeMode::Crop);
  std::vector<uint16_t> out(75);
  preprocess_cpu(packed_frame_view(PixelFormat::RGB, 1, 1, px), p, out.data());
  CHECK(at(out, p, 4, 4, 2) == round_to_half(30 / 255.f));
  auto bad = packed_frame_view(PixelFormat::RGB, 4, 4, px);
  bad.strides[0] = 5;
  CHECK_THROWS_AS(preprocess_cpu(bad, p, out.data()), DataError);
  bad = packed_frame_view(PixelFormat::NV12, 4, 4, px);
  bad.planes[1] = nullptr;
  CHECK_THROWS_AS(preprocess_cpu(bad, p, out.data()), DataError);
  CHECK_THROWS_AS(preprocess_cpu(packed_frame_view(PixelFormat::RGB, 0, 4, px), p, out.data()), DataError);
}

namespace {

// The 10-bit form of an 8-bit YUV frame (each sample's 10-bit code is 4 times its 8-bit value).
std::vector<uint8_t> to_10bit(const std::vector<uint8_t>& eight, PixelFormat format) {
  std::vector<uint8_t> out(eight.size() * 2);
  for (size_t i = 0; i < eight.size(); ++i) {
    const unsigned v10 = unsigned(eight[i]) * 4;
    const unsigned stored = format == PixelFormat::P010 ? v10 << 6 : v10;  // P010 keeps its 10 bits at the top
    out[2 * i] = uint8_t(stored & 0xff);
    out[2 * i + 1] = uint8_t(stored >> 8);
  }
  return out;
}

// A frame turned a quarter clockwise (stored sideways), pixel by pixel; packed formats only.
std::vector<uint8_t> turned_clockwise(const std::vector<uint8_t>& frame, int w, int h, int bpp) {
  std::vector<uint8_t> out(frame.size());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < bpp; ++c) out[(size_t(x) * h + (h - 1 - y)) * bpp + c] = frame[(size_t(y) * w + x) * bpp + c];
  return out;
}

}  // namespace

TEST_CASE("10-bit frames (P010, I420_10) give what their 8-bit values give, and keep the bits 8-bit video loses") {
  const int w = 36, h = 22;
  for (const auto& [ten, eight] : {std::pair{PixelFormat::P010, PixelFormat::NV12}, {PixelFormat::I420_10, PixelFormat::I420}}) {
    CAPTURE(pixel_format_name(ten));
    for (const auto mode : {ResizeMode::Stretch, ResizeMode::Crop, ResizeMode::Letterbox}) {
      const auto bytes8 = random_bytes(packed_frame_bytes(eight, w, h));
      const auto bytes10 = to_10bit(bytes8, ten);
      REQUIRE(bytes10.size() == packed_frame_bytes(ten, w, h));
      PreprocessParams p;
      p.size = 17;
      p.mode = mode;
      std::vector<uint16_t> a(size_t(p.size) * p.size * 3), b(a.size());
      preprocess_cpu(packed_frame_view(eight, w, h, bytes8.data()), p, a.data());
      preprocess_cpu(packed_frame_view(ten, w, h, bytes10.data()), p, b.data());
      CHECK(a == b);
    }
  }
  // A grey between two 8-bit codes: 10-bit Y 514 is 128.5 in 8-bit units, read as such (no rounding to 8 bits).
  std::vector<uint8_t> grey(packed_frame_bytes(PixelFormat::I420_10, 4, 4));
  for (size_t i = 0; i < grey.size(); i += 2) {
    const unsigned v = i < 4 * 4 * 2 ? 514 : 512;  // Y, then neutral chroma
    grey[i] = uint8_t(v & 0xff);
    grey[i + 1] = uint8_t(v >> 8);
  }
  const PreprocessParams p = identity_params(4, ResizeMode::Stretch);
  std::vector<uint16_t> out(4 * 4 * 3);
  preprocess_cpu(packed_frame_view(PixelFormat::I420_10, 4, 4, grey.data()), p, out.data());
  const float expected = 1.164383f * (128.5f - 16.f) / 255.f;
  CHECK(at(out, p, 1, 2, 0) == round_to_half(expected));
  CHECK(at(out, p, 1, 2, 0) != round_to_half(1.164383f * (128.f - 16.f) / 255.f));
}

TEST_CASE("a frame stored turned is read upright: the same input as the upright frame, for every rotation") {
  const int w = 23, h = 14;  // odd: the rotation must not shift a pixel
  const auto upright = random_bytes(size_t(w) * h * 3);
  PreprocessParams p;
  p.size = 20;
  p.mode = ResizeMode::Letterbox;
  std::vector<uint16_t> expected(size_t(p.size) * p.size * 3), got(expected.size());
  preprocess_cpu(packed_frame_view(PixelFormat::RGB, w, h, upright.data()), p, expected.data());
  // Stored a quarter, a half and three quarters clockwise: shown with the rotation that undoes it.
  auto stored = upright;
  int sw = w, sh = h;
  for (int quarters = 1; quarters <= 3; ++quarters) {
    stored = turned_clockwise(stored, sw, sh, 3);
    std::swap(sw, sh);
    auto view = packed_frame_view(PixelFormat::RGB, sw, sh, stored.data());
    view.rotation = (360 - 90 * quarters) % 360;
    CAPTURE(view.rotation);
    CHECK(view.shown_width() == w);
    preprocess_cpu(view, p, got.data());
    CHECK(got == expected);
  }
  auto bad = packed_frame_view(PixelFormat::RGB, w, h, upright.data());
  bad.rotation = 45;
  CHECK_THROWS_AS(preprocess_cpu(bad, p, got.data()), DataError);
}

TEST_CASE("a crop is classified as the picture cut by hand: packed and YUV formats, every rotation, every resize mode") {
  const int w = 37, h = 26;
  const CropBox box{6, 4, 18, 14};  // even origin and size: a 4:2:0 frame cuts without touching a chroma block's edge
  for (auto mode : {ResizeMode::Stretch, ResizeMode::Crop, ResizeMode::Letterbox}) {
    CAPTURE(int(mode));
    PreprocessParams p;
    p.size = 16;
    p.mode = mode;
    std::vector<uint16_t> expected(size_t(p.size) * p.size * 3), got(expected.size());
    // RGB: the box cut out of the upright picture, against the box of every stored rotation of it.
    const auto upright = random_bytes(size_t(w) * h * 3);
    std::vector<uint8_t> cut;
    for (int y = box.y; y < box.y + box.height; ++y) {
      cut.insert(cut.end(), upright.begin() + (long(y) * w + box.x) * 3, upright.begin() + (long(y) * w + box.x + box.width) * 3);
    }
    preprocess_cpu(packed_frame_view(PixelFormat::RGB, box.width, box.height, cut.data()), p, expected.data());
    auto stored = upright;
    int sw = w, sh = h;
    for (int quarters = 0; quarters <= 3; ++quarters) {
      if (quarters) {
        stored = turned_clockwise(stored, sw, sh, 3);
        std::swap(sw, sh);
      }
      auto view = packed_frame_view(PixelFormat::RGB, sw, sh, stored.data());
      view.rotation = (360 - 90 * quarters) % 360;
      view.crop = box;
      CAPTURE(view.rotation);
      preprocess_cpu(view, p, got.data());
      CHECK(got == expected);
    }
    // NV12: the planes' rows and columns of the box, against the crop.
    const auto nv12 = random_bytes(packed_frame_bytes(PixelFormat::NV12, w, h));
    const auto frame = packed_frame_view(PixelFormat::NV12, w, h, nv12.data());
    std::vector<uint8_t> nv12_cut;
    for (int y = box.y; y < box.y + box.height; ++y) {
      const uint8_t* row = frame.planes[0] + long(y) * frame.strides[0] + box.x;
      nv12_cut.insert(nv12_cut.end(), row, row + box.width);
    }
    for (int y = box.y / 2; y < (box.y + box.height) / 2; ++y) {
      const uint8_t* row = frame.planes[1] + long(y) * frame.strides[1] + box.x;
      nv12_cut.insert(nv12_cut.end(), row, row + box.width);
    }
    preprocess_cpu(packed_frame_view(PixelFormat::NV12, box.width, box.height, nv12_cut.data()), p, expected.data());
    auto cropped = frame;
    cropped.crop = box;
    preprocess_cpu(cropped, p, got.data());
    CHECK(got == expected);
  }
}

TEST_CASE("a crop outside the picture as shown is an error naming both") {
  const auto rgb = random_bytes(size_t(20) * 10 * 3);
  auto view = packed_frame_view(PixelFormat::RGB, 20, 10, rgb.data());
  std::vector<uint16_t> out(size_t(8) * 8 * 3);
  PreprocessParams p;
  p.size = 8;
  view.crop = {12, 0, 10, 5};
  CHECK_THROWS_WITH_AS(preprocess_cpu(view, p, out.data()), doctest::Contains("not inside the 20x10 picture"), DataError);
  view.rotation = 90;  // shown 10x20: a box 5 wide and 15 high at (2, 4) fits
  view.crop = {2, 4, 5, 15};
  CHECK_NOTHROW(preprocess_cpu(view, p, out.data()));
  view.crop = {-1, 0, 5, 5};
  CHECK_THROWS_AS(preprocess_cpu(view, p, out.data()), DataError);
}

TEST_SUITE_END();
