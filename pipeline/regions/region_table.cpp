#include "pipeline/regions/region_table.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/errors.hpp"

namespace vc::pipeline {

RegionTable::RegionTable(std::vector<std::string> models, size_t capacity)
    : models_(std::move(models)), plans_(capacity, std::make_shared<const RegionPlan>()), per_frame_(models_.size()) {
  if (!plans_.empty() && !models_.empty()) per_frame_[0][1] = int(capacity);  // (every slot: the whole picture)
}

void RegionTable::count(const RegionPlan& plan, int sign) {
  std::vector<int> n(models_.size(), 0);
  if (plan.whole && !n.empty()) ++n[0];
  for (const auto& r : plan.regions) ++n.at(size_t(r.model));
  for (size_t m = 0; m < n.size(); ++m) {
    if (n[m] == 0) continue;
    if ((per_frame_[m][n[m]] += sign) == 0) per_frame_[m].erase(n[m]);
  }
}

int RegionTable::model_index(const std::string& name) const {
  const auto it = std::find(models_.begin(), models_.end(), name);
  return it == models_.end() ? -1 : int(it - models_.begin());
}

std::shared_ptr<const RegionPlan> RegionTable::plan(const config::Input& input) const {
  auto plan = std::make_shared<RegionPlan>();
  plan->whole = input.regions.empty() || input.whole;
  if (plan->whole && model_index("default") < 0) {
    throw ConfigError(fmt::format("stream '{}': its whole picture needs the default model (model:), which this run "
                                  "did not load", input.name));
  }
  for (const auto& r : input.regions) {
    const int m = model_index(r.model);
    if (m < 0) {
      throw ConfigError(fmt::format("stream '{}', region '{}': model '{}' is not loaded in this run (loaded: {})",
                                    input.name, r.name, r.model, fmt::join(models_, ", ")));
    }
    plan->regions.push_back({r, m});
  }
  return plan;
}

void RegionTable::set(int stream, const config::Input& input) {
  auto plan = this->plan(input);
  std::lock_guard lock(mutex_);
  auto& slot = plans_.at(size_t(stream));
  count(*slot, -1);
  count(*plan, +1);
  slot = std::move(plan);
}

void RegionTable::check(const config::Config& config, const config::Input& input, int width, int height) const {
  config::validate_regions(config, input, "regions");
  if (width > 0) {
    if (auto why = config::regions_outside(input.regions, width, height)) throw ConfigError(*why, "regions");
  }
  (void)plan(input);
}

std::shared_ptr<const RegionPlan> RegionTable::get(int stream) const {
  std::lock_guard lock(mutex_);
  return plans_.at(size_t(stream));
}

int RegionTable::most_items_per_frame(int model) const {
  std::lock_guard lock(mutex_);
  const auto& counts = per_frame_.at(size_t(model));
  return counts.empty() ? 0 : counts.rbegin()->first;
}

void RegionTable::items_of(const RegionPlan& plan, int frame, int64_t index, int width, int height,
                           std::vector<WorkItem>& out, std::vector<std::string>* outside) {
  if (plan.whole) out.push_back({frame, -1, 0, {}, ""});
  for (size_t i = 0; i < plan.regions.size(); ++i) {
    const auto& item = plan.regions[i];
    if (index % item.region.every != 0) continue;
    const auto box = config::region_pixels(item.region, width, height);
    if (!box) {
      if (outside) outside->push_back(config::region_outside(item.region, width, height));
      continue;
    }
    out.push_back({frame, int(i), item.model, {box->x, box->y, box->width, box->height}, item.region.name});
  }
}

}  // namespace vc::pipeline
