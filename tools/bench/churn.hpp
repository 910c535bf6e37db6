// bench_pipeline --churn: a stream added and removed over and over through the run's control interface (what the
// REST API calls) while the others run; how long each step took, and which added stream ended by itself and why.
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/control.hpp"

namespace vc::bench {

// What --churn measured: streams added and removed while the others ran, and how long each took.
struct Churn {
  int added = 0, removed = 0, failed = 0;
  std::vector<double> first_frame_ms, remove_ms;  // add -> its first result; remove -> outputs finalized
  std::vector<std::string> ended_early;  // added streams that had ended by themselves before their removal: why
  // The other streams' drops, by what the churn was doing meanwhile: adding a stream (to its first result), letting it
  // run, removing it; and the engine's slowest batch before the churn began and while it went.
  int64_t drops_adding = 0, drops_running = 0, drops_removing = 0;
  double batch_max_ms_before = 0, batch_max_ms = 0;
};

// Adds a stream like `like`, waits for its first result, lets it run a second, removes it; again until `stop`.
void churn(pipeline::RunControl& run, const config::Input& like, const std::atomic<int>& stop, Churn& out);

}  // namespace vc::bench
