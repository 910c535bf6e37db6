// Logits -> what the user sees: softmax, top-k with labels, temporal EMA smoothing with an "uncertain" threshold.
#pragma once
#include <span>
#include <string>
#include <vector>

namespace vc::inference {

// Numerically stable softmax (subtracts the maximum). NaN logits give a NaN distribution, never a crash.
std::vector<float> softmax(std::span<const float> logits);

struct Prediction {
  int index = -1;
  float score = 0.f;
  std::string label;
};

// The k highest scores, best first; ties go to the lower index. k is clamped to the number of classes.
// labels may be empty (then labels are "class N") or must have one name per class.
std::vector<Prediction> top_k(std::span<const float> scores, int k, const std::vector<std::string>& labels);

// Exponential moving average of the class probabilities over frames (alpha = 2 / (window + 1)); the top
// smoothed class is reported as uncertain when its smoothed probability is below `threshold`.
class Smoother {
 public:
  Smoother(int window, float threshold);
  struct Result {
    int index = -1;
    float score = 0.f;
    bool uncertain = true;
  };
  Result update(std::span<const float> probabilities);
  void reset() { average_.clear(); }

 private:
  float alpha_;
  float threshold_;
  std::vector<float> average_;
};

}  // namespace vc::inference
