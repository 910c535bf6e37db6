// The cuDNN engine: runs a Network on one GPU for a fixed batch size.
//   stem conv + ReLU + max-pool to FP16 (our fused kernel at FP32 accuracy, stem_kernel.hpp; else cuDNN FP32, or
//   TF32 when asked, then max-pool) -> body convs in FP16 NHWC on
//   Tensor Cores (FP32 accumulation), each conv + bias (+ residual) (+ ReLU) one fused cuDNN call ->
//   global average pool to FP32 -> FP32 classifier.
// Algorithms are autotuned on the real shapes at start-up — for each FP16 layer the best legacy algorithm and the
// best graph-API plan are timed (replayed in CUDA graphs) and the faster kept — and cached on disk; activations
// live in a few reused buffers; everything is allocated in the constructor; the forward pass is captured once in a
// CUDA graph.
#pragma once
#include <cuda_fp16.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "inference/model/network.hpp"

namespace vc::inference {

// Global average pool + classifier: two kernels, or one fused kernel (engine_kernels.hpp); the same logits, bit
// for bit. Auto: the faster, timed at start-up (with autotune, and not with keep_all_values, which needs the
// pooled features), else the two kernels.
enum class HeadMode { Auto, Separate, Fused };

// Each downsample convolution (the 1x1 projection of a block's input onto the residual path) reads the same input
// as the block's first convolution and is needed only by its last: it can run beside that first convolution, on a
// second stream forked and joined inside the CUDA graph. At small batches, where one convolution fills a fraction
// of the GPU, that hides most of its time. Auto: the faster whole forward pass, both captured and timed at start-up
// (with autotune and a CUDA graph), else serial.
enum class BranchMode { Auto, Serial, Concurrent };

struct CudnnEngineOptions {
  int batch = 1;
  int device = 0;
  bool tf32_stem = false;          // allow TF32 Tensor Cores in the FP32 stem (explicit precision choice)
  bool fused_stem = true;          // strict precision: the fused stem kernel where it runs (sm_80+, 7x7/2 stem)
  HeadMode head = HeadMode::Auto;
  BranchMode branches = BranchMode::Auto;
  int max_graph_plans = 16;        // graph-API plans timed per layer (cuDNN's heuristic ranking, best first)
  // Plans whose times alone are within this fraction of a layer's fastest are decided by the whole forward pass's
  // replay time (with autotune and a CUDA graph): a layer's time alone misses how it runs between its neighbours.
  // On the H200 (2026-12-04, docs/BENCHMARKS.md) it kept 0-3 swaps per first start and shortened the pass by up
  // to 1.2 %, for 0.1-4 s more of a first start (cached starts run the settled plans). 0 = each layer's fastest alone.
  float tie_tolerance = 0.03f;
  bool autotune = true;            // time the algorithms (else cuDNN's heuristic choice)
  // With autotune: start at once — what the caches hold (a graph plan only where its compiled plan is kept, or
  // cuDNN builds it without compiling), cuDNN's heuristic legacy algorithm for every other layer; nothing timed,
  // compiled or saved. EngineReport::untuned_layers counts the layers an engine built without `quick` would tune.
  bool quick = false;
  const std::atomic<bool>* cancel = nullptr;  // set: the tuning gives up between two layers or plans (InternalError)
  // Threads compiling the graph plans a first start tunes, beside each other (plan_compiler.hpp; 0 = half the cores,
  // at most 8; 1 = one after the other, as each layer is tuned).
  int compile_threads = 0;
  std::string cache_path;          // algorithm cache file ("" = none); compiled plans beside it (plan_cache.hpp)
  size_t workspace_limit = size_t(256) << 20;
  bool deterministic = false;      // deterministic algorithms only
  bool cuda_graph = true;
  bool keep_all_values = false;    // one buffer per value (tests read any intermediate value)
  std::map<std::string, int> algorithms;  // per-layer override: layer name -> cudnnConvolutionFwdAlgo_t
  // Convolutions run the most stable way instead of the fastest (legacy API, implicit GEMM, no Tensor Cores):
  // diagnose.hpp re-runs a failing layer so to tell a faulty algorithm from faulty data.
  std::set<std::string> safe_layers;
};

struct ConvChoice {
  std::string layer;
  std::string api;                 // "legacy" (cudnnConvolutionBiasActivationForward) or "graph" (cuDNN graph API)
  int algorithm = -1;              // legacy algorithm, or graph plan index
  std::string math;                // "fp16-tensor-op", "fp32-fma", "tf32-tensor-op"
  size_t workspace = 0;
  float tuned_ms = 0;              // as timed at start-up (0 when not tuned)
  float legacy_ms = 0, graph_ms = 0;  // the two APIs' best times when both were timed
  std::string source;              // "autotune", "cache", "heuristic", "override", "safe"
};

// EngineReport::stem: what ran the stem.
inline constexpr const char* kStemFused = "fused 2xFP16 kernel";
inline constexpr const char* kStemCudnnFp32 = "cuDNN FP32";
inline constexpr const char* kStemCudnnTf32 = "cuDNN TF32";
// EngineReport::branches: how the downsample convolutions ran.
inline constexpr const char* kBranchesSerial = "serial";
inline constexpr const char* kBranchesConcurrent = "concurrent";
// EngineReport::head: what ran the global average pool and the classifier.
inline constexpr const char* kHeadSeparate = "pool + classifier kernels";
inline constexpr const char* kHeadFused = "fused pool + classifier kernel";

struct EngineReport {
  std::string gpu;
  std::string stem;                // kStemFused, kStemCudnnFp32 or kStemCudnnTf32
  std::string stem_note;           // why the fused kernel did not run ("" when it did)
  std::string head;                // kHeadSeparate or kHeadFused
  float head_separate_ms = 0, head_fused_ms = 0;  // as timed at start-up (HeadMode::Auto; 0 when not timed)
  std::string branches;            // kBranchesSerial or kBranchesConcurrent
  int branch_convs = 0;            // downsample convolutions that can run beside their block's first convolution
  float serial_ms = 0, concurrent_ms = 0;  // the whole forward pass both ways (BranchMode::Auto; 0 when not timed)
  size_t weight_bytes = 0;
  size_t activation_bytes = 0;     // with buffer reuse
  size_t naive_activation_bytes = 0;  // one buffer per layer output
  size_t workspace_bytes = 0;
  int activation_buffers = 0;
  double setup_seconds = 0;
  double tuning_seconds = 0;       // choosing every convolution's algorithm (cache hits make it ~0)
  double plan_build_seconds = 0;   // of which compiling graph-API plans
  int compile_threads = 1;         // that compiled them (CudnnEngineOptions::compile_threads)
  // Near-tied plans settled on the whole forward pass (CudnnEngineOptions::tie_tolerance; 0 when none were tuned):
  int tie_groups = 0;              // layer shapes with near-tied plans
  int tie_trials = 0, tie_swaps = 0;  // forward passes timed with another plan; swaps kept
  float ties_before_ms = 0, ties_after_ms = 0;  // the forward pass before and after
  double tie_seconds = 0;
  int cache_hits = 0, cache_misses = 0;
  int plans_loaded = 0, plans_compiled = 0;  // graph plans: loaded compiled (plan_cache.hpp), compiled by cuDNN
  int untuned_layers = 0;          // CudnnEngineOptions::quick: layers running a stand-in until tuned
  std::vector<ConvChoice> convs;
};

// One step of the forward pass as the engine runs it, timed alone (CudnnEngine::time_steps).
struct StepTime {
  std::string name;  // the layer's name, "input to FP32" (the cuDNN stem's input), "conv1 + maxpool (fused)", …
  int layer = -1;    // the (first) network layer it computes; -1 for the input conversion
  double ms = 0;     // median milliseconds
};

class CudnnEngine {
 public:
  // `network` must outlive the engine. Throws UnavailableError (no such GPU, out of memory: needed vs free), InternalError (CUDA/cuDNN failures),
  // DataError (input too small for the network).
  CudnnEngine(const Network& network, int height, int width, const CudnnEngineOptions& options);
  ~CudnnEngine();
  CudnnEngine(const CudnnEngine&) = delete;
  CudnnEngine& operator=(const CudnnEngine&) = delete;

  [[nodiscard]] int batch() const;
  [[nodiscard]] int height() const;
  [[nodiscard]] int width() const;
  [[nodiscard]] int input_channels() const;
  [[nodiscard]] int num_classes() const;
  [[nodiscard]] cudaStream_t stream() const;
  // Device input: batch x height x width x input_channels FP16 (NHWC). Write it on stream() before enqueue().
  [[nodiscard]] __half* input() const;
  // Device logits: batch x num_classes FP32, valid after enqueue() completes.
  [[nodiscard]] const float* logits() const;

  // Runs the forward pass on stream() (a CUDA graph replay when captured). Asynchronous.
  void enqueue();
  // Synchronous convenience: host FP16 input -> host logits.
  std::vector<float> run(const uint16_t* host_input);
  // Copies value `id` to the host as float (needs keep_all_values unless it is the input or the logits).
  // With the fused stem the stem conv's own output never exists, nor the pooled features with the fused head:
  // reading those throws InternalError.
  std::vector<float> read_value(int id);

  [[nodiscard]] const EngineReport& report() const;
  // Times every step of the forward pass alone, eagerly, in order, each on its own inputs (median of `loops`
  // timed loops). For profiling (bench).
  std::vector<StepTime> time_steps(int loops = 7);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vc::inference
