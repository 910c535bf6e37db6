// libFuzzer target: the whole input as one `--set key.path=value` assignment on the defaults with two streams
// (so that input.KEY, inputs.N.KEY and an out-of-range N are all reachable), then validate().
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string assignment(reinterpret_cast<const char*>(data), size);
  vc::config::Config config;
  config.inputs = {config.input, config.input};
  config.inputs[0].name = "cam0";
  config.inputs[1].name = "cam1";
  try {
    vc::config::apply_override(config, assignment);
    vc::config::validate(config);
    vc::fuzz::check_round_trip(config);
  } catch (const vc::Error&) {
  }
  return 0;
}
