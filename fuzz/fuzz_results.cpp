// libFuzzer target: any text as the files `video-classifier evaluate` reads: a results file (top-1 and smoothed
// labels) and a ground-truth file.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "app/results_readers.hpp"
#include "config/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const bool smoothed : {false, true}) {
    std::istringstream in(text);
    try {
      (void)vc::app::read_results(in, "<fuzz>.jsonl", smoothed);
    } catch (const vc::Error&) {
    }
  }
  std::istringstream in(text);
  try {
    (void)vc::app::read_truth(in, "<fuzz>.txt");
  } catch (const vc::Error&) {
  }
  return 0;
}
