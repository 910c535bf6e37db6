// What a running pipeline shows the layers above it (service/: metrics, health; later the REST API and the web
// page), and what it lets them do. The pipeline owns this interface and implements it (runner.hpp); nothing in
// pipeline/ knows who calls it. Every call is thread-safe: the service calls from its own threads while the run
// goes on.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pipeline/core/events.hpp"
#include "pipeline/core/stats.hpp"

namespace vc::pipeline {

class RunControl {
 public:
  virtual ~RunControl() = default;

  // Every stream of the run, in order. A stream's statistics stay valid as long as the pointer is held.
  [[nodiscard]] virtual std::vector<std::shared_ptr<const StreamStats>> streams() const = 0;
  // Batches, batch sizes, engine time per batch, readiness.
  [[nodiscard]] virtual const EngineStats& engine() const = 0;
  // Each result sink's drops and connection.
  [[nodiscard]] virtual std::vector<SinkStatus> sinks() const = 0;
  // The event rules' counters; null when the run has no rules.
  [[nodiscard]] virtual const EventStats* events() const = 0;
  // "cuDNN (NVIDIA H200)", "CPU reference"
  [[nodiscard]] virtual std::string engine_name() const = 0;
  // The GPU the engine runs on, -1 for the CPU engine.
  [[nodiscard]] virtual int cuda_device() const = 0;
};

}  // namespace vc::pipeline
