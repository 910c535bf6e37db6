// Where the streams' starts went (bench_pipeline's "start", issue #42's "all streams started within 5 s"): each
// stream's source opened (its pipeline built and set playing), then the demuxer found the video and its decoder was
// linked, then the decoder gave its first picture, then that picture reached the stream — p50 and max over the
// run's streams (the added ones, "churn…", left out).
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/percentile.hpp"
#include "pipeline/run_report.hpp"

namespace vc::bench {

nlohmann::json start_split(const std::vector<pipeline::StreamSummary>& streams);
void print_start_split(const nlohmann::json& start);  // the two lines under a live run's row

}  // namespace vc::bench
