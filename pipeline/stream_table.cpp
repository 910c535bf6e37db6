#include "pipeline/stream_table.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "pipeline/core/control.hpp"

namespace vc::pipeline {

StreamTable::StreamTable(size_t capacity) : owner_(capacity, nullptr), slot_stats_(capacity) {}

void StreamTable::add(std::unique_ptr<Stream> stream) {
  std::lock_guard lock(mutex_);
  const auto slot = size_t(stream->id());
  owner_.at(slot) = stream.get();
  slot_stats_.at(slot) = stream->shared_stats();
  streams_.push_back(std::move(stream));
}

void StreamTable::refused(std::unique_ptr<Stream> stream) {
  std::lock_guard lock(mutex_);
  const int slot = stream->id();
  slot_stats_.at(size_t(slot)) = stream->shared_stats();  // (the event stage was told of it: kept until reused)
  free_.push_back(slot);
}

std::vector<std::shared_ptr<const StreamStats>> StreamTable::stats() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const StreamStats>> out;
  out.reserve(streams_.size());
  for (const auto& s : streams_) out.push_back(s->shared_stats());
  return out;
}

std::vector<config::Input> StreamTable::inputs() const {
  std::lock_guard lock(mutex_);
  std::vector<config::Input> out;
  for (const auto& s : streams_) {
    if (!s->removed() && !s->stats().closed) out.push_back(s->input());
  }
  return out;
}

std::optional<StreamTable::Found> StreamTable::find(const std::string& name) const {
  std::lock_guard lock(mutex_);
  for (auto it = streams_.rbegin(); it != streams_.rend(); ++it) {
    if ((*it)->stats().name == name) {
      return Found{it->get(), (*it)->id(), (*it)->shared_stats()};
    }
  }
  return std::nullopt;
}

int StreamTable::claim(const std::string& name, size_t used, const std::function<bool(const Stream&)>& may_let_go,
                       const std::function<StreamSummary(const Stream&)>& row,
                       const std::function<void(int slot, const std::string& name)>& released) {
  const auto let_go_of = [&](Stream* s) {
    const int slot = s->id();
    const std::string gone = s->stats().name;
    let_go_locked(s, row(*s));
    released(slot, gone);
  };
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < owner_.size(); ++i) {
    Stream* s = owner_[i];
    if (!s || s->stats().name != name) continue;
    if (!s->stats().closed) {
      throw RequestError(409, fmt::format("a stream named '{}' is running{}", name, s->removed() ? " (it is being removed)" : ""));
    }
    if (!may_let_go(*s)) {
      throw RequestError(409, fmt::format("a stream named '{}' has ended and is still finishing its outputs: try again "
                                          "in a moment", name));
    }
    let_go_of(s);  // one stream, and one series, per name
  }
  if (!free_.empty()) {
    const int slot = free_.back();
    free_.pop_back();
    return slot;
  }
  if (used < owner_.size()) return int(used);
  // Full: the oldest stream that has ended (a file played to its end) makes room.
  for (const auto& s : streams_) {
    if (s->stats().closed && may_let_go(*s)) {
      Stream* oldest = s.get();
      const int slot = oldest->id();
      let_go_of(oldest);
      free_.erase(std::remove(free_.begin(), free_.end(), slot), free_.end());
      return slot;
    }
  }
  throw RequestError(503, fmt::format("the run has room for {} streams at once (api.max_streams)", owner_.size()));
}

void StreamTable::let_go(Stream* stream, StreamSummary row) {
  std::lock_guard lock(mutex_);
  let_go_locked(stream, std::move(row));
}

void StreamTable::let_go_locked(Stream* stream, StreamSummary row) {
  const auto it = std::find_if(streams_.begin(), streams_.end(), [&](const auto& s) { return s.get() == stream; });
  if (it == streams_.end()) return;  // (let go of already)
  stream->join();
  const auto slot = size_t(stream->id());
  if (owner_.at(slot) == stream) {
    owner_[slot] = nullptr;
    free_.push_back(int(slot));
  }
  gone_.rows.push_back(std::move(row));
  if (gone_.rows.size() > kRowsKept) {
    const auto& old = gone_.rows.front();
    ++gone_.earlier;
    gone_.earlier_frames += old.frames;
    gone_.earlier_dropped += old.dropped + old.output_dropped;
    if (old.status == "failed") {
      if (gone_.earlier_failed.size() < kRowsKept) gone_.earlier_failed.push_back(old.name);
      if (!gone_.earlier_failure) gone_.earlier_failure = Failure{old.code, old.name + ": " + old.error};
    }
    gone_.rows.pop_front();
  }
  streams_.erase(it);  // (its statistics stay with its slot until the slot is used again)
}

void StreamTable::abandon(Stream* stream) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(streams_.begin(), streams_.end(), [&](const auto& s) { return s.get() == stream; });
  if (it == streams_.end()) return;
  std::replace(owner_.begin(), owner_.end(), stream, static_cast<Stream*>(nullptr));
  (void)it->release();  // its thread still uses it: never destroyed under that thread
  streams_.erase(it);
}

StreamTable::Gone StreamTable::gone() const {
  std::lock_guard lock(mutex_);
  return gone_;
}

}  // namespace vc::pipeline
