// The event gate of a run (runner.cpp).
#pragma once
#include <map>
#include <mutex>
#include <vector>

#include "pipeline/core/events.hpp"
#include "pipeline/post_stage.hpp"

namespace vc::pipeline {

// Where streams send their events (stream_down, stream_up): the post stage while it takes them, nowhere after. A
// stream left behind at the end (a source that will not stop) may outlive the post stage; it holds this gate, not
// the stage. A stream added while the run goes on is admitted once the post stage knows it: what it says before
// waits here (a few events at most: it has only just started).
class EventGate {
 public:
  explicit EventGate(size_t capacity) : admitted_(capacity, 1) {}
  void open(PostStage* post) {
    std::lock_guard lock(mutex_);
    post_ = post;
  }
  void submit(StreamEvent e) {
    std::lock_guard lock(mutex_);
    if (!post_) return;
    if (const auto s = size_t(e.stream); s < admitted_.size() && !admitted_[s]) {
      if (auto& p = pending_[s]; p.size() < 64) p.push_back(std::move(e));
      return;
    }
    post_->submit(std::move(e));
  }
  // `stream`'s events wait until admit() (or are forgotten by forget(): it never started).
  void hold(int stream) {
    std::lock_guard lock(mutex_);
    admitted_.at(size_t(stream)) = 0;
  }
  void admit(int stream) {
    std::lock_guard lock(mutex_);
    admitted_.at(size_t(stream)) = 1;
    auto pending = std::move(pending_[size_t(stream)]);
    pending_.erase(size_t(stream));
    if (post_) {
      for (auto& e : pending) post_->submit(std::move(e));
    }
  }
  void forget(int stream) {
    std::lock_guard lock(mutex_);
    pending_.erase(size_t(stream));
  }
  void close() {
    std::lock_guard lock(mutex_);
    post_ = nullptr;
  }

 private:
  std::mutex mutex_;
  PostStage* post_ = nullptr;
  std::vector<char> admitted_;
  std::map<size_t, std::vector<StreamEvent>> pending_;
};

}  // namespace vc::pipeline
