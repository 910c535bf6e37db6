// The frames output.collect kept because the model was unsure of them (pipeline/outputs/collector.hpp), as the page
// reviews them: read from the collector's index (collect.jsonl), those whose files are still there. Labelling one
// moves its file into a dataset (pipeline/outputs/dataset_folder.hpp); discarding one removes it. The collector
// rewrites the index from time to time and never writes a frame's file again, so a file's presence is the truth.
#pragma once
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vc::service {

class ReviewQueue {
 public:
  // `dir`: output.collect.dir ("" = the run collects nothing: the queue is empty).
  explicit ReviewQueue(std::string dir);

  struct Item {
    std::string file;     // relative to the folder: its id in the API
    nlohmann::json line;  // its collect.jsonl line (stream, frame, pts, label, score, top, region, box, model)
  };
  // The frames waiting, newest first; of model `model` only when given.
  [[nodiscard]] std::vector<Item> items(const std::string& model = {}) const;
  // {"waiting": n, "dropped_for_room": n, "by_model": {MODEL: {LABEL: n}}}
  [[nodiscard]] nlohmann::json summary() const;
  // The frames waiting, by file (one read of the index for a whole request).
  [[nodiscard]] std::map<std::string, Item> waiting() const;
  // Removes a waiting frame's file; false when it has gone already.
  bool discard(const Item& item);

  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] std::filesystem::path path_of(const Item& item) const { return std::filesystem::path(dir_) / item.file; }

 private:
  struct Index {
    std::vector<Item> items;  // oldest first, files there
    int64_t dropped_for_room = 0;
  };
  [[nodiscard]] Index read() const;

  std::string dir_;
  mutable std::mutex mutex_;  // one reader of the index at a time (a label and a discard of one frame do not race)
};

}  // namespace vc::service
