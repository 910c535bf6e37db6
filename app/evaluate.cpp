// `video-classifier evaluate`: scores a results file (JSON lines from `run`) against ground truth — a truth file
// ("frame<TAB>label" per line) or another results file (e.g. the CPU engine's, to compare engines) — or, with
// --images DIR, the model on an image folder (DIR/LABEL/*.jpg: a captured dataset's split) run through the app's own
// pipeline (its image source, preprocessing and engine); and prints frame accuracy, per-class accuracy and the
// confusion matrix.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/results_readers.hpp"
#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "pipeline/runner.hpp"
#include "pipeline/sources/image_files.hpp"

namespace vc::app {

namespace fs = std::filesystem;

namespace {

// (truth, predicted) per scored item.
using Pairs = std::vector<std::pair<std::string, std::string>>;

void print_scores(std::ostream& out, const Pairs& pairs, const std::string& what) {
  std::set<std::string> class_set;
  for (const auto& [t, p] : pairs) {
    class_set.insert(t);
    class_set.insert(p);
  }
  const std::vector<std::string> classes(class_set.begin(), class_set.end());
  auto index = [&](const std::string& l) { return int(std::lower_bound(classes.begin(), classes.end(), l) - classes.begin()); };
  std::vector<std::vector<int>> confusion(classes.size(), std::vector<int>(classes.size(), 0));
  int64_t correct = 0;
  for (const auto& [t, p] : pairs) {
    correct += t == p;
    ++confusion[index(t)][index(p)];
  }
  const auto scored = int64_t(pairs.size());
  fmt::print(out, "{} accuracy: {:.2f}% ({}/{}) {}\n\nper class:\n", what == "images" ? "image" : "frame",
             100.0 * double(correct) / double(scored), correct, scored, what == "images" ? "" : what);
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
}

// The model on DIR/LABEL/*: one image stream per label folder, the results read back, each image's label its folder's.
int evaluate_images(const CommandLine& cl, std::ostream& out) {
  const fs::path dir(cl.images);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw NoInputError(fmt::format("{}: not a folder (give DIR with a folder per label)", cl.images));
  config::Config c = cl.config;
  c.inputs.clear();
  std::vector<fs::path> folders;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory()) folders.push_back(entry.path());
  }
  std::sort(folders.begin(), folders.end());
  for (const auto& folder : folders) {
    try {
      (void)pipeline::image_files(folder.string());
    } catch (const NoInputError&) {
      continue;  // a label folder without images
    }
    config::Input in = c.input;
    in.kind = config::InputKind::Image;
    in.path = folder.string();
    in.loop = false;
    in.name = fmt::format("label{}", c.inputs.size());
    c.inputs.push_back(in);
  }
  if (c.inputs.empty()) throw NoInputError(fmt::format("{}: no LABEL/ folder with images in it", cl.images));
  // Every folder's label must be one the model knows, or its images can only be scored wrong: a usage error, naming
  // both label sets (evaluating a dataset with the bundled model by mistake, say).
  const auto model_labels = inference::model_settings(c).labels;
  std::vector<std::string> unknown, folder_labels;
  for (const auto& in : c.inputs) {
    const auto label = fs::path(in.path).filename().string();
    folder_labels.push_back(label);
    if (!model_labels.empty() && std::find(model_labels.begin(), model_labels.end(), label) == model_labels.end()) {
      unknown.push_back(label);
    }
  }
  if (!unknown.empty()) {
    const auto model = c.model.weights.empty() ? std::string("the bundled model") : c.model.weights;
    throw UsageError(fmt::format("evaluate: {} has label folder(s) {} that {} does not know (its labels: {}); give "
                                 "--model with the model trained on this dataset",
                                 cl.images, fmt::join(unknown, ", "), model, fmt::join(model_labels, ", ")));
  }
  const auto results = fs::temp_directory_path() / fmt::format("vc-evaluate-{}.jsonl", getpid());
  c.output.kind = config::OutputKind::None;
  c.output.results = results.string();
  c.metrics.enabled = false;
  c.mqtt.enabled = false;
  c.api.enabled = false;
  c.events.rules.clear();
  config::validate(c);
  std::atomic<int> stop{0};
  const auto summary = pipeline::Runner(c).run(stop);
  Pairs pairs;
  std::ifstream in(results);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("top") || j["top"].empty()) continue;
    const auto truth = fs::path(j["source"].get<std::string>()).parent_path().filename().string();
    pairs.emplace_back(truth, j["top"][0]["label"].get<std::string>());
  }
  fs::remove(results, ec);
  if (summary.code != ExitCode::kOk) throw Error(summary.code, fmt::format("evaluate: the run over {} failed", cl.images));
  if (pairs.empty()) throw DataError(fmt::format("{}: no image was classified", cl.images));
  fmt::print(out, "images scored: {} in {} label folder(s) of {} ({})\n", pairs.size(), c.inputs.size(), cl.images,
             summary.engine);
  print_scores(out, pairs, "images");
  return 0;
}

}  // namespace

int evaluate(const CommandLine& cl, std::ostream& out) {
  if (!cl.images.empty()) return evaluate_images(cl, out);
  const auto predicted = read_results(cl.results_path, cl.smoothed);
  const auto truth = read_truth(cl.ground_truth);
  std::map<std::string, Pairs> by_region;  // "" = the whole picture
  int64_t missing = 0;
  for (const auto& [item, label] : truth) {
    auto it = predicted.find(item);
    if (it == predicted.end()) {
      ++missing;
      continue;
    }
    by_region[item.region].emplace_back(label, it->second);
  }
  if (by_region.empty()) throw DataError(fmt::format("{} and {} have no frame in common", cl.results_path, cl.ground_truth));
  const auto what = fmt::format("of the {} label{}", cl.smoothed ? "smoothed" : "top-1",
                                cl.smoothed ? " (the label over the last frames: what label changes and event rules use)"
                                            : " (each frame's own; --smoothed scores the label over the last frames)");
  for (const auto& [region, pairs] : by_region) {  // each region is its own question, with classes of its own
    if (by_region.size() > 1 || !region.empty()) {
      fmt::print(out, "{}== {}\n", region == by_region.begin()->first ? "" : "\n",
                 region.empty() ? std::string("the whole picture") : "region " + region);
    }
    fmt::print(out, "frames scored: {}{}\n", pairs.size(),
               region == by_region.begin()->first ? fmt::format(" ({} in the ground truth without a result)", missing) : "");
    print_scores(out, pairs, what);
  }
  return 0;
}

}  // namespace vc::app
