// A training job of the service: tools/train.py fine-tuning a model on its dataset (teach.datasets_dir/MODEL) in a
// child process — niced below the live streams, in a process group of its own so that none of its data loaders
// outlives it — one job at a time. train.py reports its progress as JSON lines (--progress) that view() reads; it
// writes its candidate model and card atomically (nothing at all when it fails or is cancelled). The candidate is
// only a file: deploying it is a separate request (PUT /api/v1/models/NAME).
#pragma once
#include <sys/types.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"

namespace vc::service {

class TrainJob {
 public:
  explicit TrainJob(const config::Teach& settings);
  ~TrainJob();  // cancels a job still running
  TrainJob(const TrainJob&) = delete;
  TrainJob& operator=(const TrainJob&) = delete;

  struct Request {
    std::string model;            // the model it trains a candidate for
    std::string dataset;          // its dataset folder
    std::string out;              // the candidate's file (.safetensors); its card, progress and log beside it
    std::string compare;          // the running model's weights: its accuracy on the same validation images
    int epochs = 15;
    int min_per_class = 20;
  };
  // Starts it. Throws pipeline::RequestError 409 while another job runs, vc::Error when it cannot start (no Python,
  // no train.py).
  void start(const Request& request);
  // Stops the running job of `model` (SIGTERM to its group; SIGKILL after 20 s) and returns once it has ended.
  // Throws pipeline::RequestError 404 when no job of that model runs.
  void cancel(const std::string& model);
  // The job of `model` (running or the last one): state ("running", "done", "failed", "cancelled"), the request, the
  // latest progress (epoch, loss, val accuracy, ETA), the epochs so far, the result (train.py's "done" line: the
  // candidate, its card, per-class accuracy, confusion matrix, the running model's accuracy beside it) or the error
  // and the log's last lines. Null when the model never had one.
  [[nodiscard]] nlohmann::json view(const std::string& model) const;
  [[nodiscard]] bool running() const;

 private:
  void watch(pid_t pid);

  config::Teach settings_;
  mutable std::mutex mutex_;
  std::condition_variable ended_;
  pid_t pid_ = -1;              // the running job's (its process group's) id; -1: none
  bool cancelling_ = false;
  Request request_;             // the running or last job
  std::string state_, started_, ended_at_;
  int exit_code_ = 0;
  std::thread watcher_;         // waits for the child
};

// The Python and train.py a job runs (teach.python and teach.trainer, else looked up). Throws vc::NoInputError.
std::string trainer_python(const config::Teach& settings);
std::string trainer_script(const config::Teach& settings);

}  // namespace vc::service
