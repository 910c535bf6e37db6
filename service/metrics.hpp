// What /metrics and /healthz say about a run: the Prometheus text format (per stream frames, drops, fps,
// capture-to-result latency histogram, time per stage, restarts, NaN frames, decoder; batches, batch sizes and
// engine time per batch; GPU memory; each result sink's drops and connection) and the health verdict with its
// JSON body. Pure functions of what the run shows (pipeline/core/control.hpp), so tests need no server.
#pragma once
#include <string>
#include <utility>

#include "pipeline/core/control.hpp"

namespace vc::service {

std::string render_metrics(const pipeline::RunControl& run);

// (healthy, JSON body): healthy while every running stream delivered a frame within `stall_s` (a stream with no
// frame yet is allowed `stall_s` from `started`) and none has failed.
std::pair<bool, std::string> render_health(const pipeline::RunControl& run, double stall_s,
                                           pipeline::Clock::time_point started);

}  // namespace vc::service
