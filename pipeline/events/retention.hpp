// Keeps the event folder within bounds — files older than retain.days, and beyond retain.max_gib the oldest first —
// deleting only files this app wrote: each is recorded in an index (DIR/index.jsonl) when it is complete, and the
// index survives restarts. A file still being written is never deleted (it is not in the index yet). Not
// thread-safe: one owner (the event stage's writer thread).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vc::pipeline {

class Retention {
 public:
  // Reads the index, if there is one. `days` / `max_gib` 0: no limit of that kind.
  Retention(std::string dir, double days, double max_gib);

  // A file this app wrote and finished (its size is read now).
  void add(const std::string& path);
  // Deletes what is past the limits, oldest first; returns the files it deleted. Throws vc::IoError when the index
  // cannot be rewritten.
  std::vector<std::string> enforce(int64_t now_s);

  [[nodiscard]] uint64_t bytes() const;

 private:
  struct Entry {
    std::string path;
    uint64_t bytes = 0;
    int64_t created_s = 0;
  };
  void save() const;

  std::string dir_, index_;
  double days_, max_gib_;
  std::vector<Entry> entries_;  // oldest first
};

}  // namespace vc::pipeline
