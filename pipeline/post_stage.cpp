#include "pipeline/post_stage.hpp"

#include "pipeline/outputs/collector.hpp"

#include <cmath>
#include <span>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;

double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

PostStage::PostStage(const config::Config& config, std::vector<std::string> labels, int num_classes,
                     std::vector<StreamStats*> streams, std::vector<std::unique_ptr<ResultSink>> sinks, OutputStage& outputs,
                     EventStage* events, size_t capacity)
    : config_(config),
      labels_(std::move(labels)),
      num_classes_(num_classes),
      streams_(std::move(streams)),
      sinks_(std::move(sinks)),
      sink_ok_(sinks_.size(), true),
      outputs_(outputs),
      events_(events && events->enabled() ? events : nullptr),
      queue_(4) {
  capacity = std::max(capacity, streams_.size());
  streams_.resize(capacity, nullptr);
  for (size_t i = 0; i < capacity; ++i) {
    state_.push_back({inference::Smoother(config.smoothing.window, float(config.smoothing.threshold)), {}, 0});
  }
  thread_ = std::thread([this] { loop(); });
}

PostStage::~PostStage() {
  try {
    finish();
  } catch (...) {
  }
}

void PostStage::submit(ClassifiedBatch batch) { queue_.push_wait(std::move(batch)); }
void PostStage::submit(StreamEvent event) { queue_.push_wait(std::move(event)); }

void PostStage::add_stream(int id, StreamStats& stats) {
  streams_.at(size_t(id)) = &stats;
  queue_.push_wait(StreamAdded{id, stats.name});
}

void PostStage::finish() {
  if (finished_) return;
  finished_ = true;
  queue_.close();
  if (thread_.joinable()) thread_.join();
  if (events_) {  // a run stopped (Ctrl-C) with events open: they end now, and the sinks hear it
    try {
      for (size_t s = 0; s < streams_.size(); ++s) {
        if (streams_[s]) to_sinks(events_->on_stream_end(int(s)));
      }
    } catch (const std::exception& e) {
      fail(ExitCode::kInternal, e.what());
    }
  }
  for (size_t i = 0; i < sinks_.size(); ++i) {
    try {
      sinks_[i]->close();
    } catch (const Error& e) {
      fail(e.code(), e.what());
    }
  }
}

std::optional<Failure> PostStage::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

std::vector<SinkStatus> PostStage::sink_status() const {
  std::vector<SinkStatus> out;
  for (const auto& s : sinks_) out.push_back({s->name(), s->dropped(), s->healthy()});
  return out;
}

void PostStage::fail(ExitCode code, const std::string& message) {
  std::lock_guard lock(failure_mutex_);
  if (!failure_) {
    failure_ = Failure{code, message};
    vc::log::get("pipeline")->error("{}", message);
  }
  wants_stop_ = true;
}

void PostStage::to_sinks(const FrameResult* r, const StreamEvent* e) {
  if (e && event_tap_) event_tap_(*e);
  for (size_t i = 0; i < sinks_.size(); ++i) {
    if (!sink_ok_[i]) continue;
    try {
      if (r) sinks_[i]->frame(*r);
      if (e) sinks_[i]->event(*e);
    } catch (const Error& err) {
      sink_ok_[i] = false;  // it lost data: it takes nothing more, and the run reports it
      fail(err.code(), err.what());
    }
  }
}

void PostStage::to_sinks(const std::vector<StreamEvent>& events) {
  for (const auto& e : events) to_sinks(nullptr, &e);
}

void PostStage::loop() {
  for (;;) {
    auto item = queue_.pop(100ms);
    if (!item) {
      if (queue_.closed_and_empty()) return;
      continue;
    }
    try {
      if (auto* batch = std::get_if<ClassifiedBatch>(&*item)) {
        process(*batch);
      } else if (auto* added = std::get_if<StreamAdded>(&*item)) {
        // (a slot a removed stream had is used again: nothing of it carries over)
        state_[size_t(added->id)] = {inference::Smoother(config_.smoothing.window, float(config_.smoothing.threshold)), {}, 0};
        for (size_t i = 0; i < sinks_.size(); ++i) {
          if (sink_ok_[i]) sinks_[i]->add_stream(added->id, added->name);
        }
      } else {
        const auto& e = std::get<StreamEvent>(*item);
        to_sinks(nullptr, &e);
      }
    } catch (const Error& e) {
      fail(e.code(), e.what());
    } catch (const std::exception& e) {
      fail(ExitCode::kInternal, e.what());
    }
  }
}

void PostStage::process(ClassifiedBatch& batch) {
  const size_t k = size_t(num_classes_);
  for (size_t i = 0; i < batch.frames.size(); ++i) {
    Frame& f = batch.frames[i];
    StreamStats& stats = *streams_.at(size_t(f.stream));
    PerStream& st = state_[size_t(f.stream)];
    const std::span<const float> logits(batch.logits.data() + i * k, k);
    FrameResult r;
    r.stream = f.stream;
    r.stream_name = stats.name;
    r.source = f.source.empty() ? stats.source : f.source;
    r.frame = f.index;
    r.pts_ns = f.pts_ns;
    r.damaged = f.damaged;
    r.captured_ns = steady_ns(f.captured);
    r.still_image = f.independent;
    r.finite = std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); });
    const auto probs = inference::softmax(logits);
    r.top = inference::top_k(probs, config_.model.top_k, labels_);
    if (!r.finite) {
      ++stats.non_finite;
      if (st.non_finite_warnings++ < 3) {
        vc::log::get("pipeline")->warn("stream {} frame {}: the network's output holds NaN/Inf (run `video-classifier "
                                       "diagnose` to find the layer){}", stats.name, f.index,
                                       st.non_finite_warnings == 3 ? "; further such frames are only counted" : "");
      }
    } else if (f.independent) {
      st.smoother.reset();  // an image is unrelated to the previous one: no smoothing across them
    } else {
      const auto s = st.smoother.update(probs);
      r.smoothed = {s.index, s.score, labels_.empty() ? fmt::format("class {}", s.index) : labels_[size_t(s.index)]};
      r.uncertain = s.uncertain;
    }
    const auto now = Clock::now();
    r.latency_ms = ms_between(f.captured, now);
    r.stages = {ms_between(f.captured, f.batched), ms_between(f.batched, batch.collected), ms_between(batch.collected, now)};
    to_sinks(&r, nullptr);
    if (auto change = st.labels.update(r, f.independent)) to_sinks(nullptr, &*change);
    // The frame is shared from here: the rules may keep it for a snapshot, the output draws it.
    const bool tapped = tap_ && wanted_ && (*wanted_)[size_t(r.stream)].load(std::memory_order_relaxed);
    const bool collect = collector_ && collector_->wants(r);
    std::shared_ptr<const Frame> frame;
    if (events_ || tapped || collect || outputs_.draws(f.stream)) frame = std::make_shared<const Frame>(std::move(f));
    if (events_) to_sinks(events_->on_result(r, frame));
    if (tapped) tap_(frame, r);
    if (collect) collector_->take(frame, r);
    if (!r.top.empty()) stats.set_label(r.top.front());

    stats.latency.add(r.latency_ms);
    stats.queue_wait.add(r.stages.queue_ms);
    stats.inference.add(r.stages.inference_ms);
    stats.post.add(r.stages.post_ms);
    stats.rate.tick(now);
    ++stats.classified;
    stats.last_result_ns = steady_ns(now);
    if (outputs_.draws(r.stream)) outputs_.submit({std::move(frame), std::move(r)});
  }
  for (int s : batch.finished_streams) {
    StreamStats& stats = *streams_.at(size_t(s));
    if (events_) to_sinks(events_->on_stream_end(s));
    StreamEvent e;
    e.kind = StreamEvent::Kind::StreamEnd;
    e.stream = s;
    e.stream_name = stats.name;
    e.source = stats.source;
    e.frame = stats.classified - 1;
    e.reason = stats.end_reason_text();
    to_sinks(nullptr, &e);
    // Its last line is out: its files are finished now (a stream removed from a running service, a file that ended).
    for (size_t i = 0; i < sinks_.size(); ++i) {
      if (!sink_ok_[i]) continue;
      try {
        sinks_[i]->end_stream(s);
      } catch (const Error& err) {
        sink_ok_[i] = false;
        fail(err.code(), err.what());
      }
    }
    outputs_.finish_stream(s);
    stats.closed = true;
  }
}

}  // namespace vc::pipeline
