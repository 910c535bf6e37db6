// Compiling the graph-API plans a first start tunes, on several threads at once. cuDNN compiles each runtime-fusion
// plan's kernel on the CPU when the plan is built (on an H100, 2026-12-07: ResNet-50's 44 plans took 11.2 s one after
// the other, most of a first start). Each thread here builds the layer shapes' operation graphs on a cuDNN handle of
// its own (a handle is never used by two threads at once), compiles its share of the candidates and serializes them;
// the engine then adopts them (GraphConv::adopt) and only times them.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "inference/cuda/engine/graph_conv.hpp"

namespace vc::inference {

struct PlanShape {
  std::string key;       // the layer shape's graph-API cache key
  GraphConvShape shape;
};

struct CompiledPlan {
  std::string key;       // PlanShape::key
  int index = 0;         // the candidate (cuDNN's heuristic rank)
  std::vector<uint8_t> plan;  // as GraphConv::serialize gives it
};

// Compiles candidates 0..max_plans-1 of every shape whose kernels cuDNN compiles at runtime, on `threads` threads
// (each with its own cuDNN handle on `device`). Candidates that need no compiling, or fail to build or serialize, are
// left out (the engine builds them itself). Stops taking candidates once *cancel is set. Never throws for a
// candidate; throws vc::InternalError only when a thread cannot get a cuDNN handle.
std::vector<CompiledPlan> compile_plans(int device, const std::vector<PlanShape>& shapes, int max_plans,
                                        bool deterministic, int threads, const std::atomic<bool>* cancel);

// The threads compile_plans uses by default: half of this machine's cores (the other half serves the streams while a
// start tunes in the background), 1 to 8.
int default_compile_threads();

}  // namespace vc::inference
