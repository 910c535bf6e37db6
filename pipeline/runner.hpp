// The application's run: every input stream -> the batcher -> the engine (two batches in flight) -> per-stream
// post-processing, result sinks and video outputs, with a progress line for files, a periodic performance report
// for live streams, and a summary per stream at the end. The layers above (service/) see and steer it through
// its control interface (core/control.hpp).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "pipeline/core/control.hpp"
#include "pipeline/run_report.hpp"

namespace vc::pipeline {

class Runner {
 public:
  // Sets the run up: the engine, every stream (not started yet), the batcher, the outputs and the result sinks.
  // Throws vc::Error subclasses (a missing model, an output that would overwrite an input, …). `classifier`: the
  // engine to run with instead of the configured one (tests).
  explicit Runner(const config::Config& config, std::unique_ptr<inference::Classifier> classifier = nullptr);
  // With several engines (tests; the run itself makes one per inference.gpus entry): streams are spread over them.
  Runner(const config::Config& config, std::vector<std::unique_ptr<inference::Classifier>> engines);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // What the service reads and steers; valid as long as the runner lives.
  [[nodiscard]] RunControl& control();

  // Starts every stream and runs until each has ended, `stop` becomes non-zero (Ctrl-C), or something that loses
  // data happens. Outputs are always finalized. Problems during the run end up in the summary's code and
  // problems. Call once.
  RunSummary run(const std::atomic<int>& stop);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vc::pipeline
