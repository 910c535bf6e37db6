// What /metrics and /healthz say about a run: the Prometheus text format (per stream frames, drops, fps,
// capture-to-result latency histogram, time per stage, restarts, NaN frames, decoder; batches, batch sizes and
// engine time per batch; GPU memory; each result sink's drops and connection) and the health verdict with its
// JSON body. Pure functions of what the run shows (pipeline/core/control.hpp), so tests need no server.
#pragma once
#include <map>
#include <string>
#include <utility>

#include "pipeline/core/control.hpp"
#include "service/live/live_views.hpp"

namespace vc::service {

std::string render_metrics(const pipeline::RunControl& run);
// The live view's families (live_views.hpp), per stream watched since the start.
std::string render_live_metrics(const std::map<std::string, LiveViews::Counts>& live);

// (healthy, JSON body): healthy while no stream has failed and every running stream both delivered a frame and,
// when frames came, got a result within `stall_s` — a stuck engine, post stage or output fails it as a stalled
// source does. A stream with no frame yet is allowed `stall_s` from `started`.
std::pair<bool, std::string> render_health(const pipeline::RunControl& run, double stall_s,
                                           pipeline::Clock::time_point started);

}  // namespace vc::service
