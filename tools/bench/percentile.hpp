// The q-quantile of a sample, as every benchmark here reports it: the value at rank q * n once sorted (q = 1: the
// largest); -1 when the sample is empty.
#pragma once
#include <algorithm>
#include <vector>

namespace vc::bench {

inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

}  // namespace vc::bench
