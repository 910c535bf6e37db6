// libFuzzer target: any text as a YAML configuration file, then validate() on what parses.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto config = vc::config::parse_config(text, "<fuzz>");
    vc::config::validate(config);
    vc::fuzz::check_round_trip(config);
  } catch (const vc::Error&) {  // a rejected configuration: the expected outcome for most inputs
  }
  return 0;
}
