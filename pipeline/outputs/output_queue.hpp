// The queue in front of an output worker, shared by the streams it draws (one, or every stream of a mosaic). Each
// stream keeps its own policy: a live stream that is behind loses its own oldest frame, counted against it, never
// another stream's; a file stream's frames are never dropped and never make the caller wait — the batcher holds a
// file back by credits instead (frame_hub.hpp), so it cannot have more than its share queued here.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace vc::pipeline {

template <typename T>
class OutputQueue {
 public:
  // `per_stream`: how many frames of one live stream may wait before its oldest is dropped.
  explicit OutputQueue(size_t per_stream) : per_stream_(per_stream) {}

  // Never blocks. Returns how many of `stream`'s frames were dropped to make room (0 or 1).
  int push(int stream, bool may_drop, T item) {
    std::lock_guard lock(mutex_);
    if (closed_) return 0;
    int dropped = 0;
    if (may_drop && count(stream) >= per_stream_) {
      for (auto it = items_.begin(); it != items_.end(); ++it) {
        if (it->first == stream) {
          items_.erase(it);
          dropped = 1;
          break;
        }
      }
    }
    items_.emplace_back(stream, std::move(item));
    not_empty_.notify_one();
    return dropped;
  }

  // The oldest item and its stream; nullopt after `timeout`, or when closed and empty.
  std::optional<std::pair<int, T>> pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!not_empty_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; })) return std::nullopt;
    if (items_.empty()) return std::nullopt;
    auto item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

  // No more items will come: wakes the worker; what is queued can still be popped.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }

  [[nodiscard]] bool closed_and_empty() const {
    std::lock_guard lock(mutex_);
    return closed_ && items_.empty();
  }

  [[nodiscard]] size_t queued(int stream) const {
    std::lock_guard lock(mutex_);
    return count(stream);
  }

 private:
  size_t count(int stream) const {
    size_t n = 0;
    for (const auto& [s, item] : items_) n += s == stream;
    return n;
  }

  size_t per_stream_;
  mutable std::mutex mutex_;
  std::condition_variable not_empty_;
  std::deque<std::pair<int, T>> items_;
  bool closed_ = false;
};

}  // namespace vc::pipeline
