#include "inference/postprocess.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "config/errors.hpp"

namespace vc::inference {

std::vector<float> softmax(std::span<const float> logits) {
  std::vector<float> out(logits.size());
  if (logits.empty()) return out;
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += out[i] = std::exp(logits[i] - max);
  for (auto& v : out) v = float(v / sum);
  return out;
}

std::vector<Prediction> top_k(std::span<const float> scores, int k, const std::vector<std::string>& labels) {
  if (!labels.empty() && labels.size() != scores.size()) {
    throw DataError(fmt::format("{} labels for {} classes", labels.size(), scores.size()));
  }
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t n = std::min<size_t>(std::max(k, 0), scores.size());
  // NaN sorts last so that a broken frame never reports NaN as its best class.
  auto better = [&](int a, int b) {
    const bool na = std::isnan(scores[a]), nb = std::isnan(scores[b]);
    if (na != nb) return nb;
    return scores[a] > scores[b] || (!(scores[b] > scores[a]) && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + long(n), order.end(), better);
  std::vector<Prediction> out;
  for (size_t i = 0; i < n; ++i) {
    const int c = order[i];
    out.push_back({c, scores[c], labels.empty() ? fmt::format("class {}", c) : labels[c]});
  }
  return out;
}

Smoother::Smoother(int window, float threshold)
    : alpha_(2.f / float(std::max(window, 1) + 1)), threshold_(threshold) {}

Smoother::Result Smoother::update(std::span<const float> p) {
  if (average_.size() != p.size()) average_.assign(p.begin(), p.end());  // first frame (or new model)
  else for (size_t i = 0; i < p.size(); ++i) average_[i] += alpha_ * (p[i] - average_[i]);
  Result r;
  if (average_.empty()) return r;
  const auto best = top_k(average_, 1, {});
  r.index = best[0].index;
  r.score = best[0].score;
  r.uncertain = !(r.score >= threshold_);
  return r;
}

}  // namespace vc::inference
