// infer_tensors: runs a model on preprocessed tensors — for checking an exported model against PyTorch on exactly
// the same inputs. Input: a safetensors file with "input", NHWC [N, H, W, C] (F16 or F32); output: "logits" F32.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/cpu/cpu_engine.hpp"
#include "inference/cuda/engine/cudnn_engine.hpp"
#include "inference/model/half.hpp"
#include "inference/model/resnet.hpp"
#include "inference/model/safetensors.hpp"

using namespace vc::inference;

int main(int argc, char** argv) {
  CLI::App app{"infer_tensors: model + NHWC input tensors -> logits"};
  std::string model, input, output, device = "cuda";
  app.add_option("--model", model, "weights (.safetensors)")->required();
  app.add_option("--input", input, "safetensors with 'input' [N,H,W,C]")->required();
  app.add_option("--output", output, "where to write 'logits' [N,classes]")->required();
  app.add_option("--device", device, "cuda or cpu")->check(CLI::IsMember({"cuda", "cpu"}));
  CLI11_PARSE(app, argc, argv);
  vc::log::set_level("warn");
  try {
    const auto net = build_resnet(SafetensorsFile::open(model));
    const auto io = SafetensorsFile::open(input);
    const auto* t = io.find("input");
    if (!t || t->shape.size() != 4) throw vc::DataError(input + ": needs an 'input' tensor [N,H,W,C]");
    const int n = int(t->shape[0]), h = int(t->shape[1]), w = int(t->shape[2]);
    const auto values = io.to_float(*t);
    std::vector<float> logits;
    if (device == "cpu") {
      logits = CpuEngine(net, 0).forward(values, n, h, w);
    } else {
      CudnnEngineOptions o;
      o.batch = n;
      CudnnEngine engine(net, h, w, o);
      std::vector<uint16_t> fp16(values.size());
      for (size_t i = 0; i < values.size(); ++i) fp16[i] = float_to_half(values[i]);
      logits = engine.run(fp16.data());
    }
    write_safetensors(output, {{"logits", DType::F32, {n, net.num_classes}, logits}});
    fmt::print("{}: {} on {} images {}x{} ({}) -> {}\n", model, net.architecture, n, h, w, device, output);
  } catch (const vc::Error& e) {
    fmt::print(stderr, "infer_tensors: {}\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
