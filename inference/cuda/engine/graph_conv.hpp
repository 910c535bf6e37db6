// A convolution + bias (+ residual) (+ ReLU) as one cuDNN graph-API operation graph (through the header-only
// cudnn_frontend), FP16 NHWC with FP32 accumulation. At small batches cuDNN's graph-API engines are several times
// faster than the legacy API's algorithms; the engine times both per layer and keeps the faster (cudnn_engine.cpp).
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace vc::inference {

struct GraphConvShape {
  int batch, in_h, in_w, in_c, out_h, out_w, out_c, kernel, stride, pad, groups;
  bool residual, relu;
};

class GraphConv {
 public:
  // Builds the operation graph and asks cuDNN's heuristics for candidate plans (none are compiled yet).
  // Throws vc::InternalError when cuDNN cannot express the graph.
  GraphConv(cudnnHandle_t handle, const GraphConvShape& shape, bool deterministic);
  ~GraphConv();
  GraphConv(const GraphConv&) = delete;
  GraphConv& operator=(const GraphConv&) = delete;

  [[nodiscard]] int candidate_count() const;
  // Compiles candidate `index`; false when cuDNN cannot build it (it is then skipped).
  bool build(int index);
  [[nodiscard]] bool is_built(int index) const;
  [[nodiscard]] int64_t workspace_size(int index) const;
  // Runs candidate `index` (asynchronously on the handle's stream). z may be null without a residual.
  void execute(int index, const void* x, const void* w, const void* bias, const void* z, void* y, void* workspace) const;
  [[nodiscard]] std::string plan_name(int index) const;
  // Whether cuDNN compiles candidate `index`'s kernel when it is built (a runtime-fusion engine: the costly builds,
  // and the only ones cuDNN can serialize). Known before building.
  [[nodiscard]] bool compiles_at_runtime(int index) const;

  // Compiled plans kept across starts (plan_cache.hpp): candidate `index`, built, as cuDNN serializes it; empty when
  // cuDNN cannot (engines that need no compiling).
  [[nodiscard]] std::vector<uint8_t> serialize(int index);
  // A graph holding only the plan `serialize` gave, as candidate `index` (the number it had when it was tuned), built
  // without compiling. Throws vc::InternalError when cuDNN refuses it (another GPU or library).
  static std::unique_ptr<GraphConv> load(cudnnHandle_t handle, const std::vector<uint8_t>& plan, int index);
  // Candidate `index` of this graph from the plan `serialize` gave for it (compiled elsewhere: another thread, or an
  // earlier start): build(index) is then true without compiling, and the candidate runs that plan (one built here
  // already is kept). False (nothing changed) when cuDNN refuses it.
  bool adopt(int index, const std::vector<uint8_t>& plan);

 private:
  GraphConv();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vc::inference
