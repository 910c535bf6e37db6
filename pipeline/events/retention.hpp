// Keeps the event folder within bounds — files older than retain.days, and beyond retain.max_gib the oldest first —
// deleting only files this app wrote: each is recorded in an index (DIR/index.jsonl), relative to the folder, when it
// is complete, and the index survives restarts. What it deletes is resolved inside the folder without following a
// link, and only a regular file is deleted: an index entry that names anything else (an absolute path, "..", a link
// put in the folder's place) is skipped with a warning and never followed. A file still being written is never
// deleted (it is not in the index yet). Not thread-safe: one owner (the event stage's writer thread).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vc::pipeline {

class Retention {
 public:
  // Reads the index, if there is one (a damaged line, or an entry that is not a path inside the folder, is skipped
  // with a warning). `days` / `max_gib` 0: no limit of that kind.
  Retention(std::string dir, double days, double max_gib);

  // A file this app wrote and finished, inside the folder (its size is read now). Throws vc::IoError when it cannot be
  // recorded (the index cannot be written; the file would never be deleted) or is not inside the folder.
  void add(const std::string& path);
  // Deletes what is past the limits, oldest first; returns the files it deleted (as paths under the folder). Throws
  // vc::IoError when the index cannot be rewritten.
  std::vector<std::string> enforce(int64_t now_s);

  [[nodiscard]] uint64_t bytes() const;
  // Index entries skipped when it was read (damaged lines, paths outside the folder).
  [[nodiscard]] int skipped() const { return skipped_; }

 private:
  struct Entry {
    std::string path;  // relative to the folder, no "." or ".." in it
    uint64_t bytes = 0;
    int64_t created_s = 0;
  };
  void save() const;
  // Deletes one recorded file, if it is still a regular file where it was written.
  enum class Removed { Deleted, Absent, NotOurs, Failed };
  Removed remove(const Entry& e) const;

  std::string dir_, index_;
  double days_, max_gib_;
  std::vector<Entry> entries_;  // oldest first
  int skipped_ = 0;
};

}  // namespace vc::pipeline
