// The run as a service sees it, over HTTP (cpp-httplib), off by default (metrics.enabled), on 127.0.0.1 unless
// configured:
//   /metrics  the Prometheus text format: per stream frames, drops, fps, capture-to-result latency histogram,
//             time per stage, restarts, NaN frames, decoder; batches, batch sizes and engine time per batch;
//             GPU memory; each result sink's drops and connection
//   /healthz  200 while every running stream delivered a frame within metrics.stall_s, else 503 (JSON body)
//   /readyz   200 once the engine is built and every stream started, else 503
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "pipeline/results.hpp"
#include "pipeline/stats.hpp"

namespace httplib {
class Server;
}

namespace vc::pipeline {

struct MetricsSources {
  std::vector<const StreamStats*> streams;
  const EngineStats* engine = nullptr;
  std::function<std::vector<SinkStatus>()> sinks;  // may be empty
  std::string engine_name;
  int cuda_device = -1;                            // GPU memory is reported when >= 0
};

// The texts the endpoints serve (also for tests, without a server).
std::string render_metrics(const MetricsSources& sources);
// (healthy, JSON body)
std::pair<bool, std::string> render_health(const MetricsSources& sources, double stall_s, Clock::time_point started);

class MetricsServer {
 public:
  // Listens at once. Throws vc::UnavailableError when the address/port cannot be bound (port in use).
  MetricsServer(const config::Metrics& settings, MetricsSources sources);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  [[nodiscard]] std::string url() const;

  // Whether `address:port` can be listened on now (for `doctor`).
  static bool port_free(const std::string& address, int port, std::string& error);

 private:
  config::Metrics settings_;
  MetricsSources sources_;
  Clock::time_point started_ = Clock::now();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace vc::pipeline
