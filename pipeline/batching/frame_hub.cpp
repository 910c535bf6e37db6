#include "pipeline/batching/frame_hub.hpp"

#include <algorithm>
#include <stdexcept>

namespace vc::pipeline {

FrameHub::FrameHub(std::vector<QueuePolicy> streams, size_t lanes) : frame_arrived_(std::max<size_t>(lanes, 1)),
                                                                      next_stream_(std::max<size_t>(lanes, 1), 0) {
  for (auto& p : streams) add_stream(p);
}

void FrameHub::wake_all() {
  for (auto& cv : frame_arrived_) cv.notify_all();
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
  wake_all();
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
  wake_all();
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
  frame_arrived_[size_t(q.lane)].notify_one();
  return true;
}

void FrameHub::close(int stream) {
  std::lock_guard lock(mutex_);
  queues_.at(size_t(stream)).closed = true;
  wake_all();
  space_freed_.notify_all();
}

void FrameHub::shutdown() {
  std::lock_guard lock(mutex_);
  shut_ = true;
  wake_all();
  space_freed_.notify_all();
}

bool FrameHub::any_waiting() const { return std::any_of(queues_.begin(), queues_.end(), ready); }

bool FrameHub::any_waiting(int lane) const {
  return std::any_of(queues_.begin(), queues_.end(), [lane](const Queue& q) { return q.lane == lane && ready(q); });
}

bool FrameHub::all_drained() const {
  return !keep_open_ && std::all_of(queues_.begin(), queues_.end(), [](const Queue& q) { return q.closed && q.frames.empty(); });
}

void FrameHub::take_round_robin(std::vector<Frame>& batch, size_t max, int lane) {
  const size_t n = queues_.size();
  size_t& next = next_stream_[size_t(lane)];
  bool took = true;
  while (batch.size() < max && took) {
    took = false;
    for (size_t k = 0; k < n && batch.size() < max; ++k) {
      const size_t s = (next + k) % n;
      Queue& q = queues_[s];
      if (q.lane != lane || !ready(q)) continue;
      if (q.credits > 0) --q.credits;
      batch.push_back(std::move(q.frames.front()));
      q.frames.pop_front();
      took = true;
      if (batch.size() == max) next = (s + 1) % n;  // the next batch starts after the last stream served
    }
  }
  space_freed_.notify_all();
}

bool FrameHub::all_done() const {
  std::lock_guard lock(mutex_);
  return all_drained() || (shut_ && !any_waiting());
}

std::vector<Frame> FrameHub::pop_batch(size_t max, std::chrono::microseconds fill_timeout,
                                       std::chrono::milliseconds first_wait, int lane) {
  std::vector<Frame> batch;
  std::unique_lock lock(mutex_);
  auto& arrived = frame_arrived_.at(size_t(lane));
  ++consumers_waiting_;
  arrived.wait_for(lock, first_wait, [&] { return any_waiting(lane) || all_drained() || shut_; });
  if (!any_waiting(lane)) {
    --consumers_waiting_;
    return batch;
  }
  const auto deadline = Clock::now() + fill_timeout;
  take_round_robin(batch, max, lane);
  while (batch.size() < max && !shut_ && !all_drained()) {
    if (!arrived.wait_until(lock, deadline, [&] { return any_waiting(lane) || shut_ || all_drained(); })) break;
    take_round_robin(batch, max, lane);
  }
  --consumers_waiting_;
  const auto now = Clock::now();
  for (auto& f : batch) f.batched = now;
  return batch;
}

FrameHub::Drained FrameHub::take_drained(int lane) {
  std::lock_guard lock(mutex_);
  Drained out;
  for (size_t s = 0; s < queues_.size(); ++s) {
    Queue& q = queues_[s];
    if (q.lane == lane && q.closed && q.frames.empty() && !q.drained_reported && !q.held) {
      q.drained_reported = true;
      out.streams.push_back(int(s));
    }
  }
  out.all_done = all_drained() || (shut_ && !any_waiting());
  return out;
}

void FrameHub::set_lane(int stream, int lane) {
  std::lock_guard lock(mutex_);
  if (lane < 0 || size_t(lane) >= frame_arrived_.size()) throw std::out_of_range("FrameHub::set_lane: no such lane");
  queues_.at(size_t(stream)).lane = lane;
  wake_all();
}

int FrameHub::lane(int stream) const {
  std::lock_guard lock(mutex_);
  return queues_.at(size_t(stream)).lane;
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
  frame_arrived_[size_t(q.lane)].notify_all();  // its waiting frames may be taken again
}

int FrameHub::waiting_producers() const {
  std::lock_guard lock(mutex_);
  return waiting_producers_;
}

bool FrameHub::consumer_waiting() const {
  std::lock_guard lock(mutex_);
  return consumers_waiting_ > 0;
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

QueuePolicy queue_policy(const config::Input& in, bool live) {
  const bool drop = in.drop == config::DropPolicy::Drop || (in.drop == config::DropPolicy::Auto && live);
  return {drop ? size_t(2) : size_t(8), drop};
}

}  // namespace vc::pipeline
