#include "inference/model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "inference/model/half.hpp"

namespace vc::inference {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

struct DTypeEntry {
  const char* name;
  DType dtype;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {"F64", DType::F64, 8},    {"F32", DType::F32, 4},         {"F16", DType::F16, 2},
    {"BF16", DType::BF16, 2},  {"I64", DType::I64, 8},         {"I32", DType::I32, 4},
    {"I16", DType::I16, 2},    {"I8", DType::I8, 1},           {"U8", DType::U8, 1},
    {"BOOL", DType::BOOL, 1},  {"F8_E4M3", DType::F8_E4M3, 1}, {"F8_E5M2", DType::F8_E5M2, 1},
};

}  // namespace

const char* dtype_name(DType d) {
  for (const auto& e : kDTypes) if (e.dtype == d) return e.name;
  return "?";
}
size_t dtype_size(DType d) {
  for (const auto& e : kDTypes) if (e.dtype == d) return e.size;
  return 0;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Owns the bytes: a read-only memory map of a file, or a vector.
struct SafetensorsFile::Storage {
  const uint8_t* data = nullptr;
  size_t size = 0;
  void* map = nullptr;
  std::vector<uint8_t> owned;
  ~Storage() {
    if (map) munmap(map, size);
  }
};

SafetensorsFile::SafetensorsFile(std::shared_ptr<Storage> storage, std::string origin)
    : storage_(std::move(storage)), origin_(std::move(origin)) {}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw NoInputError(fmt::format("{}: cannot open weights file: {}", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw NoInputError(fmt::format("{}: not a regular file", path));
  }
  auto storage = std::make_shared<Storage>();
  storage->size = static_cast<size_t>(st.st_size);
  if (storage->size > 0) {
    void* map = mmap(nullptr, storage->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      throw NoInputError(fmt::format("{}: cannot map weights file: {}", path, std::strerror(errno)));
    }
    storage->map = map;
    storage->data = static_cast<const uint8_t*>(map);
  }
  ::close(fd);
  SafetensorsFile file(std::move(storage), path);
  file.parse();
  return file;
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, const std::string& origin) {
  auto storage = std::make_shared<Storage>();
  storage->owned = std::move(bytes);
  storage->data = storage->owned.data();
  storage->size = storage->owned.size();
  SafetensorsFile file(std::move(storage), origin);
  file.parse();
  return file;
}

void SafetensorsFile::parse() {
  auto fail = [&](const std::string& why) -> void {
    throw DataError(fmt::format("{}: not a valid safetensors file: {}", origin_, why));
  };
  // The first checks fail on files that are something else altogether (a text file, an image, a PyTorch .pt).
  auto not_safetensors = [&](const std::string& why) -> void {
    throw DataError(fmt::format("{}: not a safetensors file ({}); give a .safetensors file, e.g. one written by "
                                "tools/export_model.py", origin_, why));
  };
  const uint8_t* bytes = storage_->data;
  const size_t size = storage_->size;
  if (size < 8) not_safetensors(fmt::format("{} bytes is too short for the 8-byte header length", size));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeaderBytes) {
    not_safetensors(fmt::format("its first 8 bytes give a header length of {}, over the {} MiB limit", header_len,
                                kMaxHeaderBytes >> 20));
  }
  if (header_len > size - 8) {
    fail(fmt::format("header length {} runs past the end of the {}-byte file (truncated?)", header_len, size));
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes + 8), header_len);
  if (header.empty() || header.front() != '{') not_safetensors("its header does not start with '{'");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    fail(fmt::format("header is not valid JSON ({})", e.what()));
  }
  if (!json.is_object()) fail("header is not a JSON object");
  data_begin_ = bytes + 8 + header_len;
  data_size_ = size - 8 - header_len;

  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(fmt::format("__metadata__.{} is not a string", k));
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    // Captures a copy of the name: clang 14 (the fuzz build's) cannot capture a structured binding.
    auto bad = [&, tensor = name](const std::string& why) { fail(fmt::format("tensor '{}': {}", tensor, why)); };
    if (!entry.is_object()) bad("entry is not an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) bad("missing or non-string 'dtype'");
    if (!entry.contains("shape") || !entry["shape"].is_array()) bad("missing or non-array 'shape'");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2) {
      bad("'data_offsets' is not a [begin, end] pair");
    }
    TensorInfo t;
    t.name = name;
    const auto dtype = entry["dtype"].get<std::string>();
    const auto* known = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const auto& e) { return dtype == e.name; });
    if (known == std::end(kDTypes)) bad(fmt::format("unknown dtype '{}'", dtype));
    t.dtype = known->dtype;
    uint64_t numel = 1;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) bad("shape has a negative or non-integer dimension");
      const auto dim = d.get<uint64_t>();
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / dim) bad("shape is absurdly large");
      numel *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) bad("data_offsets are not non-negative integers");
    const auto begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end) bad(fmt::format("data_offsets [{}, {}] are reversed", begin, end));
    if (end > data_size_) {
      bad(fmt::format("data_offsets end {} is past the {}-byte data section (truncated file?)", end, data_size_));
    }
    if (end - begin != numel * known->size) {
      bad(fmt::format("{} bytes of data for shape [{}] of {} (expected {})", end - begin,
                      fmt::join(t.shape, ", "), dtype, numel * known->size));
    }
    t.offset = begin;
    t.bytes = end - begin;
    tensors_.push_back(std::move(t));
  }
  // Like the reference implementation: the tensors tile the data section exactly, no gaps or overlaps.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset || (a->offset == b->offset && a->bytes < b->bytes); });
  size_t expected = 0;
  for (const auto* t : by_offset) {
    if (t->offset != expected) {
      fail(fmt::format("tensor '{}' starts at byte {} of the data, expected {} (overlap or gap)", t->name, t->offset, expected));
    }
    expected = t->offset + t->bytes;
  }
  if (expected != data_size_) {
    fail(fmt::format("the tensors cover {} bytes but the data section has {} (trailing bytes)", expected, data_size_));
  }
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors_) if (t.name == name) return &t;
  return nullptr;
}

std::span<const uint8_t> SafetensorsFile::data(const TensorInfo& t) const { return {data_begin_ + t.offset, t.bytes}; }

std::vector<float> SafetensorsFile::to_float(const TensorInfo& t) const {
  const auto raw = data(t);
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  // memcpy per element: the data section has no alignment guarantee.
  switch (t.dtype) {
    case DType::F32:
      if (n > 0) std::memcpy(out.data(), raw.data(), n * 4);  // an empty vector's data() may be null: UB for memcpy
      break;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, raw.data() + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      break;
    case DType::F16:
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        out[i] = t.dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
      }
      break;
    default:
      throw DataError(fmt::format("{}: tensor '{}' has dtype {}, expected a floating-point type", origin_, t.name,
                                  dtype_name(t.dtype)));
  }
  return out;
}

std::vector<uint8_t> serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& t : tensors) {
    const size_t bytes = t.values.size() * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data section is 8-byte aligned
  std::vector<uint8_t> out(8 + text.size());
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  for (const auto& t : tensors) {
    if (t.dtype == DType::F32) {
      const auto* p = reinterpret_cast<const uint8_t*>(t.values.data());
      out.insert(out.end(), p, p + t.values.size() * 4);
    } else if (t.dtype == DType::F16) {
      for (float v : t.values) {
        const uint16_t h = float_to_half(v);
        out.push_back(static_cast<uint8_t>(h & 0xff));
        out.push_back(static_cast<uint8_t>(h >> 8));
      }
    } else {
      throw InternalError("serialize_safetensors writes F32 or F16 only");
    }
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto bytes = serialize_safetensors(tensors, metadata);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw NoInputError(fmt::format("{}: cannot write", path));
}

}  // namespace vc::inference
