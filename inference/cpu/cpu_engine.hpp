// The CPU reference engine: runs a Network in FP32 on NHWC tensors. The oracle for the cuDNN engine, and the
// engine the app falls back to where there is no GPU.
#pragma once
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "inference/model/network.hpp"

namespace vc::inference {

class CpuEngine {
 public:
  // threads: 0 = all cores.
  CpuEngine(Network network, int threads = 0);

  [[nodiscard]] const Network& network() const { return network_; }

  // `input` is n images of h x w x network().input_channels, NHWC, as FP16 bits (what preprocessing makes)
  // or float. Returns n x num_classes logits. Throws vc::DataError on a wrong input size.
  [[nodiscard]] std::vector<float> forward(std::span<const uint16_t> input_fp16, int n, int h, int w) const;
  [[nodiscard]] std::vector<float> forward(std::span<const float> input, int n, int h, int w) const;

  // Every value of the graph (index = value id), for layer-by-layer comparisons.
  [[nodiscard]] std::vector<std::vector<float>> forward_all(std::span<const float> input, int n, int h, int w) const;

  // A flag that, once set, stops a forward pass between two layers (it throws Interrupted): a stop request need not
  // wait for a batch that takes seconds on a CPU. Null: never stopped.
  void set_interrupt(const std::atomic<bool>* flag) { interrupt_ = flag; }

 private:
  std::vector<std::vector<float>> run(std::span<const float> input, int n, int h, int w, bool keep_all) const;

  Network network_;
  int threads_;
  const std::atomic<bool>* interrupt_ = nullptr;
};

}  // namespace vc::inference
