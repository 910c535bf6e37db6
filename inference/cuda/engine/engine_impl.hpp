// The cuDNN engine's inside, shared by the files that each do one of its jobs:
//   engine_setup.cpp   plan building: the network's shape checked, values planned into reused buffers, memory
//                      checked and allocated, convolutions described, weights uploaded, workspaces sized
//   engine_tuning.cpp  choosing: each convolution's legacy algorithm and graph-API plan timed and cached, near-tied
//                      plans settled on the whole forward pass, the head and the branch mode timed
//   engine_run.cpp     execution: the forward pass as steps, run eagerly or captured in a CUDA graph, and the
//                      public CudnnEngine calls
// Private to inference/cuda/engine/.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/logging.hpp"
#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/engine/algo_cache.hpp"
#include "inference/cuda/engine/cudnn_engine.hpp"
#include "inference/cuda/engine/graph_conv.hpp"
#include "inference/cuda/engine/plan_cache.hpp"
#include "inference/cuda/engine/stem_kernel.hpp"

namespace vc::inference {

using EngineClock = std::chrono::steady_clock;
inline double seconds_since(EngineClock::time_point t) {
  return std::chrono::duration<double>(EngineClock::now() - t).count();
}

// One buffer per value, or a value's place in a shared pool.
struct Value {
  Shape shape;
  bool fp32 = false;
  bool absent = false;  // never written: the stem conv's output with the fused stem, the pooled features with the
                        // fused head
  void* ptr = nullptr;
  [[nodiscard]] size_t bytes(int batch) const { return size_t(batch) * size_t(shape.elements()) * (fp32 ? 4 : 2); }
};

struct CudnnEngine::Impl {
  // A convolution as cuDNN runs it.
  struct Conv {
    const Layer* layer = nullptr;
    bool fp32 = false;
    TensorDesc x_desc, y_desc, bias_desc;
    FilterDesc w_desc;
    ConvDesc conv_desc;
    ActivationDesc act_desc;
    DeviceBuffer<uint8_t> weight, bias;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    size_t workspace = 0;
    const void* x = nullptr;
    void* y = nullptr;
    const void* z = nullptr;  // residual, or null
    std::unique_ptr<GraphConv> graph;  // set when the graph-API plan `plan` runs this layer
    int plan = -1;
    std::string graph_key;             // its graph-API cache key (FP16 layers)
    bool plan_kept = false;            // `plan` was loaded from the plan cache, or saved there
    size_t trial_workspace = 0;  // the most any of its tied plans needs (the buffers hold it until settle_ties)
  };
  // Graph plans as fast as a layer's fastest alone: (plan index, ms).
  using TiedPlans = std::vector<std::pair<int, float>>;
  // Layers of one shape (one cache entry) whose tuning left near-tied plans: settle_ties tries each in all of them.
  struct TiedGroup {
    std::string cache_key;
    int tuned = -1;             // the plan the layer-by-layer tuning chose (every member runs it until settled)
    std::vector<size_t> convs;  // indices into convs and report.convs
    TiedPlans plans;
  };
  std::vector<TiedGroup> ties;
  std::unique_ptr<PlanCache> plan_cache;
  // Plans compiled beside each other before the layers are tuned (compile_beside), by plan key; adopted as built.
  std::map<std::string, std::vector<uint8_t>> compiled_beside;

  const Network& net;
  CudnnEngineOptions opt;
  int h, w;
  EngineReport report;
  std::shared_ptr<spdlog::logger> log = vc::log::get("inference");

  CudaStream stream;
  CudnnHandle handle;
  std::vector<Value> values;
  std::vector<DeviceBuffer<uint8_t>> activation_buffers;
  DeviceBuffer<__half> input;
  DeviceBuffer<float> stem_input;  // the FP16 input widened for the cuDNN FP32 stem
  bool stem_fused = false;         // conv + ReLU + max-pool run as one kernel of ours
  bool head_fused = false;         // global average pool + classifier as one kernel
  int multiprocessors = 0;
  std::unique_ptr<FusedStemWeights> fused_stem;
  DeviceBuffer<float> fc_weight, fc_bias, logits;
  DeviceBuffer<uint8_t> workspace;
  std::vector<std::unique_ptr<Conv>> convs;
  struct Step {
    StepTime info;  // name and layer (its ms filled by time_steps)
    std::function<void()> run;
    bool branch = false;  // a downsample convolution that may run beside the next step (BranchMode)
  };
  std::vector<Step> steps;
  bool concurrent = false;          // branch steps run on side_stream, joined after the step that follows them
  CudaStream side_stream;
  CudaEvent fork_event, join_event;
  DeviceBuffer<uint8_t> side_workspace;  // the branch convolutions' own workspace (they overlap the main one's)
  CudaGraph graph;
  CudaGraphExec graph_exec;

  // ---- plan building (engine_setup.cpp)
  Impl(const Network& network, int height, int width, const CudnnEngineOptions& options);
  // The engine runs the ResNet shape: conv stem on the input, max-pool, convolutions, global pool, classifier.
  void check_structure() const;
  // The fused stem kernel replaces half_to_float + cuDNN conv + max-pool wherever it can run.
  void choose_stem();
  // Why the fused stem cannot run ("" when it can).
  std::string fused_stem_refusal() const;
  template <typename T>
  DeviceBuffer<T> upload(const std::vector<T>& host);
  // Shapes and precisions of every value: FP32 from the stem conv and from the pool on, FP16 elsewhere.
  void plan_values();
  // The values of the body (FP16, produced by max-pool and the convolutions) share a pool of equal buffers:
  // a buffer is free again after the last layer that reads its value. The others get their own buffers.
  std::vector<int> assign_pool(int& pool_count, size_t& pool_bytes) const;
  size_t planned_activation_bytes() const;
  // Fails early, saying how much is needed, if the plan cannot fit (the workspace limit counted in full).
  void check_memory() const;
  void allocate_values();
  static void set_tensor(TensorDesc& d, cudnnDataType_t type, int n, int c, int hh, int ww);
  std::unique_ptr<Conv> make_conv(const Layer& l);
  DeviceBuffer<uint8_t> to_device_bytes(const void* host, size_t bytes);
  // The workspaces as the chosen plans need them (tuning sized them for every tied plan).
  void size_workspaces();

  // ---- choosing algorithms, plans, head and branch mode (engine_tuning.cpp)
  // Both heads give the same bits, so this is only about time: timed where it may be chosen, replayed in a CUDA
  // graph (each takes a few microseconds).
  void choose_head();
  std::string cache_key(const Conv& c, const cudaDeviceProp& prop) const;
  bool acceptable_math(const Conv& c, cudnnMathType_t m) const;
  // The first of cuDNN's ranked algorithms that ran, fits the workspace and meets the precision and determinism
  // options; null if none does.
  const cudnnConvolutionFwdAlgoPerf_t* first_usable(const Conv& c, const cudnnConvolutionFwdAlgoPerf_t* perf,
                                                     int count) const;
  void choose_algorithms(const cudaDeviceProp& prop);
  // The graph-API key of an FP16 layer's shape (cache_key + the graph API's own suffix).
  std::string graph_key(const Conv& c, const cudaDeviceProp& prop) const;
  // Before a first start tunes its layers: every candidate plan of the layer shapes it will tune that cuDNN compiles,
  // compiled on opt.compile_threads threads at once (plan_compiler.hpp) into compiled_beside.
  void compile_beside(const AlgoCache& cache, const cudaDeviceProp& prop);
  // Candidate `plan` of `g` (a graph of the shape `key`) made runnable: adopted from compiled_beside, else built here
  // (compiling it if it must: counted in the report). False if cuDNN cannot build it.
  bool build_plan(GraphConv& g, const std::string& key, int plan);
  // Throws InternalError once opt.cancel is set.
  void check_cancel() const;
  // The most stable way cuDNN runs this layer, for diagnosis: the legacy API, implicit GEMM (else its
  // precomputed-index variant, else plain GEMM, where cuDNN refuses it), no Tensor Cores: FMA for the FP32 stem,
  // default math for FP16 (Tensor-Core math only if cuDNN has none of these without). Each candidate is run
  // once: some combinations are refused only at execution.
  void choose_safe(Conv& c, ConvChoice& choice);
  // Median GPU time of one call of `fn`, in ms, as a CUDA graph runs it (gpu_timer.hpp: eager timing of a
  // small-batch convolution measures cuDNN's host overhead more than the kernel, and chose plans by it).
  // Replays of about 1 ms, 7 timed: the legacy call and tune_graph's finalists. (Choosing among all plans with
  // replays of 0.5 ms, 5 timed, picked the slower of ResNet-50's near-tied plans at batch 1 more often.)
  template <typename Fn>
  float time_on_stream(Fn fn);
  GraphConvShape graph_shape(const Conv& c) const;
  // A cached graph plan: load its compiled plan (plan_cache), else build just that plan (with opt.quick, only if that
  // needs no compiling). False (legacy is kept) if it cannot.
  bool use_graph_plan(Conv& c, int plan);
  // Saves the compiled graph plans this start chose and did not load (after settle_ties: the settled ones).
  void keep_plans();
  // Times the legacy choice against the first max_graph_plans graph-API plans: every plan with short replays, then
  // the kFinalists fastest as long as the legacy call. Keeps the fastest, and returns the finalists within
  // opt.tie_tolerance of it, for settle_ties. (Timing all 16 plans as long as the legacy call took ResNet-50's first
  // start at batch 256 from 1.9 to 21 s.)
  TiedPlans tune_graph(Conv& c, ConvChoice& choice, void* tuning_workspace);
  // Adds convs[index] to the tie group of its shape (its cache key) if this start tuned one and the layer runs the
  // group's tuned plan: its GraphConv then holds the same candidates, and its buffers are sized for the most
  // workspace any of them needs.
  void join_ties(const std::string& cache_key, size_t index);
  // Runs every layer of `group` with graph plan `plan`; false (nothing changed in the layer that failed) if a layer
  // cannot build it or it needs more workspace than was allocated.
  bool set_plan(const TiedGroup& group, int plan);
  // Settles the near-tied plans tune_graph left (a layer's time alone cannot tell them apart, the forward pass
  // can, a little: 0 to -1.2 % on the H200). For each shape in network
  // order, every tied plan is put in all its layers, the forward pass captured and its replays timed; the faster
  // pass is kept if it gains more than kTieMargin. The cache keeps the settled plan, so cached starts run it.
  void settle_ties();
  // Captures the forward pass (serial or concurrent); with BranchMode::Auto both, timed as whole graph replays,
  // and keeps the faster.
  void choose_branches();

  // ---- execution (engine_run.cpp)
  // The head's two ways, on the engine's buffers.
  void run_head(bool fused);
  void run_conv(const Conv& c, void* ws) const;
  void build_steps();
  // Layer i may run beside layer i + 1: it is a convolution reading the same input as the convolution that
  // follows it, and its output is read only as a later layer's residual (a downsample projection). Running it
  // concurrently is safe with the buffer plan (assign_pool): its output and the next convolution's are both live
  // at the next convolution, so they have different buffers, and the shared input is released only after the next
  // convolution, when the two streams have joined.
  bool is_branch(int i) const;
  bool is_branch(const Conv& c) const { return is_branch(int(c.layer - net.layers.data())); }
  // Whether `c` runs on the side stream, with its own workspace (a branch, when the side stream exists).
  bool on_side_stream(const Conv& c) const { return side_stream.get() && is_branch(c); }
  // The side stream, its events and its workspace, where there are branches to run on it.
  void prepare_branches();
  // The forward pass, eagerly or under capture: a branch step is forked onto the side stream (with the cuDNN
  // handle moved there for its call) and joined back after the step that follows it.
  void run_steps();
  // Median milliseconds of one replay of graph_exec: calls per loop sized to about 5 ms (at most 20).
  double time_graph();
  // Each step alone, replayed in a CUDA graph of as many copies as make about 2 ms (at most 200): the GPU's time
  // for the step in a graph, without the host's launch overhead.
  std::vector<StepTime> time_steps(int loops);
  void capture();
  void enqueue();
};

}  // namespace vc::inference
