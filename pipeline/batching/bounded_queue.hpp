// A bounded queue between two threads, with the two policies the pipeline needs when it is full: block the
// producer (nothing lost) or drop the oldest item (stay current; the drop is counted).
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace vc::pipeline {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}

  // Blocks while full (until there is room or the queue is closed). False if closed.
  bool push_wait(T item) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return items_.size() < capacity_ || closed_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Never blocks: when full, the oldest item is dropped. Returns how many were dropped (0 or 1).
  int push_drop_oldest(T item) {
    std::lock_guard lock(mutex_);
    if (closed_) return 0;
    int dropped = 0;
    if (items_.size() >= capacity_) {
      items_.pop_front();
      dropped = 1;
    }
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return dropped;
  }

  // Waits up to `timeout` for an item. nullopt on timeout or when closed and empty.
  std::optional<T> pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!not_empty_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; })) return std::nullopt;
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // No more items will come: wakes every waiter; remaining items can still be popped.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  [[nodiscard]] bool closed_and_empty() const {
    std::lock_guard lock(mutex_);
    return closed_ && items_.empty();
  }

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable not_empty_, not_full_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace vc::pipeline
