#include "pipeline/post_stage.hpp"

#include "config/thread_name.hpp"
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

// What a result says of its frame, before anything is classified.
FrameResult frame_result(const Frame& f, const StreamStats& stats) {
  FrameResult r;
  r.stream = f.stream;
  r.stream_name = stats.name;
  r.source = f.source.empty() ? stats.source : f.source;
  r.frame = f.index;
  r.pts_ns = f.pts_ns;
  r.damaged = f.damaged;
  r.captured_ns = steady_ns(f.captured);
  r.still_image = f.independent;
  return r;
}

}  // namespace

PostStage::PostStage(const config::Config& config, std::vector<ModelInfo> models, std::vector<StreamStats*> streams,
                     std::vector<std::unique_ptr<ResultSink>> sinks, OutputStage& outputs, EventStage* events,
                     size_t capacity)
    : config_(config),
      models_(std::move(models)),
      streams_(std::move(streams)),
      sinks_(std::move(sinks)),
      sink_ok_(sinks_.size(), true),
      outputs_(outputs),
      events_(events && events->enabled() ? events : nullptr),
      queue_(4) {
  if (models_.empty()) throw InternalError("PostStage: no model");
  capacity = std::max(capacity, streams_.size());
  streams_.resize(capacity, nullptr);
  state_.resize(capacity);
  thread_ = std::thread([this] {
    name_this_thread("vc-post");
    loop();
  });
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
        state_[size_t(added->id)] = {};
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

FrameResult PostStage::classify_item(const ModelInfo& model, const Frame& f, const WorkItem& item,
                                     std::span<const float> logits, StreamStats& stats, PerStream& st,
                                     std::vector<StreamEvent>& changes) {
  FrameResult r = frame_result(f, stats);
  r.region = item.name;
  r.box = item.box;
  r.model = model.name;
  r.model_id = model.id;
  r.finite = std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); });
  const auto probs = inference::softmax(logits);
  r.top = inference::top_k(probs, model.top_k, model.labels);
  auto [at, fresh] = st.tracked.try_emplace(item.name, Tracked{inference::Smoother(config_.smoothing.window,
                                                                                   float(config_.smoothing.threshold)), {}, model.id});
  Tracked& t = at->second;
  if (t.model_id != model.id) {  // a new model (a swap): its probabilities are not the old one's to average with
    if (!t.model_id.empty()) t.smoother.reset();
    t.model_id = model.id;
  }
  if (!r.finite) {
    ++stats.non_finite;
    if (st.non_finite_warnings++ < 3) {
      vc::log::get("pipeline")->warn("stream {}{} frame {}: the network's output holds NaN/Inf (run `video-classifier "
                                     "diagnose` to find the layer){}", stats.name,
                                     item.name.empty() ? "" : fmt::format(" region {}", item.name), f.index,
                                     st.non_finite_warnings == 3 ? "; further such frames are only counted" : "");
    }
  } else if (f.independent) {
    t.smoother.reset();  // an image is unrelated to the previous one: no smoothing across them
  } else {
    const auto s = t.smoother.update(probs);
    r.smoothed = {s.index, s.score, model.labels.empty() ? fmt::format("class {}", s.index) : model.labels[size_t(s.index)]};
    r.uncertain = s.uncertain;
  }
  if (auto change = t.labels.update(r, f.independent)) {
    change->region = item.name;
    changes.push_back(std::move(*change));
  }
  return r;
}

void PostStage::process(ClassifiedBatch& batch) {
  // Without items (a batch from before regions, or a test's): every frame whole, by the first model.
  if (batch.items.empty() && !batch.frames.empty() && !batch.logits.empty()) {
    for (size_t i = 0; i < batch.frames.size(); ++i) batch.items.push_back({int(i), -1, 0, {}, ""});
  }
  // Each item's logits: the items are in model order, each as wide as its model's classes.
  const auto& models = batch.models ? *batch.models : models_;
  std::vector<size_t> offsets(batch.items.size());
  std::vector<std::vector<size_t>> of_frame(batch.frames.size());
  size_t offset = 0;
  for (size_t k = 0; k < batch.items.size(); ++k) {
    offsets[k] = offset;
    offset += size_t(models.at(size_t(batch.items[k].model)).num_classes);
    of_frame.at(size_t(batch.items[k].frame)).push_back(k);
  }
  if (offset != batch.logits.size()) {
    throw InternalError(fmt::format("post stage: {} logits for {} items needing {}", batch.logits.size(),
                                    batch.items.size(), offset));
  }
  std::vector<StreamEvent> changes;
  for (size_t i = 0; i < batch.frames.size(); ++i) {
    Frame& f = batch.frames[i];
    StreamStats& stats = *streams_.at(size_t(f.stream));
    PerStream& st = state_[size_t(f.stream)];
    const int shown_width = f.view.shown_width(), shown_height = f.view.shown_height();
    std::optional<FrameResult> whole;
    std::vector<FrameResult> regions;
    changes.clear();
    for (size_t k : of_frame[i]) {
      const auto& item = batch.items[k];
      const auto& model = models[size_t(item.model)];
      auto r = classify_item(model, f, item, std::span<const float>(batch.logits.data() + offsets[k], size_t(model.num_classes)),
                             stats, st, changes);
      if (item.region < 0) {
        whole = std::move(r);
      } else {
        regions.push_back(std::move(r));
      }
    }
    // The regions not classified at this frame (every N) keep their latest result, for the overlay; a region taken
    // away (over the API) is drawn no more.
    if (regions_ && !st.regions.empty()) {
      const auto plan = regions_->get(f.stream);
      std::erase_if(st.regions, [&](const FrameResult& x) {
        const bool gone = std::none_of(plan->regions.begin(), plan->regions.end(),
                                       [&](const RegionPlan::Item& item) { return item.region.name == x.region; });
        if (gone) stats.forget_region(x.region);  // (nor is it in /metrics any more)
        return gone;
      });
    }
    for (auto& r : regions) {
      auto at = std::find_if(st.regions.begin(), st.regions.end(), [&](const FrameResult& x) { return x.region == r.region; });
      if (at == st.regions.end()) {
        st.regions.push_back(r);
      } else {
        *at = r;
      }
    }
    const auto now = Clock::now();
    const StageTimes stages{ms_between(f.captured, f.batched), ms_between(f.batched, batch.collected), ms_between(batch.collected, now)};
    const double latency = ms_between(f.captured, now);
    auto finish = [&](FrameResult& r) {
      r.latency_ms = latency;
      r.stages = stages;
    };
    if (whole) finish(*whole);
    for (auto& r : regions) finish(r);
    if (whole) to_sinks(&*whole, nullptr);
    for (const auto& r : regions) to_sinks(&r, nullptr);
    for (const auto& c : changes) to_sinks(nullptr, &c);
    // The frame is shared from here: the rules may keep it for a snapshot, the output draws it.
    FrameResult shown;  // what stands for the frame (snapshots, outputs): its whole picture's result, or its frame alone
    if (whole) {
      shown = *whole;
    } else {
      shown = frame_result(f, stats);
      finish(shown);
    }
    const bool tapped = tap_ && wanted_ && (*wanted_)[size_t(f.stream)].load(std::memory_order_relaxed);
    std::vector<const FrameResult*> collect;  // the results output.collect keeps (the whole picture's, a region's)
    if (collector_) {
      if (whole && collector_->wants(*whole)) collect.push_back(&*whole);
      for (const auto& r : regions) {
        if (collector_->wants(r)) collect.push_back(&r);
      }
    }
    std::shared_ptr<const Frame> frame;
    if (events_ || tapped || !collect.empty() || outputs_.draws(f.stream)) frame = std::make_shared<const Frame>(std::move(f));
    if (events_) {
      if (whole) to_sinks(events_->on_result(*whole, frame));
      for (const auto& r : regions) to_sinks(events_->on_result(r, frame));
    }
    if (tapped) tap_(frame, shown);
    for (const auto* r : collect) collector_->take(frame, *r);
    for (const auto& r : regions) {
      if (!r.top.empty()) stats.add_region_result(r.region, r.model, r.top.front());
    }
    if (whole && !whole->top.empty()) {
      stats.set_label(whole->top.front());
    } else if (!whole && !regions.empty() && !regions.front().top.empty()) {
      stats.set_label(regions.front().top.front());
    }

    stats.latency.add(latency);
    stats.queue_wait.add(stages.queue_ms);
    stats.inference.add(stages.inference_ms);
    stats.post.add(stages.post_ms);
    stats.rate.tick(now);
    ++stats.classified;
    stats.last_result_ns = steady_ns(now);
    stats.shown_width = shown_width;
    stats.shown_height = shown_height;
    if (outputs_.draws(shown.stream)) outputs_.submit({std::move(frame), std::move(shown), st.regions});
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
