// The layer-by-layer diagnosis (diagnose.hpp): a healthy network passes every layer; a NaN planted in one
// convolution's weights is found in that layer and called a data fault (the safe algorithm fails too).
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

#include "config/errors.hpp"
#include "inference/cuda/diagnose.hpp"
#include "inference/model/half.hpp"
#include "inference/model/resnet.hpp"
#include "test_helpers.hpp"

using namespace vc::inference;

TEST_SUITE_BEGIN("gpu.diagnose");

namespace {

std::vector<uint16_t> random_image(int h, int w, int c) {
  std::vector<uint16_t> image;
  for (float v : vc::test::random_floats(size_t(h) * w * c, -2.f, 2.f)) image.push_back(float_to_half(v));
  return image;
}

}  // namespace

TEST_CASE("a finite network on a finite image passes every layer") {
  const auto net = random_resnet(named_resnet("resnet18", 10), 21);
  const auto d = diagnose(net, 64, 64, random_image(64, 64, 3));
  MESSAGE(format_diagnosis(d));
  CHECK(d.layers.size() == net.layers.size());
  CHECK(d.first_bad == -1);
  CHECK(d.fault == Fault::None);
  CHECK_FALSE(d.rerun);
  for (const auto& c : d.layers) {
    CAPTURE(c.name);
    CHECK(c.ok());
    if (c.kind == "conv") CHECK((c.api == "legacy" || c.api == "graph"));
  }
}

TEST_CASE("a NaN in layer2.0.conv1's weights is found there and called a data fault") {
  auto net = random_resnet(named_resnet("resnet18", 10), 22);
  const auto layer = std::find_if(net.layers.begin(), net.layers.end(),
                                  [](const Layer& l) { return l.name == "layer2.0.conv1"; });
  REQUIRE(layer != net.layers.end());
  layer->weight[7] = std::numeric_limits<float>::quiet_NaN();
  const auto d = diagnose(net, 64, 64, random_image(64, 64, 3));
  MESSAGE(format_diagnosis(d));
  REQUIRE(d.first_bad >= 0);
  CHECK(d.layers[size_t(d.first_bad)].name == "layer2.0.conv1");
  CHECK(d.layers[size_t(d.first_bad)].non_finite);
  CHECK(d.fault == Fault::Data);
  CHECK(d.weights_non_finite);
  CHECK_FALSE(d.input_non_finite);
  CHECK(d.rerun);
  CHECK(d.safe.api == "legacy");
  CHECK_FALSE(d.safe.ok());  // the safe algorithm is just as wrong: the fault is in the data
  for (int i = 0; i < d.first_bad; ++i) CHECK(d.layers[size_t(i)].ok());
  CHECK(d.verdict.find("layer2.0.conv1") != std::string::npos);
}

TEST_CASE("an image of the wrong size is refused") {
  const auto net = random_resnet(named_resnet("resnet18", 10), 23);
  CHECK_THROWS_AS(diagnose(net, 64, 64, random_image(64, 63, 3)), vc::DataError);
}

TEST_SUITE_END();
