// An image-folder dataset as `capture` writes it and tools/train.py reads it: DATASET/SPLIT/LABEL/*.jpg, labels.txt
// (every label, sorted: the class order of torchvision's ImageFolder and train.py) and manifest.jsonl (a line per
// image: file, label, split, and where it came from). Splits are given to blocks of stream time, never to single
// frames, so that near-identical neighbours never land in two splits. Used by `capture` and by the service's review
// queue and "capture now" (service/api_datasets.cpp).
#pragma once
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vc::pipeline {

struct Split {
  std::string name;
  double share = 0;
};

// "train=0.8,val=0.2" -> the splits, shares summing to 1. Throws vc::UsageError naming `what` (the option or key).
std::vector<Split> parse_splits(const std::string& spec, const std::string& what = "--split");

// Blocks of stream time go to the split that is furthest below its share so far: the shares hold exactly over many
// blocks, the same block always goes to the same split (no randomness, no state but the shares), and every split
// gets its first block early.
class SplitPlan {
 public:
  explicit SplitPlan(std::vector<Split> splits);
  size_t split_of(int64_t block);
  [[nodiscard]] const std::string& name(size_t i) const { return splits_[i].name; }

 private:
  std::vector<Split> splits_;
  std::vector<int64_t> given_;
  std::vector<size_t> assigned_;
};

// Empty when `label` can name a class (and its folder): not empty, no '/' or '\', not "." or "..", valid UTF-8
// without control characters, at most 200 bytes; else why not.
std::string label_problem(const std::string& label);

// Adds `label` to DATASET/labels.txt (kept sorted, replaced atomically). Throws vc::IoError.
void add_label(const std::filesystem::path& dataset, const std::string& label);

// One dataset that images are added to one at a time (the service's): each into the split of its block of stream
// time, under a name not in use (never overwriting), written atomically, with its manifest line. Thread-safe.
class DatasetFolder {
 public:
  DatasetFolder(std::filesystem::path dir, std::vector<Split> splits, double block_s);

  // Moves the JPEG file `from` (renamed, or copied and removed across file systems) into the dataset as `label`;
  // `meta` (stream, source, frame, t, region, box, …) goes into its manifest line. Returns that line. Throws
  // vc::IoError (the file stays where it was), vc::DataError for a bad label.
  nlohmann::json add_file(const std::filesystem::path& from, const std::string& label, double t, nlohmann::json meta);
  // The same for an image in memory (JPEG bytes).
  nlohmann::json add_bytes(const std::string& jpeg, const std::string& stem, const std::string& label, double t,
                           nlohmann::json meta);

  // Images per label and split, from the folders as they are now: {"LABEL": {"train": n, "val": n}}.
  [[nodiscard]] nlohmann::json counts() const;
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path folder_for(const std::string& label, double t, std::string& split);
  static std::filesystem::path rename_new(const std::filesystem::path& from, const std::filesystem::path& folder,
                                          const std::string& stem, int& err);
  nlohmann::json finish(const std::filesystem::path& to, const std::string& label, const std::string& split,
                        nlohmann::json meta);
  void record(nlohmann::json line);

  std::filesystem::path dir_;
  SplitPlan plan_;
  double block_s_;
  std::mutex mutex_;
};

}  // namespace vc::pipeline
