#include "app/results_readers.hpp"

#include <cstdint>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"

namespace vc::app {
namespace {

bool is_results_file(const std::string& path) { return path.size() > 6 && path.substr(path.size() - 6) == ".jsonl"; }

}  // namespace

Labels read_results(std::istream& in, const std::string& path, bool smoothed) {
  Labels labels;
  int line_no = 0;
  std::string stream;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    try {
      // at() for keys not checked before: const operator[] on a missing key is undefined behaviour in nlohmann.
      const auto j = nlohmann::json::parse(line);
      if (!j.is_object() || !j.contains("frame") || !j.contains("top")) continue;  // event lines
      if (j.contains("stream")) {
        const auto s = j["stream"].get<std::string>();
        if (stream.empty()) stream = s;
        if (s != stream) {
          throw DataError(fmt::format("{}:{}: results of several streams ({} and {}): evaluate one stream's results "
                                      "(output.results: 'out/{{stream}}.jsonl')", path, line_no, stream, s));
        }
      }
      // An integer only: get<int64_t>() of a float such as 1e300 is an out-of-range conversion (undefined
      // behaviour; found by fuzz_results), and a frame number is never fractional anyway.
      const auto& f = j["frame"];
      if (!f.is_number_integer() ||
          (f.is_number_unsigned() && f.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
        throw DataError(fmt::format("{}:{}: not a results line (\"frame\" is {}, not a frame number)", path, line_no,
                                    f.dump()));
      }
      const Item item{f.get<int64_t>(), j.contains("region") ? j["region"].get<std::string>() : std::string()};
      if (smoothed) {
        if (j.contains("smoothed")) labels[item] = j["smoothed"].at("label").get<std::string>();
      } else if (!j["top"].empty()) {
        labels[item] = j["top"][0].at("label").get<std::string>();
      }
    } catch (const nlohmann::json::exception& e) {
      throw DataError(fmt::format("{}:{}: not a results line ({})", path, line_no, e.what()));
    }
  }
  return labels;
}

Labels read_results(const std::string& path, bool smoothed) {
  std::ifstream in(path);
  if (!in) throw NoInputError(fmt::format("{}: cannot read results", path));
  return read_results(in, path, smoothed);
}

Labels read_truth(std::istream& in, const std::string& path) {
  if (is_results_file(path)) return read_results(in, path, false);
  Labels labels;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto sep = line.find_first_of("\t ");
    try {
      if (sep == std::string::npos) throw std::invalid_argument("no label");
      size_t used = 0;
      const int64_t frame = std::stoll(line.substr(0, sep), &used);
      if (used != sep) throw std::invalid_argument("not a frame number");
      const auto rest = line.substr(line.find_first_not_of("\t ", sep));
      const auto tab = rest.find('\t');
      if (line[sep] == '\t' && tab != std::string::npos) {  // FRAME<TAB>REGION<TAB>LABEL
        const auto label = rest.substr(tab + 1);
        if (tab == 0 || label.empty()) throw std::invalid_argument("no region or label");
        labels[{frame, rest.substr(0, tab)}] = label;
      } else {
        labels[{frame, ""}] = rest;
      }
    } catch (const std::exception&) {
      throw DataError(fmt::format("{}:{}: expected 'FRAME<TAB>LABEL' or 'FRAME<TAB>REGION<TAB>LABEL', got '{}'", path,
                                  line_no, line));
    }
  }
  return labels;
}

Labels read_truth(const std::string& path) {
  if (is_results_file(path)) return read_results(path, false);
  std::ifstream in(path);
  if (!in) throw NoInputError(fmt::format("{}: cannot read ground truth", path));
  return read_truth(in, path);
}

}  // namespace vc::app
