// `video-classifier evaluate`: scores a results file (JSON lines from `run`) against ground truth — a truth file
// ("frame<TAB>label" per line) or another results file (e.g. the CPU engine's, to compare engines) — and prints
// frame accuracy, per-class accuracy and the confusion matrix.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "config/errors.hpp"

namespace vc::app {
namespace {

using Labels = std::map<int64_t, std::string>;  // frame -> label

// The label of every frame line in a results file: its top-1, or with `smoothed` the smoothed label (what the
// overlay headline and the label-change events use). Lines of other streams than the first one seen are an error:
// frame numbers are per stream.
Labels read_results(const std::string& path, bool smoothed) {
  std::ifstream in(path);
  if (!in) throw NoInputError(fmt::format("{}: cannot read results", path));
  Labels labels;
  int line_no = 0;
  std::string stream;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    try {
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
      const auto frame = j["frame"].get<int64_t>();
      if (smoothed) {
        if (j.contains("smoothed")) labels[frame] = j["smoothed"]["label"].get<std::string>();
      } else if (!j["top"].empty()) {
        labels[frame] = j["top"][0]["label"].get<std::string>();
      }
    } catch (const nlohmann::json::exception& e) {
      throw DataError(fmt::format("{}:{}: not a results line ({})", path, line_no, e.what()));
    }
  }
  return labels;
}

Labels read_truth(const std::string& path) {
  if (path.size() > 6 && path.substr(path.size() - 6) == ".jsonl") return read_results(path, false);
  std::ifstream in(path);
  if (!in) throw NoInputError(fmt::format("{}: cannot read ground truth", path));
  Labels labels;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto sep = line.find_first_of("\t ");
    try {
      if (sep == std::string::npos) throw std::invalid_argument("no label");
      labels[std::stoll(line.substr(0, sep))] = line.substr(line.find_first_not_of("\t ", sep));
    } catch (const std::exception&) {
      throw DataError(fmt::format("{}:{}: expected 'FRAME<TAB>LABEL', got '{}'", path, line_no, line));
    }
  }
  return labels;
}

}  // namespace

int evaluate(const CommandLine& cl, std::ostream& out) {
  const auto predicted = read_results(cl.results_path, cl.smoothed);
  const auto truth = read_truth(cl.ground_truth);
  std::set<std::string> class_set;
  for (const auto& [f, l] : truth) class_set.insert(l);
  for (const auto& [f, l] : predicted) class_set.insert(l);
  const std::vector<std::string> classes(class_set.begin(), class_set.end());
  auto index = [&](const std::string& l) { return int(std::lower_bound(classes.begin(), classes.end(), l) - classes.begin()); };
  std::vector<std::vector<int>> confusion(classes.size(), std::vector<int>(classes.size(), 0));
  int64_t scored = 0, correct = 0, missing = 0;
  for (const auto& [frame, label] : truth) {
    auto it = predicted.find(frame);
    if (it == predicted.end()) {
      ++missing;
      continue;
    }
    ++scored;
    correct += it->second == label;
    ++confusion[index(label)][index(it->second)];
  }
  if (scored == 0) throw DataError(fmt::format("{} and {} have no frame in common", cl.results_path, cl.ground_truth));
  const double accuracy = double(correct) / double(scored);
  fmt::print(out, "frames scored: {} ({} in the ground truth without a result)\n", scored, missing);
  fmt::print(out, "frame accuracy: {:.2f}% ({}/{}) of the {} label{}\n\nper class:\n", accuracy * 100, correct, scored,
             cl.smoothed ? "smoothed" : "top-1", cl.smoothed ? " (what the overlay headline shows)" : " (add --smoothed to score the smoothed label)");
  for (size_t c = 0; c < classes.size(); ++c) {
    int total = 0;
    for (int v : confusion[c]) total += v;
    if (total) fmt::print(out, "  {:<16} {:6.2f}% of {}\n", classes[c], 100.0 * confusion[c][c] / total, total);
  }
  fmt::print(out, "\nconfusion matrix (rows: truth, columns: predicted, in the order above):\n");
  for (size_t r = 0; r < classes.size(); ++r) {
    fmt::print(out, "  {:<16}", classes[r].substr(0, 16));
    for (int v : confusion[r]) fmt::print(out, " {:4}", v);
    fmt::print(out, "\n");
  }
  return 0;
}

}  // namespace vc::app
