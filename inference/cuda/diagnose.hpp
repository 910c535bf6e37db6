// Layer-by-layer diagnosis of the cuDNN engine on one image: each layer's GPU output against the CPU
// reference layer run on the GPU's own input, the first layer that is non-finite or beyond its error bound,
// and whether its fault is cuDNN's algorithm (the most stable algorithm gets the layer right) or the data
// (its weights or its input: the stable algorithm fails too). A library function; the CLI prints
// format_diagnosis().
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inference/model/network.hpp"

namespace vc::inference {

struct LayerCheck {
  std::string name;         // e.g. "layer2.0.conv1"
  std::string kind;         // "conv", "max-pool", "avg-pool", "fc"
  std::string api;          // convolutions: "legacy" or "graph" (EngineReport::convs); other layers: "kernel"
  std::string math;         // e.g. "fp16-tensor-op", "fp16-graph", "fp32-fma"; other layers: "fp32"
  int algorithm = -1;       // convolutions: the cuDNN algorithm or graph-API plan
  double error = 0;         // ||gpu - cpu|| / ||cpu|| (infinite when the GPU output holds NaN)
  double bound = 0;         // FP32 layers 2e-5, FP16 body convolutions 1e-2, max-pool 5e-4 (FP16 output)
  bool non_finite = false;  // the GPU output holds NaN or Inf
  [[nodiscard]] bool ok() const { return !non_finite && error <= bound; }
};

enum class Fault {
  None,       // every layer within its bound
  Algorithm,  // the first bad convolution is right with the safe algorithm: cuDNN's chosen one is at fault
  Data,       // still wrong with the safe algorithm (or a non-convolution with non-finite weights or input)
  Undetermined,  // a non-convolution layer wrong on finite data: no second implementation to compare with
};

struct Diagnosis {
  std::string gpu;
  std::vector<LayerCheck> layers;  // network order
  int first_bad = -1;              // index in layers of the first layer that is not ok(), -1 when none is
  Fault fault = Fault::None;
  bool weights_non_finite = false;  // the first bad layer's weights or bias hold NaN/Inf
  bool input_non_finite = false;    // its input, as the GPU computed it, holds NaN/Inf
  bool rerun = false;               // the first bad layer was a convolution and was re-run:
  LayerCheck safe;      //   its check with the safe choice (legacy API, implicit GEMM, no Tensor Cores)
  std::string verdict;  // one sentence for people
};

struct DiagnoseOptions {
  int device = 0;
  std::string cache_path;  // algorithm cache shared with the engine ("" = tune in memory)
};

// Runs `network` at height x width on `image` (height x width x input_channels FP16 bits, NHWC,
// preprocessed): batch 1, every value kept, the stem unfused (so that the stem conv is judged alone), the
// head as two kernels. Throws DataError for an image of the wrong size, and whatever CudnnEngine throws.
Diagnosis diagnose(const Network& network, int height, int width, const std::vector<uint16_t>& image,
                   const DiagnoseOptions& options = {});

const char* fault_name(Fault fault);
// The per-layer table and the verdict, as text.
std::string format_diagnosis(const Diagnosis& diagnosis);

}  // namespace vc::inference
