// The run's streams by slot (a stream's id is its slot in every stage): those running and those that have ended,
// the slots free for the next stream, and a compact row for each stream let go of — removed over the API, or an
// ended one removed or replaced by a stream of its name. A stream let go of is joined and destroyed, and its
// statistics leave the service's lists (one metric series per live name), so that a service whose cameras come and
// go for months keeps its memory, threads and descriptors where they were. Thread-safe.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/failure.hpp"
#include "pipeline/core/stats.hpp"
#include "pipeline/run_report.hpp"
#include "pipeline/sources/stream.hpp"

namespace vc::pipeline {

class StreamTable {
 public:
  // Rows kept of streams let go of (older ones are only counted and summed).
  static constexpr size_t kRowsKept = 100;

  explicit StreamTable(size_t capacity);

  // The lock every walk over list() holds.
  std::mutex& mutex() const { return mutex_; }
  // Every stream not let go of, in the order they joined (hold mutex()).
  std::vector<std::unique_ptr<Stream>>& list() { return streams_; }
  const std::vector<std::unique_ptr<Stream>>& list() const { return streams_; }

  // A stream the run starts with, or one added and started: it holds its slot (its id) from now on.
  void add(std::unique_ptr<Stream> stream);
  // A stream that had a slot but could not start: the slot is free again.
  void refused(std::unique_ptr<Stream> stream);

  // The statistics of every stream not let go of, in the order they joined (for the service).
  [[nodiscard]] std::vector<std::shared_ptr<const StreamStats>> stats() const;
  // The streams that have not ended or been removed, as configured.
  [[nodiscard]] std::vector<config::Input> inputs() const;
  // The stream of that name not let go of (the latest: running, or ended), its slot and statistics; none if none.
  struct Found {
    Stream* stream = nullptr;
    int slot = -1;
    std::shared_ptr<const StreamStats> stats;
  };
  [[nodiscard]] std::optional<Found> find(const std::string& name) const;

  // The slot for a stream named `name` joining the run: a new one while fewer than the capacity have been used
  // (`used`: the slots the batcher has), else a free one. A stream of that name that has ended is let go of first
  // (`row` makes its summary row; `released(slot, name)` is told, under the table's lock, so that the other stages let
  // go of theirs). `may_let_go`: whether an ended stream is done with everywhere (and no one else is letting go of
  // it). Throws RequestError 409 (a stream of that name runs or is still finishing) or 503 (no room).
  int claim(const std::string& name, size_t used, const std::function<bool(const Stream&)>& may_let_go,
            const std::function<StreamSummary(const Stream&)>& row,
            const std::function<void(int slot, const std::string& name)>& released);

  // Lets go of a stream every stage is done with: keeps its row, joins its thread, frees its slot.
  void let_go(Stream* stream, StreamSummary row);
  // A stream whose source will not stop: it leaves the table but is never destroyed (its thread still uses it).
  void abandon(Stream* stream);

  // The rows of the streams let go of (the last kRowsKept), and how many earlier ones there were, with their totals.
  struct Gone {
    std::deque<StreamSummary> rows;
    int64_t earlier = 0, earlier_frames = 0, earlier_dropped = 0;
    std::vector<std::string> earlier_failed;  // names of earlier ones that had failed (at most kRowsKept)
    std::optional<Failure> earlier_failure;   // the first of their failures
  };
  [[nodiscard]] Gone gone() const;

 private:
  void let_go_locked(Stream* stream, StreamSummary row);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<Stream*> owner_;  // slot -> the stream that has it now
  // Slot -> the statistics of its last stream, kept until the slot is used again: a stage may still hold them.
  std::vector<std::shared_ptr<const StreamStats>> slot_stats_;
  std::vector<int> free_;  // slots let go of, or whose stream could not start
  Gone gone_;
};

}  // namespace vc::pipeline
