// The readers of `video-classifier evaluate`: a results file (JSON lines from `run`) and a ground-truth file
// ("FRAME<TAB>LABEL" or "FRAME<TAB>REGION<TAB>LABEL" lines, or another results file), each to (frame, region) -> label. Malformed input is a vc::DataError
// naming the file and line; the stream forms exist so that tests and the fuzzer need no file.
#pragma once
#include <compare>
#include <cstdint>
#include <istream>
#include <map>
#include <string>

namespace vc::app {

// A frame's whole picture (region "") or one of its regions.
struct Item {
  int64_t frame = 0;
  std::string region;
  auto operator<=>(const Item&) const = default;
};
using Labels = std::map<Item, std::string>;  // (frame, region) -> label

// The label of every frame line in a results file: its top-1, or with `smoothed` the smoothed label (what the
// overlay headline and the label-change events use). Lines of other streams than the first one seen are an error:
// frame numbers are per stream. `path` names the input in errors. Throws vc::DataError.
Labels read_results(std::istream& in, const std::string& path, bool smoothed);
// Opens `path` (vc::NoInputError if it can't be read), then as above.
Labels read_results(const std::string& path, bool smoothed);

// "FRAME<TAB>LABEL" (or space) lines, "FRAME<TAB>REGION<TAB>LABEL" for a region (tabs); empty lines and '#' comments are skipped, CRLF is accepted; a `path` ending in
// .jsonl is read as a results file (its top-1 labels). Throws vc::DataError.
Labels read_truth(std::istream& in, const std::string& path);
// Opens `path` (vc::NoInputError if it can't be read), then as above.
Labels read_truth(const std::string& path);

}  // namespace vc::app
