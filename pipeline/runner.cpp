#include "pipeline/runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <opencv2/core.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/classifier.hpp"
#include "inference/postprocess.hpp"
#include "pipeline/output.hpp"
#include "pipeline/overlay.hpp"
#include "pipeline/results.hpp"
#include "pipeline/source.hpp"

namespace vc::pipeline {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, size_t(q * double(v.size())));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return v[k];
}

// "\r  120/300 frames (40%)  25.3 fps  ETA 7 s" on a terminal, at most twice a second.
class Progress {
 public:
  explicit Progress(int64_t total) : total_(total), enabled_(total > 0 && isatty(STDERR_FILENO)) {}
  void update(int64_t frames, double fps) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    const double eta = fps > 0 ? double(std::max<int64_t>(total_ - frames, 0)) / fps : 0;
    fmt::print(stderr, "\r  {}/{} frames ({:.0f}%)  {:.1f} fps  ETA {:.0f} s   ", frames, total_,
               100.0 * double(frames) / double(total_), fps, eta);
  }
  void done() {
    if (enabled_) fmt::print(stderr, "\n");
  }

 private:
  int64_t total_;
  bool enabled_;
  Clock::time_point last_{};
};

}  // namespace

RunSummary run(const config::Config& cfg, const std::atomic<int>& stop) {
  auto log = vc::log::get("pipeline");
  auto classifier = inference::Classifier::create(cfg);
  auto source = Source::open(cfg.input);
  ResultsWriter results(cfg.output.results, source->description());
  inference::Smoother smoother(cfg.smoothing.window, float(cfg.smoothing.threshold));
  std::unique_ptr<Output> output;
  Progress progress(cfg.input.max_frames > 0 && source->total_frames() > 0
                        ? std::min(cfg.input.max_frames, source->total_frames())
                        : source->total_frames());

  RunSummary summary;
  std::vector<double> latencies;
  const auto start = Clock::now();
  double fps = 0;
  auto last_frame_time = start;
  const std::string model_name = classifier->architecture().size() > 40 ? "ResNet" : classifier->architecture();

  auto finish = [&] {
    progress.done();
    if (output) output->finish();
    results.close();
    summary.dropped = source ? source->dropped() : 0;
    summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!latencies.empty()) {
      summary.mean_latency_ms = std::accumulate(latencies.begin(), latencies.end(), 0.0) / double(latencies.size());
      summary.p50_latency_ms = percentile(latencies, 0.50);
      summary.p99_latency_ms = percentile(latencies, 0.99);
    }
  };

  try {
    while (!stop.load()) {
      if (cfg.input.max_frames > 0 && summary.frames >= cfg.input.max_frames) break;
      std::vector<Frame> batch;
      auto first = source->next();
      if (!first) {
        if (cfg.input.loop && !source->live() && summary.frames > 0) {
          source = Source::open(cfg.input);  // start the file again
          continue;
        }
        break;
      }
      batch.push_back(std::move(*first));
      while (int(batch.size()) < classifier->max_batch()) {
        auto more = source->poll();
        if (!more) break;
        batch.push_back(std::move(*more));
      }
      if (cfg.input.max_frames > 0) {
        batch.resize(size_t(std::min<int64_t>(int64_t(batch.size()), cfg.input.max_frames - summary.frames)));
      }
      std::vector<inference::FrameView> views;
      for (const auto& f : batch) views.push_back(f.view);
      const auto logits = classifier->classify(views);

      for (size_t i = 0; i < batch.size(); ++i) {
        const Frame& f = batch[i];
        const auto probs = inference::softmax(logits[i]);
        FrameResult r;
        r.frame = f.index;
        r.pts_ns = f.pts_ns;
        r.top = inference::top_k(probs, cfg.model.top_k, classifier->labels());
        const auto s = smoother.update(probs);
        const auto& labels = classifier->labels();
        r.smoothed = {s.index, s.score, labels.empty() ? fmt::format("class {}", s.index) : labels[size_t(s.index)]};
        r.uncertain = s.uncertain;

        if (cfg.output.kind != "none") {
          if (!output) output = Output::open(cfg.output, f.view.width, f.view.height, source->fps());
          cv::Mat image = cv::Mat(f.view.height, f.view.width, CV_8UC3, const_cast<uint8_t*>(f.view.planes[0]),
                                  size_t(f.view.strides[0])).clone();
          OverlayContent content{r.top, r.smoothed.label, r.smoothed.score, r.uncertain, fps,
                                 ms_between(f.captured, Clock::now()), classifier->engine_name(), model_name};
          draw_overlay(image, content, cfg.overlay);
          output->push(image);
        }
        const auto now = Clock::now();
        r.latency_ms = ms_between(f.captured, now);
        latencies.push_back(r.latency_ms);
        results.write(r);
        const double dt = std::chrono::duration<double>(now - last_frame_time).count();
        last_frame_time = now;
        if (dt > 0) fps = fps == 0 ? 1.0 / dt : 0.9 * fps + 0.1 / dt;
        ++summary.frames;
      }
      progress.update(summary.frames, fps);
    }
  } catch (...) {
    try {
      finish();  // still finalize what was written
    } catch (const std::exception& e) {
      log->error("while finishing after an error: {}", e.what());
    }
    throw;
  }
  summary.interrupted = stop.load() > 0;
  finish();
  return summary;
}

}  // namespace vc::pipeline
