// `video-classifier evaluate`: scores a results file (JSON lines from `run`) against ground truth — a truth file
// ("frame<TAB>label" per line) or another results file (e.g. the CPU engine's, to compare engines) — and prints
// frame accuracy, per-class accuracy and the confusion matrix.
#include <algorithm>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "app/commands.hpp"
#include "app/results_readers.hpp"
#include "config/errors.hpp"

namespace vc::app {

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
