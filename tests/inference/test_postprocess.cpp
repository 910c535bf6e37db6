// Softmax, top-k and smoothing, edge cases included.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "config/errors.hpp"
#include "inference/postprocess.hpp"

using namespace vc::inference;

TEST_SUITE_BEGIN("postprocess");

TEST_CASE("softmax is stable for huge logits and sums to 1") {
  const std::vector<float> logits = {1000.f, 1001.f, -1000.f};
  const auto p = softmax(logits);
  CHECK(std::accumulate(p.begin(), p.end(), 0.0) == doctest::Approx(1.0));
  CHECK(p[1] == doctest::Approx(1 / (1 + std::exp(-1.0))));
  CHECK(p[2] == 0.f);
  CHECK(softmax(std::vector<float>{}).empty());
  const auto one = softmax(std::vector<float>{-5.f});
  CHECK(one[0] == 1.f);
}

TEST_CASE("top-k orders best first, breaks ties by index, clamps k, ranks NaN last") {
  const std::vector<float> s = {0.1f, 0.4f, 0.4f, NAN, 0.05f};
  const auto top = top_k(s, 3, {});
  REQUIRE(top.size() == 3);
  CHECK(top[0].index == 1);
  CHECK(top[1].index == 2);
  CHECK(top[2].index == 0);
  CHECK(top[0].label == "class 1");
  CHECK(top_k(s, 50, {}).size() == 5);
  CHECK(top_k(s, 50, {}).back().index == 3);
  CHECK(top_k(s, 0, {}).empty());
  CHECK(top_k(s, 1, {"a", "b", "c", "d", "e"})[0].label == "b");
  CHECK_THROWS_AS(top_k(s, 1, {"a"}), vc::DataError);
}

TEST_CASE("smoothing follows an EMA and reports low confidence as uncertain") {
  Smoother none(1, 0.5f);
  CHECK(none.update(std::vector<float>{0.2f, 0.8f}).index == 1);
  CHECK(none.update(std::vector<float>{0.9f, 0.1f}).index == 0);  // window 1: no memory

  Smoother s(3, 0.6f);  // alpha = 0.5
  auto r = s.update(std::vector<float>{0.25f, 0.75f});
  CHECK(r.index == 1);
  CHECK(!r.uncertain);
  r = s.update(std::vector<float>{0.75f, 0.25f});  // average 0.5 / 0.5: tie -> lower index, uncertain
  CHECK(r.score == doctest::Approx(0.5f));
  CHECK(r.index == 0);
  CHECK(r.uncertain);
  r = s.update(std::vector<float>{0.75f, 0.25f});  // 0.625 / 0.375
  CHECK(r.index == 0);
  CHECK(r.score == doctest::Approx(0.625f));
  CHECK(!r.uncertain);
  s.reset();
  CHECK(s.update(std::vector<float>{0.2f, 0.3f, 0.5f}).index == 2);  // a new class count restarts
  Smoother nan(3, 0.5f);
  CHECK(nan.update(std::vector<float>{NAN, NAN}).uncertain);
}

TEST_SUITE_END();
