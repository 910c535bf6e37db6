// An engine for tests of the run itself (runner.hpp's classifier seam): no network, the logits a function of the
// batch's number (or of what the frame shows: logits_of), as many batches in flight as asked, and a hook that runs before each batch — where a
// test holds the engine back until what it wants to see has happened (latches, never sleeps).
#pragma once
#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "inference/classifier.hpp"

namespace vc::test {

class FakeClassifier final : public inference::Classifier {
 public:
  explicit FakeClassifier(int in_flight = 2, int batch = 4, int classes = 10) : in_flight_(in_flight), batch_(batch) {
    num_classes_ = classes;
    architecture_ = "fake";
    for (int i = 0; i < classes; ++i) settings_.labels.push_back("class-" + std::to_string(i));
  }
  std::string engine_name() const override { return "fake engine"; }
  int max_batch() const override { return batch_; }
  int max_in_flight() const override { return in_flight_; }
  void submit(std::span<const inference::FrameView> frames) override {
    if (before_batch) before_batch(batches_);
    ++batches_;
    std::vector<float> logits(frames.size() * size_t(num_classes_), 0.f);
    for (size_t i = 0; i < frames.size(); ++i) {
      if (logits_of) {
        const auto l = logits_of(frames[i]);
        std::copy(l.begin(), l.begin() + std::min<long>(long(l.size()), num_classes_), logits.begin() + long(i) * num_classes_);
      } else {
        const int top = fixed_class >= 0 ? fixed_class : batches_ % num_classes_;
        logits[i * size_t(num_classes_) + size_t(top)] = 5.f;
      }
    }
    pending_.push_back(std::move(logits));
  }
  bool ready() override { return !pending_.empty(); }
  void collect(std::vector<float>& logits) override {
    logits = std::move(pending_.front());
    pending_.pop_front();
  }
  Tuner tuner() const override { return tuned_self; }
  [[nodiscard]] int batches() const { return batches_; }

  std::function<void(int batch)> before_batch;  // called on the inference thread before batch `batch` starts
  // The logits of one frame, from what it shows (host memory frames); unset: the batch number's class.
  std::function<std::vector<float>(const inference::FrameView&)> logits_of;
  int fixed_class = -1;  // every frame's top-1 (unless logits_of); -1: the batch number's class
  // Set: the engine started untuned, and this builds its tuned self (Classifier::tuner).
  Tuner tuned_self;

 private:
  int in_flight_, batch_;
  std::atomic<int> batches_{0};  // (read by tests from other threads)
  std::deque<std::vector<float>> pending_;
};

}  // namespace vc::test
