// Architecture from weights, the explicit-architecture check, labels, and the CPU reference engine against
// PyTorch's logits and a naive convolution.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <fstream>

#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "inference/cpu/cpu_engine.hpp"
#include "inference/cpu/cpu_ops.hpp"
#include "inference/model/half.hpp"
#include "inference/postprocess.hpp"
#include "inference/model/model_card.hpp"
#include "inference/model/resnet.hpp"
#include "test_helpers.hpp"

using namespace vc;
using namespace vc::inference;
using vc::test::fixture;

TEST_SUITE_BEGIN("resnet");

TEST_CASE("every standard architecture is recognized from its tensor shapes") {
  for (const auto& name : known_resnets()) {
    CAPTURE(name);
    for (int classes : {1000, 10}) {
      const auto spec = named_resnet(name, classes);
      const auto inferred = infer_resnet(expected_tensors(spec), "synthetic");
      CHECK(inferred == spec);
      CHECK(inferred.name() == name);
      CHECK(inferred.num_classes == classes);
    }
  }
  // Tensor counts that torchvision's state_dicts have (without num_batches_tracked): resnet18 102, resnet50 267.
  CHECK(expected_tensors(named_resnet("resnet18", 1000)).size() == 102);
  CHECK(expected_tensors(named_resnet("resnet50", 1000)).size() == 267);
  CHECK(expected_tensors(named_resnet("resnet152", 1000)).at("layer3.35.conv3.weight") == std::vector<int64_t>{1024, 256, 1, 1});
  CHECK(expected_tensors(named_resnet("resnext50_32x4d", 1000)).at("layer1.0.conv2.weight") == std::vector<int64_t>{128, 4, 3, 3});
  CHECK(expected_tensors(named_resnet("wide_resnet50_2", 1000)).at("layer4.0.conv2.weight") == std::vector<int64_t>{1024, 1024, 3, 3});
}

TEST_CASE("shapes that are not a ResNet, or not the named one, are rejected with expected vs found") {
  auto shapes = expected_tensors(named_resnet("resnet50", 1000));
  CHECK_THROWS_WITH_AS(check_tensors(named_resnet("resnet101", 1000), shapes, "w.safetensors"),
                       doctest::Contains("layer3.6.conv1.weight: expected [256, 1024, 1, 1], missing"), DataError);
  shapes["layer2.1.conv2.weight"] = {128, 128, 5, 5};
  CHECK_THROWS_WITH_AS(check_tensors(named_resnet("resnet50", 1000), shapes, "w.safetensors"),
                       doctest::Contains("layer2.1.conv2.weight: expected [128, 128, 3, 3], found [128, 128, 5, 5]"),
                       DataError);
  shapes.erase("conv1.weight");
  CHECK_THROWS_WITH_AS(infer_resnet(shapes, "w.safetensors"), doctest::Contains("'conv1.weight' is missing"), DataError);
  shapes["conv1.0.weight"] = {32, 3, 3, 3};
  CHECK_THROWS_WITH_AS(infer_resnet(shapes, "w.safetensors"), doctest::Contains("deep stem"), DataError);
  CHECK_THROWS_AS(named_resnet("resnet51", 10), ConfigError);
}

TEST_CASE("a weights file loads as auto and is rejected under a wrong explicit architecture") {
  const auto file = SafetensorsFile::open(fixture("basic_narrow.safetensors"));
  const auto net = build_resnet(file);
  CHECK(net.num_classes == 10);
  CHECK(net.architecture.find("basic blocks 2-2-2-2") != std::string::npos);
  // stem, maxpool, 8 blocks x 2 convs + 3 downsamples, avgpool, fc
  CHECK(net.layers.size() == 1 + 1 + 16 + 3 + 1 + 1);
  CHECK_THROWS_WITH_AS(build_resnet(file, "resnet18"), doctest::Contains("conv1.weight: expected [64, 3, 7, 7], found [8, 3, 7, 7]"),
                       DataError);
}

TEST_CASE("labels must match the class count") {
  const auto dir = std::filesystem::temp_directory_path();
  std::ofstream(dir / "vc-labels-9.txt") << "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
  std::ofstream(dir / "vc-labels-blank.txt") << "a\n\nb\n";
  config::Config c;
  c.model.weights = fixture("basic_narrow.safetensors");
  c.model.labels = (dir / "vc-labels-9.txt").string();
  CHECK_THROWS_WITH_AS(load_model(c), doctest::Contains("has 9 labels but"), DataError);
  CHECK_THROWS_WITH_AS(load_labels((dir / "vc-labels-blank.txt").string()), doctest::Contains(":2: empty label"), DataError);
  CHECK_THROWS_AS(load_labels("/nonexistent/labels.txt"), NoInputError);
}

TEST_CASE("the CPU engine reproduces PyTorch's logits on every fixture") {
  for (const char* name : {"basic_narrow", "bottleneck_narrow", "grouped_narrow"}) {
    CAPTURE(name);
    const CpuEngine engine(build_resnet(SafetensorsFile::open(fixture(std::string(name) + ".safetensors"))), 2);
    const auto io = SafetensorsFile::open(fixture(std::string(name) + ".io.safetensors"));
    const auto* input = io.find("input");
    REQUIRE(input != nullptr);
    const int n = int(input->shape[0]), h = int(input->shape[1]), w = int(input->shape[2]);
    const auto expected = io.to_float(*io.find("logits"));
    const auto logits = engine.forward(io.to_float(*input), n, h, w);
    const double err = vc::test::relative_error(logits, expected);
    MESSAGE(std::string(name) << ": relative error " << err);
    CHECK(err <= 1e-4);
    const int classes = engine.network().num_classes;
    for (int i = 0; i < n; ++i) {
      CHECK(vc::test::argmax({logits.data() + i * classes, size_t(classes)}) ==
            vc::test::argmax({expected.data() + i * classes, size_t(classes)}));
    }
  }
}

namespace {

// A naive direct convolution in double: the reference for cpu::conv2d.
std::vector<float> naive_conv(const std::vector<float>& in, int n, const Shape& s, const Layer& l, const float* res) {
  const int oh = (s.h + 2 * l.pad - l.kernel) / l.stride + 1, ow = (s.w + 2 * l.pad - l.kernel) / l.stride + 1;
  const int cin_g = l.in_channels / l.groups, cout_g = l.out_channels / l.groups;
  std::vector<float> out(size_t(n) * oh * ow * l.out_channels);
  for (int b = 0; b < n; ++b)
    for (int y = 0; y < oh; ++y)
      for (int x = 0; x < ow; ++x)
        for (int o = 0; o < l.out_channels; ++o) {
          double acc = l.bias[o];
          const int g = o / cout_g;
          for (int ky = 0; ky < l.kernel; ++ky)
            for (int kx = 0; kx < l.kernel; ++kx) {
              const int iy = y * l.stride - l.pad + ky, ix = x * l.stride - l.pad + kx;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              for (int i = 0; i < cin_g; ++i) {
                acc += double(in[((size_t(b) * s.h + iy) * s.w + ix) * s.c + g * cin_g + i]) *
                       l.weight[((size_t(o) * l.kernel + ky) * l.kernel + kx) * cin_g + i];
              }
            }
          const size_t idx = ((size_t(b) * oh + y) * ow + x) * l.out_channels + o;
          if (res) acc += res[idx];
          out[idx] = float(l.relu ? std::max(acc, 0.0) : acc);
        }
  return out;
}

}  // namespace

TEST_CASE("cpu::conv2d matches a naive convolution for every kernel, stride, padding and group count") {
  struct Case {
    int k, stride, pad, groups, cin, cout, h, w;
    bool relu, residual;
  };
  const Case cases[] = {{7, 2, 3, 1, 3, 8, 17, 23, true, false}, {3, 1, 1, 1, 16, 16, 9, 9, true, true},
                        {3, 2, 1, 4, 16, 8, 10, 7, true, false}, {1, 1, 0, 1, 24, 40, 5, 6, false, true},
                        {1, 2, 0, 1, 8, 16, 7, 7, false, false}, {3, 1, 1, 8, 16, 16, 1, 1, true, true},
                        {3, 1, 1, 32, 64, 64, 6, 5, true, false}};
  for (const auto& c : cases) {
    CAPTURE(c.k);
    CAPTURE(c.groups);
    Layer l;
    l.kernel = c.k;
    l.stride = c.stride;
    l.pad = c.pad;
    l.groups = c.groups;
    l.in_channels = c.cin;
    l.out_channels = c.cout;
    l.relu = c.relu;
    l.weight = vc::test::random_floats(size_t(c.cout) * c.k * c.k * (c.cin / c.groups));
    l.bias = vc::test::random_floats(c.cout);
    const int n = 2;
    const Shape s{c.h, c.w, c.cin};
    const auto in = vc::test::random_floats(size_t(n) * c.h * c.w * c.cin);
    const int oh = (c.h + 2 * c.pad - c.k) / c.stride + 1, ow = (c.w + 2 * c.pad - c.k) / c.stride + 1;
    const auto res = vc::test::random_floats(size_t(n) * oh * ow * c.cout);
    std::vector<float> out(res.size(), NAN);
    cpu::conv2d(in.data(), n, s, l, c.residual ? res.data() : nullptr, out.data(), 2);
    const auto ref = naive_conv(in, n, s, l, c.residual ? res.data() : nullptr);
    CHECK(vc::test::relative_error(out, ref) < 1e-5);
  }
}

TEST_CASE("end to end: weights file -> Classifier (CPU) -> top-k labels") {
  const auto labels_path = (std::filesystem::temp_directory_path() / "vc-e2e-labels.txt").string();
  {
    std::ofstream labels(labels_path);
    for (int i = 0; i < 10; ++i) labels << "item " << i << "\n";
  }
  config::Config cfg;
  cfg.model.weights = fixture("bottleneck_narrow.safetensors");
  cfg.model.labels = labels_path;
  cfg.model.input_size = 64;
  cfg.model.resize = config::Resize::Stretch;
  cfg.model.mean = {0, 0, 0};
  cfg.model.std = {1, 1, 1};
  cfg.inference.device = config::Device::Cpu;
  cfg.inference.batch_size = 2;
  auto classifier = Classifier::create(cfg);
  CHECK(classifier->engine_name().find("CPU") != std::string::npos);
  REQUIRE(classifier->labels().size() == 10);

  // Two random 64x64 RGB frames: with stretch to 64x64 and mean 0 / std 1 the model input is exactly pixel/255.
  const int n = 2, s = 64;
  std::vector<std::vector<uint8_t>> pixels(n);
  std::vector<FrameView> frames;
  std::vector<float> direct_input;
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& p : pixels) {
    p.resize(size_t(s) * s * 3);
    for (auto& v : p) {
      v = uint8_t(byte(vc::test::rng()));
      direct_input.push_back(round_to_half(v / 255.f));
    }
    frames.push_back(packed_frame_view(PixelFormat::RGB, s, s, p.data()));
  }
  const auto logits = classifier->classify(frames);
  REQUIRE(logits.size() == 2);
  const CpuEngine engine(build_resnet(SafetensorsFile::open(cfg.model.weights)), 1);
  const auto expected = engine.forward(direct_input, n, s, s);
  for (int i = 0; i < n; ++i) {
    const auto top = top_k(softmax(logits[i]), 3, classifier->labels());
    const auto want = top_k(softmax({expected.data() + i * 10, 10}), 3, classifier->labels());
    REQUIRE(top.size() == 3);
    CHECK(top[0].label == "item " + std::to_string(want[0].index));
    CHECK(top[0].score == doctest::Approx(want[0].score).epsilon(1e-4));
    CHECK(top[0].score >= top[1].score);
  }
}

TEST_CASE("a model file's card sets its preprocessing and labels unless the configuration says otherwise") {
  ResNetSpec spec = named_resnet("resnet18", 3);
  spec.base_channels = 8;
  spec.width_per_group = 8;
  spec.blocks = {1, 1, 1, 1};
  ModelCard card;
  card.input_size = 96;
  card.resize = "letterbox";
  card.mean = std::array<double, 3>{0.5, 0.5, 0.5};
  card.std = std::array<double, 3>{0.25, 0.25, 0.25};
  card.labels = {"cat", "dog", "bird"};
  const auto path = (std::filesystem::temp_directory_path() / "vc-card.safetensors").string();
  write_safetensors(path, random_resnet_tensors(spec, 3), model_card_metadata(card));
  config::Config c;
  c.model.weights = path;
  auto loaded = load_model(c);
  CHECK(loaded.settings.model.input_size == 96);
  CHECK(loaded.settings.model.resize == config::Resize::Letterbox);
  CHECK(loaded.settings.model.std[0] == doctest::Approx(0.25));
  CHECK(loaded.settings.labels == std::vector<std::string>{"cat", "dog", "bird"});
  CHECK(std::any_of(loaded.settings.provenance.begin(), loaded.settings.provenance.end(),
                    [](const std::string& l) { return l == "model.input_size = 96 (the model file)"; }));
  // An explicit key wins over the card.
  c.model.input_size = 64;
  c.explicit_keys["model.input_size"] = "test";
  loaded = load_model(c);
  CHECK(loaded.settings.model.input_size == 64);
  CHECK(loaded.settings.model.resize == config::Resize::Letterbox);
  // A malformed card is a data error naming the key.
  write_safetensors(path, random_resnet_tensors(spec, 3), {{"input_size", "big"}});
  CHECK_THROWS_WITH_AS(load_model(c), doctest::Contains("metadata 'input_size'"), DataError);
  write_safetensors(path, random_resnet_tensors(spec, 3), {{"labels", "[\"a\", \"b\"]"}});
  c.model.labels.clear();
  CHECK_THROWS_WITH_AS(load_model(c), doctest::Contains("has 2 labels but"), DataError);
  // A file that says its weights are random (export_model.py --random) is flagged (and the load warns).
  CHECK(!loaded.settings.random_weights);
  write_safetensors(path, random_resnet_tensors(spec, 3), {{"weights", "random"}});
  CHECK(load_model(c).settings.random_weights);
  std::filesystem::remove(path);
}

TEST_CASE("weights with NaN or Inf are rejected at load, naming the tensor") {
  ResNetSpec spec = named_resnet("resnet18", 3);
  spec.base_channels = 8;
  spec.width_per_group = 8;
  spec.blocks = {1, 1, 1, 1};
  auto tensors = random_resnet_tensors(spec, 5);
  for (auto& t : tensors) {
    if (t.name == "layer2.0.conv1.weight") t.values[7] = std::numeric_limits<float>::quiet_NaN();
  }
  const auto path = (std::filesystem::temp_directory_path() / "vc-nan.safetensors").string();
  write_safetensors(path, tensors);
  config::Config c;
  c.model.weights = path;
  CHECK_THROWS_WITH_AS(load_model(c), doctest::Contains("tensor 'layer2.0.conv1.weight' holds NaN at element 7"), DataError);
  for (auto& t : tensors) {
    if (t.name == "layer2.0.conv1.weight") t.values[7] = 0;
    if (t.name == "fc.bias") t.values[1] = std::numeric_limits<float>::infinity();
  }
  write_safetensors(path, tensors);
  CHECK_THROWS_WITH_AS(load_model(c), doctest::Contains("'fc.bias' holds Inf"), DataError);
  std::filesystem::remove(path);
}

TEST_CASE("a forward pass stops between two layers once its interrupt flag is set") {
  CpuEngine engine(build_resnet(SafetensorsFile::open(fixture("basic_narrow.safetensors"))), 1);
  const auto input = vc::test::random_floats(size_t(2) * 64 * 64 * 3);
  std::atomic<bool> stop{false};
  engine.set_interrupt(&stop);
  CHECK(engine.forward(input, 2, 64, 64).size() == 20);  // (not set: a whole pass)
  stop = true;
  CHECK_THROWS_AS((void)engine.forward(input, 2, 64, 64), Interrupted);
}

TEST_SUITE_END();
