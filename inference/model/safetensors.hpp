// Reader for .safetensors weight files: 8-byte little-endian header length, a JSON header, raw tensor data.
// Memory-mapped; every offset, size, dtype and the total length is validated. Any malformed file is a
// vc::DataError naming the file and what is wrong (a missing/unreadable file is vc::NoInputError).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace vc::inference {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2 };
const char* dtype_name(DType d);
size_t dtype_size(DType d);

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  size_t offset = 0;  // into the data section
  size_t bytes = 0;
  [[nodiscard]] int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps and validates a file.
  static SafetensorsFile open(const std::string& path);
  // Validates an in-memory image of a file (tests and fuzzing); `origin` names it in errors.
  static SafetensorsFile from_bytes(std::vector<uint8_t> bytes, const std::string& origin);

  [[nodiscard]] const std::string& origin() const { return origin_; }
  [[nodiscard]] const std::vector<TensorInfo>& tensors() const { return tensors_; }
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const { return metadata_; }
  [[nodiscard]] const TensorInfo* find(const std::string& name) const;
  // The raw bytes of a tensor.
  [[nodiscard]] std::span<const uint8_t> data(const TensorInfo& t) const;
  // A floating-point tensor (F32, F16, BF16, F64) converted to float. Throws DataError for other dtypes.
  [[nodiscard]] std::vector<float> to_float(const TensorInfo& t) const;

 private:
  struct Storage;
  SafetensorsFile(std::shared_ptr<Storage> storage, std::string origin);
  void parse();

  std::shared_ptr<Storage> storage_;
  std::string origin_;
  const uint8_t* data_begin_ = nullptr;
  size_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes a safetensors file (F32 or F16 tensors), for tools and tests. Tensors are laid out in the given order.
struct TensorToWrite {
  std::string name;
  DType dtype;  // F32 or F16
  std::vector<int64_t> shape;
  std::vector<float> values;
};
std::vector<uint8_t> serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                           const std::map<std::string, std::string>& metadata = {});
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace vc::inference
