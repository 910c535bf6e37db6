// libFuzzer target: any bytes as a .safetensors file; on files that parse, the model card in their metadata and
// every tensor converted to float.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "config/errors.hpp"
#include "inference/model/model_card.hpp"
#include "inference/model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using vc::inference::SafetensorsFile;
  try {
    const auto file = SafetensorsFile::from_bytes(std::vector<uint8_t>(data, data + size), "<fuzz>");
    try {
      (void)vc::inference::read_model_card(file.metadata(), "<fuzz>");
    } catch (const vc::Error&) {
    }
    for (const auto& t : file.tensors()) {
      try {
        (void)file.to_float(t);
      } catch (const vc::Error&) {  // not a floating-point dtype
      }
    }
  } catch (const vc::Error&) {
  }
  return 0;
}
