#include "inference/cuda/engine/graph_conv.hpp"

#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "config/errors.hpp"

namespace vc::inference {
namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t { kX = 1, kW, kBias, kZ, kY };

void check(fe::error_t e, const char* what) {
  if (e.is_bad()) throw InternalError(fmt::format("cuDNN graph API: {}: {}", what, e.get_message()));
}

// NHWC strides for dims given as (n, c, h, w).
std::vector<int64_t> nhwc(int64_t n, int64_t c, int64_t h, int64_t w) {
  (void)n;
  return {c * h * w, 1, c * w, c};
}

}  // namespace

struct GraphConv::Impl {
  cudnnHandle_t handle;
  fe::graph::Graph graph;
  std::vector<bool> built;
  int loaded = -1;  // a graph of one loaded plan: the candidate number it stands for
  // Adopted candidates (adopt): a graph of that one plan, and the plan as it came.
  std::vector<std::unique_ptr<fe::graph::Graph>> adopted;
  std::vector<std::vector<uint8_t>> adopted_plans;
  // The graph that runs candidate `index`, and its own index there (a loaded or adopted plan is at 0).
  [[nodiscard]] fe::graph::Graph& graph_of(int index) {
    return index >= 0 && size_t(index) < adopted.size() && adopted[index] ? *adopted[index] : graph;
  }
  [[nodiscard]] int64_t at(int index) const {
    return loaded >= 0 || (index >= 0 && size_t(index) < adopted.size() && adopted[index]) ? 0 : index;
  }
};

GraphConv::GraphConv() : impl_(std::make_unique<Impl>()) {}

GraphConv::GraphConv(cudnnHandle_t handle, const GraphConvShape& s, bool deterministic)
    : impl_(std::make_unique<Impl>()) {
  impl_->handle = handle;
  auto& g = impl_->graph;
  g.set_io_data_type(fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t cg = s.in_c / s.groups;
  auto x = g.tensor(fe::graph::Tensor_attributes().set_name("x").set_uid(kX)
                        .set_dim({s.batch, s.in_c, s.in_h, s.in_w}).set_stride(nhwc(s.batch, s.in_c, s.in_h, s.in_w)));
  auto w = g.tensor(fe::graph::Tensor_attributes().set_name("w").set_uid(kW)
                        .set_dim({s.out_c, cg, s.kernel, s.kernel}).set_stride(nhwc(s.out_c, cg, s.kernel, s.kernel)));
  auto conv = g.conv_fprop(x, w, fe::graph::Conv_fprop_attributes()
                                     .set_padding({s.pad, s.pad})
                                     .set_stride({s.stride, s.stride})
                                     .set_dilation({1, 1}));
  auto bias = g.tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kBias)
                           .set_dim({1, s.out_c, 1, 1}).set_stride({s.out_c, 1, s.out_c, s.out_c}));
  auto y = g.pointwise(conv, bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  if (s.residual) {
    auto z = g.tensor(fe::graph::Tensor_attributes().set_name("z").set_uid(kZ)
                          .set_dim({s.batch, s.out_c, s.out_h, s.out_w}).set_stride(nhwc(s.batch, s.out_c, s.out_h, s.out_w)));
    y = g.pointwise(y, z, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  }
  if (s.relu) y = g.pointwise(y, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  y->set_output(true).set_uid(kY).set_data_type(fe::DataType_t::HALF);

  check(g.validate(), "validate");
  check(g.build_operation_graph(handle), "build_operation_graph");
  check(g.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  if (deterministic) g.deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  check(g.check_support(handle), "check_support");
  impl_->built.assign(size_t(g.get_execution_plan_count()), false);
}

GraphConv::~GraphConv() = default;

int GraphConv::candidate_count() const { return impl_->loaded >= 0 ? impl_->loaded + 1 : int(impl_->built.size()); }

bool GraphConv::build(int index) {
  if (impl_->loaded >= 0) return index == impl_->loaded;
  if (index < 0 || index >= candidate_count()) return false;
  if (!impl_->built[index]) impl_->built[index] = impl_->graph.build_plan_at_index(impl_->handle, index).is_good();
  return impl_->built[index];
}

bool GraphConv::is_built(int index) const {
  if (impl_->loaded >= 0) return index == impl_->loaded;
  return index >= 0 && index < candidate_count() && impl_->built[index];
}

int64_t GraphConv::workspace_size(int index) const {
  int64_t bytes = 0;
  check(impl_->graph_of(index).get_workspace_size_plan_at_index(impl_->at(index), bytes), "workspace size");
  return bytes;
}

void GraphConv::execute(int index, const void* x, const void* w, const void* bias, const void* z, void* y,
                        void* workspace) const {
  std::unordered_map<int64_t, void*> pack = {{kX, const_cast<void*>(x)}, {kW, const_cast<void*>(w)},
                                             {kBias, const_cast<void*>(bias)}, {kY, y}};
  if (z) pack[kZ] = const_cast<void*>(z);
  check(impl_->graph_of(index).execute_plan_at_index(impl_->handle, pack, workspace, impl_->at(index)), "execute");
}

std::string GraphConv::plan_name(int index) const {
  std::string name;
  if (impl_->graph_of(index).get_plan_name_at_index(impl_->at(index), name).is_bad()) return "?";
  return name;
}

bool GraphConv::compiles_at_runtime(int index) const {
  if (impl_->loaded >= 0) return true;
  std::vector<fe::BehaviorNote_t> notes;
  if (impl_->graph.get_behavior_notes_for_plan_at_index(index, notes).is_bad()) return false;
  return std::find(notes.begin(), notes.end(), fe::BehaviorNote_t::RUNTIME_COMPILATION) != notes.end();
}

std::vector<uint8_t> GraphConv::serialize(int index) {
  std::vector<uint8_t> data;
  if (index >= 0 && size_t(index) < impl_->adopted_plans.size() && impl_->adopted[index]) return impl_->adopted_plans[index];
  if (impl_->loaded >= 0 || !build(index) || !compiles_at_runtime(index)) return data;
  // (Building a built candidate again only makes it the graph's current one, which is what serialize writes.)
  if (impl_->graph.build_plan_at_index(impl_->handle, index).is_bad() ||
      impl_->graph.serialize(data, /*serialize_structure=*/false).is_bad()) {
    data.clear();
  }
  return data;
}

std::unique_ptr<GraphConv> GraphConv::load(cudnnHandle_t handle, const std::vector<uint8_t>& plan, int index) {
  std::unique_ptr<GraphConv> g(new GraphConv());
  g->impl_->handle = handle;
  try {
    check(g->impl_->graph.deserialize(handle, plan, /*enforce_precompiled=*/true, /*run_warmup=*/false), "deserialize");
  } catch (const std::exception& e) {  // (a blob the JSON parser cannot read throws its own exception)
    throw InternalError(fmt::format("cuDNN graph API: a kept plan does not load: {}", e.what()));
  }
  g->impl_->loaded = index;
  return g;
}

bool GraphConv::adopt(int index, const std::vector<uint8_t>& plan) {
  if (impl_->loaded >= 0 || index < 0 || index >= candidate_count() || plan.empty()) return false;
  if (impl_->built[index]) return true;  // (built here already: kept as it is)
  auto graph = std::make_unique<fe::graph::Graph>();
  try {
    if (graph->deserialize(impl_->handle, plan, /*enforce_precompiled=*/true, /*run_warmup=*/false).is_bad()) return false;
  } catch (const std::exception&) {  // (a blob the JSON parser cannot read throws its own exception)
    return false;
  }
  impl_->adopted.resize(impl_->built.size());
  impl_->adopted_plans.resize(impl_->built.size());
  impl_->adopted[index] = std::move(graph);
  impl_->adopted_plans[index] = plan;
  impl_->built[index] = true;
  return true;
}

}  // namespace vc::inference
