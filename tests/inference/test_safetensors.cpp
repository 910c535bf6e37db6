// The safetensors reader: good files load; every kind of corrupt file is a clear DataError, never a crash.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "config/errors.hpp"
#include "inference/model/half.hpp"
#include "inference/model/safetensors.hpp"
#include "test_helpers.hpp"

using namespace vc;
using namespace vc::inference;

TEST_SUITE_BEGIN("safetensors");

namespace {

std::vector<uint8_t> with_header(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0);
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string rejection(std::vector<uint8_t> bytes) {
  try {
    SafetensorsFile::from_bytes(std::move(bytes), "bad.safetensors");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("FP16 conversion round-trips every half and rounds to nearest even") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    REQUIRE(float_to_half(f) == h);
  }
  CHECK(half_to_float(0x3c00) == 1.0f);
  CHECK(float_to_half(1.0f + 1.0f / 2048) == 0x3c00);            // halfway: to even
  CHECK(float_to_half(1.0f + 3.0f / 2048) == 0x3c02);            // halfway: to even (up)
  CHECK(float_to_half(70000.f) == 0x7c00);                        // overflow -> inf
  CHECK(half_to_float(0x0001) == doctest::Approx(5.96e-8));       // smallest subnormal
  CHECK(bf16_to_float(0x3f80) == 1.0f);
}

TEST_CASE("a written file reads back with every dtype converted") {
  const std::vector<TensorToWrite> tensors = {{"a", DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}},
                                              {"b.half", DType::F16, {4}, {0.5f, -2.f, 1024.f, 0.1f}}};
  const auto path = (std::filesystem::temp_directory_path() / "vc-test.safetensors").string();
  write_safetensors(path, tensors, {{"format", "pt"}});
  const auto file = SafetensorsFile::open(path);
  REQUIRE(file.tensors().size() == 2);
  CHECK(file.metadata().at("format") == "pt");
  const auto* a = file.find("a");
  REQUIRE(a != nullptr);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(file.to_float(*a) == std::vector<float>{1, 2, 3, 4, 5, 6});
  const auto b = file.to_float(*file.find("b.half"));
  CHECK(b[1] == -2.f);
  CHECK(b[3] == doctest::Approx(0.1f).epsilon(1e-3));
  CHECK(file.find("missing") == nullptr);
  std::filesystem::remove(path);
}

TEST_CASE("PyTorch-written fixtures load, int64 counters included") {
  const auto file = SafetensorsFile::open(vc::test::fixture("basic_narrow.safetensors"));
  const auto* counter = file.find("bn1.num_batches_tracked");
  REQUIRE(counter != nullptr);
  CHECK(counter->dtype == DType::I64);
  CHECK_THROWS_AS((void)file.to_float(*counter), DataError);
  CHECK(file.find("conv1.weight")->shape == std::vector<int64_t>{8, 3, 7, 7});
}

TEST_CASE("missing and non-regular files are missing input") {
  CHECK_THROWS_AS(SafetensorsFile::open("/nonexistent/model.safetensors"), NoInputError);
  CHECK_THROWS_AS(SafetensorsFile::open("/tmp"), NoInputError);
}

TEST_CASE("each kind of corruption is rejected with what is wrong") {
  const std::string ok = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(rejection(with_header(ok, 8)).empty());
  CHECK(rejection({}).find("0 bytes is too short") != std::string::npos);
  CHECK(rejection({1, 2, 3}).find("too short") != std::string::npos);
  auto huge = with_header(ok, 8);
  huge[6] = 0x7f;
  CHECK(rejection(huge).find("over the 100 MiB limit") != std::string::npos);
  auto truncated = with_header(ok, 8);
  truncated.resize(20);
  CHECK(rejection(truncated).find("runs past the end") != std::string::npos);
  CHECK(rejection(with_header(ok, 4)).find("past the 4-byte data section") != std::string::npos);
  CHECK(rejection(with_header(ok, 12)).find("trailing bytes") != std::string::npos);
  CHECK(rejection(with_header("[1,2]", 0)).find("does not start with '{'") != std::string::npos);
  CHECK(rejection(with_header("{\"t\": ", 0)).find("not valid JSON") != std::string::npos);
  CHECK(rejection(with_header(R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8)).find("unknown dtype 'Q7'") !=
        std::string::npos);
  CHECK(rejection(with_header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("expected 12") !=
        std::string::npos);
  CHECK(rejection(with_header(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)).find("negative") !=
        std::string::npos);
  CHECK(rejection(with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)).find("reversed") !=
        std::string::npos);
  CHECK(rejection(with_header(R"({"t":{"dtype":"F32","shape":[2]}})", 8)).find("data_offsets") != std::string::npos);
  CHECK(rejection(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12))
            .find("overlap or gap") != std::string::npos);
  CHECK(rejection(with_header(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8))
            .find("absurdly large") != std::string::npos);
  CHECK(rejection(with_header(R"({"__metadata__":{"a":1}})", 0)).find("__metadata__.a is not a string") != std::string::npos);
  // The message names the file.
  CHECK(rejection({}).rfind("bad.safetensors: not a safetensors file", 0) == 0);
}

TEST_CASE("an empty tensor converts to an empty vector") {  // found by fuzz/fuzz_safetensors: memcpy from null
  const auto file = SafetensorsFile::from_bytes(with_header(R"({"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})", 0),
                                                "empty.safetensors");
  REQUIRE(file.tensors().size() == 1);
  CHECK(file.to_float(file.tensors()[0]).empty());
}

TEST_CASE("randomly mutated files never crash: a valid file or a DataError") {
  const auto original = serialize_safetensors({{"conv.weight", DType::F32, {4, 3, 3, 3}, std::vector<float>(108, 0.5f)},
                                               {"conv.bias", DType::F16, {4}, {1, 2, 3, 4}}});
  const size_t header_end = 8 + size_t(original[0]) + size_t(original[1]) * 256;
  std::uniform_int_distribution<size_t> pos_in_header(0, header_end - 1);
  std::uniform_int_distribution<int> byte(0, 255), kind(0, 3);
  int rejected = 0, accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    auto bytes = original;
    const int edits = 1 + trial % 4;
    for (int e = 0; e < edits; ++e) {
      const size_t p = pos_in_header(vc::test::rng());
      switch (kind(vc::test::rng())) {
        case 0: bytes[p] = uint8_t(byte(vc::test::rng())); break;                     // random byte
        case 1: bytes[p] = "0123456789{}[]\",:"[byte(vc::test::rng()) % 17]; break;   // JSON-ish byte
        case 2: bytes.resize(p); break;                                                 // truncation
        case 3: bytes.insert(bytes.begin() + long(std::min(p, bytes.size())), uint8_t(byte(vc::test::rng()))); break;
      }
    }
    try {
      const auto file = SafetensorsFile::from_bytes(bytes, "mutated");
      for (const auto& t : file.tensors()) {
        if (t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16) (void)file.to_float(t);
      }
      ++accepted;
    } catch (const DataError&) {
      ++rejected;
    }
  }
  MESSAGE("mutations: " << rejected << " rejected, " << accepted << " still valid");
  CHECK(rejected > 15000);
}

TEST_SUITE_END();
