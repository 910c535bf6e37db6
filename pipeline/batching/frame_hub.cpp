#include "pipeline/batching/frame_hub.hpp"

#include <algorithm>

namespace vc::pipeline {

FrameHub::FrameHub(std::vector<QueuePolicy> streams) {
  for (auto& p : streams) add_stream(p);
}

int FrameHub::add_stream(QueuePolicy policy, bool held) {
  std::lock_guard lock(mutex_);
  Queue q;
  q.held = held;
  q.policy = policy;
  q.policy.capacity = std::max<size_t>(policy.capacity, 1);
  queues_.push_back(std::move(q));
  return int(queues_.size()) - 1;
}

void FrameHub::release(int stream) {
  std::lock_guard lock(mutex_);
  queues_.at(size_t(stream)).held = false;
  frame_arrived_.notify_all();
}

void FrameHub::discard(int stream) {
  std::lock_guard lock(mutex_);
  Queue& q = queues_.at(size_t(stream));
  q.frames.clear();
  q.closed = true;
  q.drained_reported = true;  // never reported: nothing downstream knew it
  space_freed_.notify_all();
}

void FrameHub::reopen(int stream, QueuePolicy policy, bool held) {
  std::lock_guard lock(mutex_);
  Queue& q = queues_.at(size_t(stream));
  q = Queue{};
  q.held = held;
  q.policy = policy;
  q.policy.capacity = std::max<size_t>(policy.capacity, 1);
}

size_t FrameHub::streams() const {
  std::lock_guard lock(mutex_);
  return queues_.size();
}

void FrameHub::keep_open(bool open) {
  std::lock_guard lock(mutex_);
  keep_open_ = open;
  frame_arrived_.notify_all();
}

bool FrameHub::push(Frame frame) {
  std::unique_lock lock(mutex_);
  Queue& q = queues_.at(size_t(frame.stream));
  if (!q.policy.drop_oldest) {
    ++waiting_producers_;
    space_freed_.wait(lock, [&] { return q.frames.size() < q.policy.capacity || q.closed || shut_; });
    --waiting_producers_;
  }
  if (q.closed || shut_) return false;
  if (q.frames.size() >= q.policy.capacity) {
    q.frames.pop_front();  // the stalest frame goes: a live source must stay current
    ++q.dropped;
  }
  q.frames.push_back(std::move(frame));
  frame_arrived_.notify_one();
  return true;
}

void FrameHub::close(int stream) {
  std::lock_guard lock(mutex_);
  queues_.at(size_t(stream)).closed = true;
  frame_arrived_.notify_all();
  space_freed_.notify_all();
}

void FrameHub::shutdown() {
  std::lock_guard lock(mutex_);
  shut_ = true;
  frame_arrived_.notify_all();
  space_freed_.notify_all();
}

bool FrameHub::any_waiting() const {
  return std::any_of(queues_.begin(), queues_.end(), [](const Queue& q) { return !q.frames.empty() && q.credits != 0 && !q.held; });
}

bool FrameHub::all_drained() const {
  return !keep_open_ && std::all_of(queues_.begin(), queues_.end(), [](const Queue& q) { return q.closed && q.frames.empty(); });
}

void FrameHub::take_round_robin(std::vector<Frame>& batch, size_t max) {
  const size_t n = queues_.size();
  bool took = true;
  while (batch.size() < max && took) {
    took = false;
    for (size_t k = 0; k < n && batch.size() < max; ++k) {
      const size_t s = (next_stream_ + k) % n;
      Queue& q = queues_[s];
      if (q.frames.empty() || q.credits == 0 || q.held) continue;
      if (q.credits > 0) --q.credits;
      batch.push_back(std::move(q.frames.front()));
      q.frames.pop_front();
      took = true;
      if (batch.size() == max) next_stream_ = (s + 1) % n;  // the next batch starts after the last stream served
    }
  }
  space_freed_.notify_all();
}

bool FrameHub::all_done() const {
  std::lock_guard lock(mutex_);
  return all_drained() || (shut_ && !any_waiting());
}

std::vector<Frame> FrameHub::pop_batch(size_t max, std::chrono::microseconds fill_timeout,
                                       std::chrono::milliseconds first_wait) {
  std::vector<Frame> batch;
  std::unique_lock lock(mutex_);
  consumer_waiting_ = true;
  frame_arrived_.wait_for(lock, first_wait, [&] { return any_waiting() || all_drained() || shut_; });
  if (!any_waiting()) {
    consumer_waiting_ = false;
    return batch;
  }
  const auto deadline = Clock::now() + fill_timeout;
  take_round_robin(batch, max);
  while (batch.size() < max && !shut_ && !all_drained()) {
    if (!frame_arrived_.wait_until(lock, deadline, [&] { return any_waiting() || shut_ || all_drained(); })) break;
    take_round_robin(batch, max);
  }
  consumer_waiting_ = false;
  const auto now = Clock::now();
  for (auto& f : batch) f.batched = now;
  return batch;
}

FrameHub::Drained FrameHub::take_drained() {
  std::lock_guard lock(mutex_);
  Drained out;
  for (size_t s = 0; s < queues_.size(); ++s) {
    Queue& q = queues_[s];
    if (q.closed && q.frames.empty() && !q.drained_reported && !q.held) {
      q.drained_reported = true;
      out.streams.push_back(int(s));
    }
  }
  out.all_done = all_drained() || (shut_ && !any_waiting());
  return out;
}

void FrameHub::set_policy(int stream, QueuePolicy policy) {
  std::lock_guard lock(mutex_);
  Queue& q = queues_.at(size_t(stream));
  q.policy = policy;
  q.policy.capacity = std::max<size_t>(policy.capacity, 1);
  while (q.frames.size() > q.policy.capacity) {
    q.frames.pop_front();
    ++q.dropped;
  }
  space_freed_.notify_all();
}

void FrameHub::set_credits(int stream, int credits) {
  std::lock_guard lock(mutex_);
  queues_.at(size_t(stream)).credits = std::max(credits, 1);
}

void FrameHub::give_back(int stream) {
  std::lock_guard lock(mutex_);
  Queue& q = queues_.at(size_t(stream));
  if (q.credits < 0) return;
  ++q.credits;
  frame_arrived_.notify_all();  // its waiting frames may be taken again
}

int FrameHub::waiting_producers() const {
  std::lock_guard lock(mutex_);
  return waiting_producers_;
}

bool FrameHub::consumer_waiting() const {
  std::lock_guard lock(mutex_);
  return consumer_waiting_;
}

int64_t FrameHub::dropped(int stream) const {
  std::lock_guard lock(mutex_);
  return queues_.at(size_t(stream)).dropped;
}

size_t FrameHub::queued(int stream) const {
  std::lock_guard lock(mutex_);
  return queues_.at(size_t(stream)).frames.size();
}

bool FrameHub::closed(int stream) const {
  std::lock_guard lock(mutex_);
  return queues_.at(size_t(stream)).closed;
}

}  // namespace vc::pipeline
