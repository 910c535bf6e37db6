// The cuDNN engine's choices: see engine_impl.hpp.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/cuda/engine/algo_cache.hpp"
#include "inference/cuda/engine/engine_impl.hpp"
#include "inference/cuda/engine/gpu_timer.hpp"
#include "inference/cuda/engine/plan_compiler.hpp"

namespace vc::inference {
namespace {

// Graph-API plan tuning (tune_graph): every plan is screened with short replays, the kFinalists fastest are timed
// again as long as the legacy call, and finalists within CudnnEngineOptions::tie_tolerance of the fastest are
// settled on the whole forward pass (settle_ties), where a swap must gain more than kTieMargin of the pass.
constexpr int kScreenLoops = 3;
constexpr double kScreenTargetMs = 0.5;
constexpr size_t kFinalists = 3;
constexpr double kTieMargin = 0.002;

// A compiled plan's key in the plan cache: its layer shape's graph-API key and the plan's number.
std::string plan_key(const std::string& graph_key, int plan) { return fmt::format("{}|plan{}", graph_key, plan); }

const char* math_name(cudnnMathType_t m, bool fp32) {
  if (!fp32) return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? "fp16-tensor-op" : "fp16-fma";
  return m == CUDNN_FMA_MATH ? "fp32-fma" : "tf32-tensor-op";
}

}  // namespace

void CudnnEngine::Impl::choose_head() {
  switch (opt.head) {
    case HeadMode::Separate: head_fused = false; break;
    case HeadMode::Fused: head_fused = true; break;
    case HeadMode::Auto:
      if (opt.autotune && !opt.keep_all_values) {
        report.head_separate_ms = float(median_replayed_ms(stream, [&] { run_head(false); }, 7));
        report.head_fused_ms = float(median_replayed_ms(stream, [&] { run_head(true); }, 7));
        head_fused = report.head_fused_ms < report.head_separate_ms;
      }
      break;
  }
  // The pooled features keep their (small) buffer, used by the timing above, but are never written.
  if (head_fused) values[net.layers.back().input].absent = true;
  report.head = head_fused ? kHeadFused : kHeadSeparate;
}

std::string CudnnEngine::Impl::cache_key(const Conv& c, const cudaDeviceProp& prop) const {
  const Layer& l = *c.layer;
  const Shape& is = values[l.input].shape;
  // The epilogue is part of the key: a graph-API plan index means a different engine for another operation graph
  // (ResNet-50's layer1.0.downsample and layer1.0.conv3 are the same convolution, one without ReLU and residual).
  return fmt::format("{}|sm{}{}|cudnn{}|n{}|in{}x{}x{}|out{}|k{}s{}p{}g{}|{}{}{}{}|ws{}", prop.name, prop.major, prop.minor,
                     cudnnGetVersion(), opt.batch, is.h, is.w, is.c, l.out_channels, l.kernel, l.stride, l.pad, l.groups,
                     c.fp32 ? (opt.tf32_stem ? "tf32" : "fp32") : "fp16", c.z ? "|res" : "", l.relu ? "|relu" : "",
                     opt.deterministic ? "|det" : "", opt.workspace_limit >> 20);
}

std::string CudnnEngine::Impl::graph_key(const Conv& c, const cudaDeviceProp& prop) const {
  return cache_key(c, prop) + "|api|graph-timed";  // (entries timed eagerly, before, are not reused)
}

bool CudnnEngine::Impl::acceptable_math(const Conv& c, cudnnMathType_t m) const {
  if (c.fp32 && !opt.tf32_stem) return m == CUDNN_FMA_MATH;  // strict FP32: no TF32 down-conversion
  return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

const cudnnConvolutionFwdAlgoPerf_t* CudnnEngine::Impl::first_usable(const Conv& c, const cudnnConvolutionFwdAlgoPerf_t* perf,
                                                                      int count) const {
  for (int i = 0; i < count; ++i) {
    const auto& p = perf[i];
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= opt.workspace_limit && acceptable_math(c, p.mathType) &&
        (!opt.deterministic || p.determinism == CUDNN_DETERMINISTIC)) {
      return &p;
    }
  }
  return nullptr;
}

void CudnnEngine::Impl::choose_algorithms(const cudaDeviceProp& prop) {
  AlgoCache cache(opt.cache_path);
  plan_cache = std::make_unique<PlanCache>(opt.autotune ? opt.cache_path : "", machine_identity(prop));
  const auto t0 = EngineClock::now();
  if (opt.autotune && !opt.quick) compile_beside(cache, prop);
  DeviceBuffer<uint8_t> tuning_workspace;
  size_t max_workspace = 0;
  for (size_t index = 0; index < convs.size(); ++index) {
    check_cancel();
    Conv& c = *convs[index];
    ConvChoice choice;
    choice.layer = c.layer->name;
    if (opt.safe_layers.count(c.layer->name)) {
      choose_safe(c, choice);
      max_workspace = std::max(max_workspace, c.workspace);
      report.convs.push_back(choice);
      continue;
    }
    cudnnMathType_t math = c.fp32 && !opt.tf32_stem ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    const auto key = cache_key(c, prop);
    if (auto it = opt.algorithms.find(c.layer->name); it != opt.algorithms.end()) {
      c.algo = cudnnConvolutionFwdAlgo_t(it->second);
      choice.source = "override";
    } else if (auto hit = cache.find(key); hit && opt.autotune) {
      c.algo = cudnnConvolutionFwdAlgo_t(hit->algorithm);
      math = cudnnMathType_t(hit->math);
      choice.tuned_ms = hit->ms;
      choice.source = "cache";
      ++report.cache_hits;
    } else if (opt.autotune && !opt.quick) {
      if (!tuning_workspace.get() && opt.workspace_limit) tuning_workspace = DeviceBuffer<uint8_t>(opt.workspace_limit);
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int returned = 0;
      CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle, c.x_desc, c.x, c.w_desc, c.weight.get(), c.conv_desc,
                                                         c.y_desc, c.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                         perf, tuning_workspace.get(), opt.workspace_limit));
      const auto* best = first_usable(c, perf, returned);
      if (!best) {
        // Why each was refused (its status, workspace, math), so that a failure under load says what it was.
        std::string why;
        for (int i = 0; i < returned; ++i) {
          why += fmt::format("{}algorithm {}: {}, {:.1f} MiB, math {}", i ? "; " : "", int(perf[i].algo),
                             cudnnGetErrorString(perf[i].status), double(perf[i].memory) / (1 << 20), int(perf[i].mathType));
        }
        throw InternalError(fmt::format("cuDNN has no usable algorithm for {} (batch {}; workspace limit {:.1f} MiB): {}",
                                        c.layer->name, opt.batch, double(opt.workspace_limit) / (1 << 20), why));
      }
      c.algo = best->algo;
      math = best->mathType;
      choice.tuned_ms = best->time;
      choice.source = "autotune";
      cache.put(key, {int(best->algo), int(best->mathType), false, best->memory, best->time});
      ++report.cache_misses;
    } else {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int returned = 0;
      CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, c.x_desc, c.w_desc, c.conv_desc, c.y_desc,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
      const auto* suggested = first_usable(c, perf, returned);
      if (!suggested) throw InternalError(fmt::format("cuDNN suggests no usable algorithm for {}", c.layer->name));
      c.algo = suggested->algo;
      math = suggested->mathType;
      choice.source = "heuristic";
      if (opt.autotune) ++report.untuned_layers;  // (quick)
    }
    CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv_desc, math));
    const auto status = cudnnGetConvolutionForwardWorkspaceSize(handle, c.x_desc, c.w_desc, c.conv_desc, c.y_desc,
                                                                c.algo, &c.workspace);
    if (status != CUDNN_STATUS_SUCCESS) {
      if (choice.source == "override") {
        throw ConfigError(fmt::format("inference.algorithms.{}: algorithm {} is not supported for this layer ({})",
                                      c.layer->name, int(c.algo), cudnnGetErrorString(status)));
      }
      CUDNN_CHECK(status);
    }
    choice.api = "legacy";
    choice.algorithm = int(c.algo);
    choice.math = math_name(math, c.fp32);
    if (!c.fp32 && opt.autotune && choice.source != "override") {
      c.graph_key = graph_key(c, prop);
      const auto hit = cache.find(c.graph_key);
      if (hit && (!hit->graph || use_graph_plan(c, hit->algorithm))) {
        choice.tuned_ms = hit->ms;
        join_ties(c.graph_key, index);  // a layer of a shape tuned earlier in this start
      } else if (opt.quick) {
        if (choice.source == "cache") ++report.untuned_layers;  // (a heuristic one is counted already)
      } else {
        if (!tuning_workspace.get() && opt.workspace_limit) tuning_workspace = DeviceBuffer<uint8_t>(opt.workspace_limit);
        auto tied = tune_graph(c, choice, tuning_workspace.get());
        cache.put(c.graph_key, {c.graph ? c.plan : int(c.algo), int(math), bool(c.graph), c.workspace, choice.tuned_ms});
        if (!tied.empty() && opt.cuda_graph) {
          ties.push_back({c.graph_key, c.plan, {}, std::move(tied)});
          join_ties(c.graph_key, index);
        }
      }
      if (c.graph) {
        choice.api = "graph";
        choice.algorithm = c.plan;
        choice.math = "fp16-graph";
      }
    }
    max_workspace = std::max({max_workspace, c.workspace, c.trial_workspace});
    choice.workspace = c.workspace;
    report.convs.push_back(choice);
  }
  tuning_workspace = DeviceBuffer<uint8_t>();
  compiled_beside.clear();
  workspace = DeviceBuffer<uint8_t>(max_workspace);
  report.workspace_bytes = max_workspace;
  report.tuning_seconds = seconds_since(t0);
  if (opt.autotune) cache.save();
}

void CudnnEngine::Impl::compile_beside(const AlgoCache& cache, const cudaDeviceProp& prop) {
  report.compile_threads = opt.compile_threads > 0 ? opt.compile_threads : default_compile_threads();
  if (report.compile_threads <= 1) return;
  std::vector<PlanShape> shapes;
  std::set<std::string> seen;
  for (const auto& conv : convs) {  // (the layers choose_algorithms tunes with the graph API, a shape once)
    const Conv& c = *conv;
    if (c.fp32 || opt.safe_layers.count(c.layer->name) || opt.algorithms.count(c.layer->name)) continue;
    const auto key = graph_key(c, prop);
    if (!cache.find(key) && seen.insert(key).second) shapes.push_back({key, graph_shape(c)});
  }
  if (shapes.empty()) return;
  const auto t0 = EngineClock::now();
  for (auto& p : compile_plans(opt.device, shapes, opt.max_graph_plans, opt.deterministic, report.compile_threads,
                               opt.cancel)) {
    compiled_beside[plan_key(p.key, p.index)] = std::move(p.plan);
  }
  report.plans_compiled += int(compiled_beside.size());
  report.plan_build_seconds += seconds_since(t0);
  log->debug("{} graph plans of {} layer shapes compiled on {} threads in {:.2f} s", compiled_beside.size(),
             shapes.size(), report.compile_threads, seconds_since(t0));
  check_cancel();
}

bool CudnnEngine::Impl::build_plan(GraphConv& g, const std::string& key, int plan) {
  if (g.is_built(plan)) return true;
  if (const auto it = compiled_beside.find(plan_key(key, plan)); it != compiled_beside.end() && g.adopt(plan, it->second)) {
    return true;
  }
  const bool compiles = g.compiles_at_runtime(plan);
  const auto t0 = EngineClock::now();
  const bool built = g.build(plan);
  report.plan_build_seconds += seconds_since(t0);
  if (built && compiles) ++report.plans_compiled;
  return built;
}

void CudnnEngine::Impl::check_cancel() const {
  if (opt.cancel && opt.cancel->load()) throw InternalError("cuDNN engine: its build was cancelled");
}

void CudnnEngine::Impl::choose_safe(Conv& c, ConvChoice& choice) {
  std::vector<cudnnMathType_t> maths{CUDNN_FMA_MATH};
  if (!c.fp32) maths = {CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH};
  for (const auto math : maths) {
    CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv_desc, math));
    for (const auto algo : {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                            CUDNN_CONVOLUTION_FWD_ALGO_GEMM}) {
      size_t bytes = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(handle, c.x_desc, c.w_desc, c.conv_desc, c.y_desc, algo, &bytes) !=
              CUDNN_STATUS_SUCCESS ||
          bytes > opt.workspace_limit) {
        continue;
      }
      c.algo = algo;
      c.workspace = bytes;
      try {
        const DeviceBuffer<uint8_t> trial(bytes);
        run_conv(c, trial.get());
        CUDA_CHECK(cudaStreamSynchronize(stream));
      } catch (const InternalError& e) {
        log->debug("{}: safe algorithm {} (math {}) refused ({})", c.layer->name, int(algo), int(math), e.what());
        continue;
      }
      choice.api = "legacy";
      choice.algorithm = int(algo);
      choice.math = math_name(math, c.fp32);
      choice.source = "safe";
      choice.workspace = bytes;
      return;
    }
  }
  throw InternalError(fmt::format("cuDNN runs {} with none of its implicit-GEMM/GEMM algorithms", c.layer->name));
}

template <typename Fn>
float CudnnEngine::Impl::time_on_stream(Fn fn) {
  return float(median_replayed_ms(stream, fn, /*loops=*/7, /*target_ms=*/1.0));
}

GraphConvShape CudnnEngine::Impl::graph_shape(const Conv& c) const {
  const Layer& l = *c.layer;
  const Shape& is = values[l.input].shape;
  const Shape& os = values[l.output].shape;
  return {opt.batch, is.h, is.w, is.c, os.h, os.w, os.c, l.kernel, l.stride, l.pad, l.groups, c.z != nullptr, l.relu};
}

bool CudnnEngine::Impl::use_graph_plan(Conv& c, int plan) {
  if (const auto kept = plan_cache->find(plan_key(c.graph_key, plan))) {
    try {
      auto g = GraphConv::load(handle, *kept, plan);
      if (size_t(g->workspace_size(plan)) <= opt.workspace_limit) {
        c.workspace = size_t(g->workspace_size(plan));
        c.graph = std::move(g);
        c.plan = plan;
        c.plan_kept = true;
        ++report.plans_loaded;
        return true;
      }
    } catch (const InternalError& e) {
      log->debug("{}: kept plan {} not used ({})", c.layer->name, plan, e.what());
    }
  }
  try {
    auto g = std::make_unique<GraphConv>(handle, graph_shape(c), opt.deterministic);
    if (opt.quick && g->compiles_at_runtime(plan)) return false;  // the tuned engine compiles (and keeps) it
    if (!build_plan(*g, c.graph_key, plan) || size_t(g->workspace_size(plan)) > opt.workspace_limit) return false;
    c.workspace = size_t(g->workspace_size(plan));
    c.graph = std::move(g);
    c.plan = plan;
    return true;
  } catch (const InternalError& e) {
    log->debug("{}: graph API unavailable ({})", c.layer->name, e.what());
    return false;
  }
}

CudnnEngine::Impl::TiedPlans CudnnEngine::Impl::tune_graph(Conv& c, ConvChoice& choice, void* tuning_workspace) {
  const float legacy_ms = time_on_stream([&] { run_conv(c, tuning_workspace); });
  choice.legacy_ms = choice.tuned_ms = legacy_ms;
  std::unique_ptr<GraphConv> g;
  try {
    g = std::make_unique<GraphConv>(handle, graph_shape(c), opt.deterministic);
  } catch (const InternalError& e) {
    log->debug("{}: graph API unavailable ({})", c.layer->name, e.what());
    return {};
  }
  const auto plan_call = [&](int i) {
    return [&, i] { g->execute(i, c.x, c.weight.get(), c.bias.get(), c.z, c.y, tuning_workspace); };
  };
  // (ms, plan) pairs of the plans that ran; ties go to the heuristics' better rank.
  const auto time_plans = [&](const std::vector<int>& plans, auto&& timer) {
    std::vector<std::pair<float, int>> out;
    for (const int i : plans) {
      try {
        out.emplace_back(timer(plan_call(i)), i);
      } catch (const InternalError& e) {
        log->debug("{}: graph plan {} failed ({})", c.layer->name, i, e.what());
        CUDA_CHECK(cudaStreamSynchronize(stream));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<int> plans;
  for (int i = 0; i < std::min(opt.max_graph_plans, g->candidate_count()); ++i) {
    check_cancel();
    if (build_plan(*g, c.graph_key, i) && size_t(g->workspace_size(i)) <= opt.workspace_limit) plans.push_back(i);
  }
  auto screened = time_plans(plans, [&](auto&& fn) {
    return float(median_replayed_ms(stream, fn, kScreenLoops, kScreenTargetMs));
  });
  plans.clear();
  for (size_t k = 0; k < std::min(screened.size(), kFinalists); ++k) plans.push_back(screened[k].second);
  const auto finalists = time_plans(plans, [&](auto&& fn) { return time_on_stream(fn); });
  if (finalists.empty()) return {};
  const auto [best, best_plan] = finalists.front();
  choice.graph_ms = best;
  if (best >= legacy_ms) return {};
  c.workspace = size_t(g->workspace_size(best_plan));
  c.plan = best_plan;
  choice.tuned_ms = best;
  c.graph = std::move(g);
  TiedPlans tied;
  for (size_t k = 1; k < finalists.size(); ++k) {
    if (opt.tie_tolerance > 0 && finalists[k].first <= best * (1 + opt.tie_tolerance)) {
      tied.emplace_back(finalists[k].second, finalists[k].first);
    }
  }
  return tied;
}

void CudnnEngine::Impl::join_ties(const std::string& cache_key, size_t index) {
  Conv& c = *convs[index];
  const auto group = std::find_if(ties.begin(), ties.end(), [&](const TiedGroup& t) {
    return t.cache_key == cache_key && t.tuned == c.plan;
  });
  if (group == ties.end() || !c.graph) return;
  for (const auto& [plan, ms] : group->plans) {
    if (build_plan(*c.graph, cache_key, plan)) c.trial_workspace = std::max(c.trial_workspace, size_t(c.graph->workspace_size(plan)));
  }
  group->convs.push_back(index);
}

bool CudnnEngine::Impl::set_plan(const TiedGroup& group, int plan) {
  for (const size_t index : group.convs) {
    Conv& c = *convs[index];
    if (!c.graph->build(plan)) return false;
    const auto bytes = size_t(c.graph->workspace_size(plan));
    if (bytes > workspace.size() || (on_side_stream(c) && bytes > side_workspace.size())) return false;
    c.plan = plan;
    c.workspace = bytes;
  }
  return true;
}

void CudnnEngine::Impl::settle_ties() {
  report.tie_groups = int(ties.size());
  if (ties.empty()) return;
  const auto t0 = EngineClock::now();
  capture();
  double best = time_graph();
  report.ties_before_ms = float(best);
  AlgoCache cache(opt.cache_path);
  for (const auto& group : ties) {
    if (group.convs.empty()) continue;
    const size_t first = group.convs.front();
    const int tuned = group.tuned;
    check_cancel();
    int kept = tuned;
    float kept_ms = report.convs[first].tuned_ms;
    for (const auto& [plan, ms] : group.plans) {
      if (!set_plan(group, plan)) {
        set_plan(group, kept);
        continue;
      }
      double pass = INFINITY;
      try {
        capture();
        pass = time_graph();
      } catch (const InternalError& e) {
        log->debug("{}: plan {} in the forward pass failed ({})", report.convs[first].layer, plan, e.what());
        CUDA_CHECK(cudaStreamSynchronize(stream));
      }
      ++report.tie_trials;
      if (pass < best * (1 - kTieMargin)) {
        best = pass;
        kept = plan;
        kept_ms = ms;
      }
    }
    if (!set_plan(group, kept)) throw InternalError("cuDNN engine: a settled graph plan no longer builds");
    if (kept == tuned) continue;
    ++report.tie_swaps;
    for (const size_t index : group.convs) {
      report.convs[index].algorithm = kept;
      report.convs[index].tuned_ms = kept_ms;
      report.convs[index].workspace = convs[index]->workspace;
    }
    auto entry = cache.find(group.cache_key).value_or(CachedAlgo{});
    entry.algorithm = kept;
    entry.graph = true;
    entry.workspace = convs[first]->workspace;
    entry.ms = kept_ms;
    cache.put(group.cache_key, entry);
  }
  report.ties_after_ms = float(best);
  report.tie_seconds = seconds_since(t0);
  cache.save();
}

void CudnnEngine::Impl::keep_plans() {
  std::set<std::string> kept;
  for (auto& conv : convs) {
    Conv& c = *conv;
    if (!c.graph) continue;
    const auto key = plan_key(c.graph_key, c.plan);
    if (c.plan_kept || !kept.insert(key).second) continue;  // (layers of one shape: kept once)
    plan_cache->put(key, c.graph->serialize(c.plan));
  }
}

void CudnnEngine::Impl::choose_branches() {
  if (!opt.cuda_graph) return;
  const bool time_both = opt.branches == BranchMode::Auto && report.branch_convs > 0 && opt.autotune;
  if (!time_both) {
    capture();
    return;
  }
  concurrent = false;
  capture();
  report.serial_ms = float(time_graph());
  CudaGraph serial_graph = std::move(graph);
  CudaGraphExec serial_exec = std::move(graph_exec);
  concurrent = true;
  capture();
  report.concurrent_ms = float(time_graph());
  if (report.serial_ms <= report.concurrent_ms) {
    concurrent = false;
    graph = std::move(serial_graph);
    graph_exec = std::move(serial_exec);
  }
  report.branches = concurrent ? kBranchesConcurrent : kBranchesSerial;
}

}  // namespace vc::inference
