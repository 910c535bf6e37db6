#include "pipeline/events/event_stage.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include "config/redact.hpp"
#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/thread_name.hpp"
#include "config/utc_time.hpp"
#include "pipeline/outputs/appsrc_feed.hpp"
#include "pipeline/outputs/frame_image.hpp"
#include "pipeline/results/results.hpp"
#include "pipeline/sources/gst_cuda.hpp"

namespace vc::pipeline {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr size_t kMaxJobs = 512;        // the writer thread's queue; beyond, jobs are dropped and counted
constexpr auto kRetentionInterval = 60s;
constexpr double kRingMarginS = 5;      // packets kept beyond pre_s + min_duration_s: the results come later
constexpr int64_t kTimelineJumpNs = 2'000'000'000;  // a keyframe this far before the newest: a new timeline

int64_t ns(double s) { return int64_t(s * 1e9); }

// The wall-clock time of stream time `at_ns`, given that the stream is at `now_ns` now.
std::chrono::system_clock::time_point wall(int64_t at_ns, int64_t now_ns) {
  return std::chrono::system_clock::now() - std::chrono::nanoseconds(std::max<int64_t>(0, now_ns - at_ns));
}

// An image written whole or not at all: a reader never sees half a JPEG.
void write_image_atomically(const cv::Mat& image, const std::string& path) {
  const auto part = path + ".part";
  write_image_file(image, part, false);
  std::error_code ec;
  fs::rename(part, path, ec);
  if (ec) throw IoError(fmt::format("{}: {}", path, ec.message()));
}

}  // namespace

struct EventStage::PerStream {
  std::vector<RuleTracker> trackers;
  std::vector<std::optional<Open>> open;  // by tracker
  struct Candidate {                      // a pending rule's best frame so far: the snapshot's, should it open
    std::shared_ptr<const Frame> frame;
    FrameResult result;
  };
  std::vector<std::optional<Candidate>> candidates;  // by tracker
  bool gop_warned = false;
  std::unique_ptr<PacketRing> ring;       // null: no clips for this stream
  std::mutex clips_mutex;                 // the ring's pushes and the active clips, as one
  struct Active {
    std::shared_ptr<ClipWriter> writer;
    int64_t until_ns;                     // it takes packets up to this time
    int64_t shown_ns = -1;                // the latest picture time it holds
  };
  std::vector<Active> clips;
  int seq = 0;
};

struct EventStage::Gate {
  std::mutex mutex;
  EventStage* stage = nullptr;  // null once the stage finished
};

EventStage::EventStage(const config::Config& cfg, std::vector<StreamStats*> streams,
                       const std::vector<std::string>& whole_labels, OverlayMaker overlay, EventStats& stats,
                       size_t capacity, const std::map<std::string, std::vector<std::string>>& region_labels)
    : settings_(cfg.events), rules_(cfg.events.rules), streams_(std::move(streams)), overlay_(std::move(overlay)),
      stats_(stats) {
  if (rules_.empty()) return;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const auto& rule = rules_[i];
    // The labels it names against those of the model that classifies what it watches: the whole picture's, or each
    // of its regions' (a region the configuration does not have yet — one set over the API — is not checked).
    std::vector<std::pair<std::string, const std::vector<std::string>*>> watched;
    if (rule.regions.empty()) watched.emplace_back("the model", &whole_labels);
    for (const auto& region : rule.regions) {
      const auto it = region_labels.find(region);
      if (it != region_labels.end()) watched.emplace_back(fmt::format("region {}'s model", region), &it->second);
    }
    for (const auto& [what, labels] : watched) {
      for (const auto& label : rule.labels) {
        if (label != "*" && !labels->empty() && std::find(labels->begin(), labels->end(), label) == labels->end()) {
          std::vector<std::string> shown(labels->begin(), labels->begin() + long(std::min<size_t>(labels->size(), 12)));
          throw ConfigError(fmt::format("events.rules[{}] ({}): '{}' is not a label of {} (its labels: {}{})", i,
                                        rule.name, label, what, fmt::join(shown, ", "),
                                        labels->size() > shown.size() ? ", …" : ""));
        }
      }
    }
    for (const auto& name : rule.streams) {  // (a run that may gain streams may gain this one)
      if (capacity <= streams_.size() && std::none_of(streams_.begin(), streams_.end(), [&](const StreamStats* s) { return s->name == name; })) {
        throw ConfigError(fmt::format("events.rules[{}] ({}): there is no stream '{}'", i, rule.name, name));
      }
    }
  }
  std::error_code ec;
  fs::create_directories(settings_.dir, ec);
  if (ec) throw CantCreateError(fmt::format("events.dir: cannot create {}: {}", settings_.dir, ec.message()));
  for (const auto& r : rules_) longest_wait_ = std::max(longest_wait_, r.min_duration_s);
  capacity = std::max(capacity, streams_.size());
  const auto initial = streams_;
  streams_.assign(capacity, nullptr);
  per_stream_.resize(capacity);
  gates_.resize(capacity);
  for (size_t i = 0; i < initial.size(); ++i) add_stream(int(i), *initial[i]);
  retention_ = std::make_unique<Retention>(settings_.dir, settings_.retain_days, settings_.retain_gib);
  thread_ = std::thread([this] {
    name_this_thread("vc-events");
    work();
  });
  vc::log::get("events")->info("{} event rule(s); clips {}, snapshots {}; in {}", rules_.size(),
                               settings_.clips ? "on" : "off", settings_.snapshots ? "on" : "off", settings_.dir);
}

EventStage::~EventStage() {
  try {
    finish();
  } catch (const std::exception& e) {
    vc::log::get("events")->error("{}", e.what());
  }
}

void EventStage::add_stream(int id, StreamStats& stats) {
  if (rules_.empty()) return;
  auto ps = std::make_unique<PerStream>();
  for (const auto& rule : rules_) {
    if (!rule.streams.empty() && std::find(rule.streams.begin(), rule.streams.end(), stats.name) == rule.streams.end()) {
      continue;
    }
    if (rule.regions.empty()) {
      ps->trackers.emplace_back(rule, settings_.release_s, settings_.update_s);
    } else {  // one per region it watches, each on its own
      for (const auto& region : rule.regions) ps->trackers.emplace_back(rule, settings_.release_s, settings_.update_s, region);
    }
  }
  ps->open.resize(ps->trackers.size());
  ps->candidates.resize(ps->trackers.size());
  if (!ps->trackers.empty()) {
    const auto folder = fs::path(settings_.dir) / stats.name;
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) throw CantCreateError(fmt::format("events.dir: cannot create {}: {}", folder.string(), ec.message()));
    if (settings_.clips) {
      ps->ring = std::make_unique<PacketRing>(settings_.pre_s + longest_wait_ + kRingMarginS, size_t(settings_.buffer_mb) << 20);
    }
  }
  auto gate = std::make_shared<Gate>();
  gate->stage = this;
  const size_t s = size_t(id);
  if (s >= per_stream_.size()) throw InternalError(fmt::format("stream {}: beyond the run's capacity", id));
  if (auto& old = gates_[s]) {  // a slot a removed stream had: its sink (its thread has finished) takes nothing more
    std::lock_guard lock(old->mutex);
    old->stage = nullptr;
  }
  if (auto& old = per_stream_[s]; old && old->ring) {  // (its packets go with it)
    std::lock_guard lock(old->clips_mutex);
    stats_.buffer_bytes -= int64_t(old->ring->bytes());
  }
  streams_[s] = &stats;
  per_stream_[s] = std::move(ps);
  gates_[s] = std::move(gate);
}

PacketSink EventStage::packet_sink(int stream) {
  if (size_t(stream) >= per_stream_.size() || !per_stream_[size_t(stream)] || !per_stream_[size_t(stream)]->ring) return nullptr;
  return [gate = gates_[size_t(stream)], stream](const Packet& p) {
    std::lock_guard lock(gate->mutex);
    if (gate->stage) gate->stage->on_packet(stream, p);
  };
}

void EventStage::close_clips(PerStream& ps) {
  std::lock_guard finishing(finishing_mutex_);
  for (auto& a : ps.clips) {
    a.writer->close();
    finishing_.push_back(a.writer);
  }
  ps.clips.clear();
}

void EventStage::on_packet(int stream, const Packet& packet) {
  auto& ps = *per_stream_[size_t(stream)];
  std::lock_guard lock(ps.clips_mutex);
  const auto newest = ps.ring->newest_ns();
  if (packet.keyframe && packet.pts_ns >= 0 && newest >= 0 && packet.pts_ns < newest - kTimelineJumpNs) {
    ps.ring->clear();  // the source restarted: its old packets belong to another timeline
    close_clips(ps);
  }
  const auto before = int64_t(ps.ring->bytes());
  ps.ring->push(packet);
  stats_.buffer_bytes += int64_t(ps.ring->bytes()) - before;
  for (auto it = ps.clips.begin(); it != ps.clips.end();) {
    // Complete: past the end + post_s in decode order, at a picture shown after every one before it (a reference
    // picture: every B-frame shown before it is in) — the clip shows every picture of its span, none missing.
    const bool past = (packet.dts_ns >= 0 ? packet.dts_ns : packet.pts_ns) > it->until_ns;
    if (past && packet.pts_ns > it->shown_ns) {
      it->writer->close();
      std::lock_guard finishing(finishing_mutex_);
      finishing_.push_back(it->writer);
      it = ps.clips.erase(it);
      continue;
    }
    it->writer->push(packet);
    it->shown_ns = std::max(it->shown_ns, packet.pts_ns);
    ++it;
  }
}

void EventStage::start_clip(int stream, Open& open) {
  auto& ps = *per_stream_[size_t(stream)];
  if (!ps.ring) return;
  const auto& name = streams_[size_t(stream)]->name;
  std::lock_guard lock(ps.clips_mutex);  // no packet between the ring's copy and the writer's registration
  const int64_t from = open.event.start_ns - ns(settings_.pre_s);
  const auto packets = ps.ring->since(from);
  if (packets.empty()) {
    failed(fmt::format("stream {}: no video buffered for the clip of {}{}", name, open.event.id,
                       ps.ring->overflowed() ? " (a group of pictures is larger than events.clips.buffer_mb)" : ""));
    return;
  }
  if (packets.front().pts_ns > from && ps.ring->overflowed() && !std::exchange(ps.gop_warned, true)) {
    vc::log::get("events")->warn("stream {}: a group of pictures is larger than events.clips.buffer_mb ({} MB): clips "
                                 "start later than pre_s asks", name, settings_.buffer_mb);
  }
  open.event.clip = open.base + clip_extension(packets.front().caps.get());
  const auto& key = packets.front();  // the clip's time 0 (ClipWriter): its first decode time
  open.event.clip_start_ns = key.dts_ns >= 0 ? std::min(key.dts_ns, key.pts_ns) : key.pts_ns;
  open.clip = std::make_shared<ClipWriter>(open.event.clip, packets.front().caps);
  int64_t shown = -1;
  for (const auto& p : packets) {
    open.clip->push(p);
    shown = std::max(shown, p.pts_ns);
  }
  ps.clips.push_back({open.clip, INT64_MAX, shown});
}

void EventStage::stop_clip(int stream, const std::shared_ptr<ClipWriter>& clip, int64_t until_ns) {
  if (!clip) return;
  auto& ps = *per_stream_[size_t(stream)];
  std::lock_guard lock(ps.clips_mutex);
  for (auto& a : ps.clips) {
    if (a.writer == clip) a.until_ns = until_ns;
  }
}

StreamEvent EventStage::to_stream_event(int stream, const RuleTracker::Change& change, Open& open, const FrameResult* r) {
  // The tracker knows the stream-time facts; the stage adds identity, wall-clock times and files.
  RuleEvent e = change.event;
  e.type = change.type;
  e.id = open.event.id;
  e.start_time = open.event.start_time;
  e.end_time = open.event.end_time;
  e.clip = open.event.clip;
  e.clip_start_ns = open.event.clip_start_ns;
  e.snapshot = open.event.snapshot;
  e.thumbnail = open.event.thumbnail;
  open.event = e;
  StreamEvent out;
  out.kind = StreamEvent::Kind::Rule;
  out.stream = stream;
  out.stream_name = streams_[size_t(stream)]->name;
  out.region = e.region;
  out.source = streams_[size_t(stream)]->source;
  out.frame = r ? r->frame : -1;
  out.pts_ns = r ? r->pts_ns : -1;
  out.rule = e;
  return out;
}

std::vector<StreamEvent> EventStage::on_result(const FrameResult& r, const std::shared_ptr<const Frame>& frame) {
  std::vector<StreamEvent> out;
  if (rules_.empty() || r.stream < 0 || size_t(r.stream) >= per_stream_.size() || !per_stream_[size_t(r.stream)] ||
      r.still_image) {
    return out;
  }
  auto& ps = *per_stream_[size_t(r.stream)];
  const auto& name = streams_[size_t(r.stream)]->name;
  const int64_t t = r.pts_ns >= 0 ? r.pts_ns : r.captured_ns;
  for (size_t k = 0; k < ps.trackers.size(); ++k) {
    auto& tracker = ps.trackers[k];
    if (tracker.region() != r.region) continue;  // (a region's results feed its own rules alone)
    const auto change = tracker.update(r, t);
    auto& slot = ps.open[k];
    auto& candidate = ps.candidates[k];
    if (!slot && !change && settings_.snapshots) {  // not open: keep the pending rule's best frame, if any
      if (!tracker.pending()) {
        candidate.reset();
      } else if (frame && tracker.peak_frame() == r.frame) {
        candidate = PerStream::Candidate{frame, r};
      }
    }
    if (change && change->type == "new") {
      slot.emplace();
      slot->event = change->event;  // (the clip starts from its start_ns)
      const auto start = wall(change->event.start_ns, t);
      // Unique in the run, and never the name of files already there (a stream removed and added again within the
      // second, a restart): an event's files are never written over.
      for (;;) {
        slot->event.id = fmt::format("{}-{}{}-{}-{}", name, change->event.rule,
                                     r.region.empty() ? "" : "-" + r.region, utc_text(start, UtcForm::kCompact), ++ps.seq);
        slot->base = (fs::path(settings_.dir) / name / slot->event.id).string();
        std::error_code ec;
        if (!fs::exists(slot->base + ".jpg", ec) && !fs::exists(slot->base + ".mp4", ec) &&
            !fs::exists(slot->base + ".mkv", ec) && !fs::exists(slot->base + ".mp4.partial", ec) &&
            !fs::exists(slot->base + ".mkv.partial", ec)) {
          break;
        }
      }
      slot->event.start_time = utc_text(start, UtcForm::kMillis);
      if (settings_.snapshots) {
        slot->event.snapshot = slot->base + ".jpg";
        slot->event.thumbnail = slot->base + "-thumb.jpg";
      }
      ++stats_.opened;
      ++streams_[size_t(r.stream)]->events;
      start_clip(r.stream, *slot);
      if (candidate) {
        queue_peak({Job::Kind::Peak, "", slot->event.id, "", "", false, candidate->frame, candidate->result});
        candidate.reset();
      }
    }
    if (!slot) continue;
    if (!change) {  // an open event whose peak rose: the snapshot's next candidate
      if (settings_.snapshots && frame && tracker.peak_frame() == r.frame) {
        queue_peak({Job::Kind::Peak, "", slot->event.id, "", "", false, frame, r});
      }
      continue;
    }
    if (change->type == "end") slot->event.end_time = utc_text(wall(change->event.end_ns, t), UtcForm::kMillis);
    out.push_back(to_stream_event(r.stream, *change, *slot, &r));
    const auto& e = out.back().rule;
    if (settings_.snapshots && frame && e.peak_frame == r.frame) {
      queue_peak({Job::Kind::Peak, "", e.id, "", "", false, frame, r});
    }
    if (change->type == "update") ++stats_.updated;
    if (change->type != "update" && settings_.snapshots) {
      queue({Job::Kind::Snapshot, "", e.id, e.snapshot, e.thumbnail, change->type == "end", nullptr, {}});
    }
    queue({Job::Kind::Line, to_json(out.back()), "", "", "", false, nullptr, {}});
    if (change->type == "end") {
      stop_clip(r.stream, slot->clip, e.end_ns + ns(settings_.post_s));
      ++stats_.ended;
      slot.reset();
    }
  }
  return out;
}

std::vector<StreamEvent> EventStage::on_stream_end(int stream) {
  std::vector<StreamEvent> out;
  if (rules_.empty() || stream < 0 || size_t(stream) >= per_stream_.size() || !per_stream_[size_t(stream)]) return out;
  auto& ps = *per_stream_[size_t(stream)];
  for (size_t k = 0; k < ps.trackers.size(); ++k) {
    ps.candidates[k].reset();
    auto& slot = ps.open[k];
    if (!slot) continue;
    if (auto change = ps.trackers[k].stream_ended(std::max(slot->event.peak_ns, slot->event.start_ns))) {
      slot->event.end_time = utc_now(UtcForm::kMillis);
      out.push_back(to_stream_event(stream, *change, *slot, nullptr));
      const auto& e = out.back().rule;
      if (settings_.snapshots) queue({Job::Kind::Snapshot, "", e.id, e.snapshot, e.thumbnail, true, nullptr, {}});
      queue({Job::Kind::Line, to_json(out.back()), "", "", "", false, nullptr, {}});
      ++stats_.ended;
    }
    slot.reset();
  }
  if (ps.ring) {  // no more packets will come: every clip of the stream is complete
    std::lock_guard lock(ps.clips_mutex);
    close_clips(ps);
  }
  return out;
}

void EventStage::queue(Job job) {
  {
    std::lock_guard lock(queue_mutex_);
    if (stop_) return;
    if (jobs_.size() >= kMaxJobs) {  // the disk is that slow: drop rather than hold back the video
      ++stats_.dropped;
      return;
    }
    jobs_.push_back(std::move(job));
  }
  queue_cv_.notify_one();
}

// A better peak replaces the one still waiting: at most one frame per event is held (a decoder's buffers are few).
void EventStage::queue_peak(Job job) {
  {
    std::lock_guard lock(queue_mutex_);
    for (auto& waiting : jobs_) {
      if (waiting.kind == Job::Kind::Peak && waiting.id == job.id) {
        waiting = std::move(job);
        return;
      }
    }
  }
  queue(std::move(job));
}

// A finished file into the retention index; one that cannot be recorded would never be deleted: a failure, counted.
void EventStage::record(const std::string& path) {
  try {
    retention_->add(path);
  } catch (const Error& e) {
    failed(e.what());
  }
}

void EventStage::failed(const std::string& what) {
  const auto n = ++stats_.failures;
  if (n <= 5 || (n & (n - 1)) == 0) {  // the first few, then ever more rarely: a full disk does not flood the log
    vc::log::get("events")->error("{} (event recording goes on; classification is not affected){}", what,
                                  n == 5 ? "; further failures are logged more rarely" : "");
  }
}

void EventStage::take_peak(const Job& job) {
  const Frame host = in_host_memory(*job.frame);
  cv::Mat image = to_bgr(host.view);
  if (!settings_.snapshots_clean) {
    const auto& stats = *streams_[size_t(job.result.stream)];
    if (!job.result.region.empty()) draw_regions(image, {job.result}, overlay_.style);  // a region's event: it, outlined
    draw_overlay(image, overlay_.make(job.result, stats, job.result.pts_ns), overlay_.style);
  }
  peaks_[job.id] = std::move(image);
}

void EventStage::write_snapshot(const Job& job) {
  const auto it = peaks_.find(job.id);
  if (it == peaks_.end()) return;  // its peak frame could not be read (said already)
  write_image_atomically(it->second, job.snapshot);
  const int width = std::min(settings_.thumbnail_px, it->second.cols);
  cv::Mat thumb;
  cv::resize(it->second, thumb, cv::Size(width, std::max(1, it->second.rows * width / it->second.cols)), 0, 0,
             cv::INTER_AREA);
  write_image_atomically(thumb, job.thumbnail);
  if (!job.last) return;
  peaks_.erase(it);
  ++stats_.snapshots;
  record(job.snapshot);
  record(job.thumbnail);
}

void EventStage::write_line(int fd, const std::string& path, const std::string& text) {
  if (fd < 0) return;
  const auto line = config::redact_credentials(text) + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw IoError(fmt::format("{}: cannot write: {}", path, std::strerror(n < 0 ? errno : ENOSPC)));
    done += size_t(n);
  }
}

// Clips whose threads finished them: counted and indexed for retention, or reported.
void EventStage::collect_finished_clips() {
  std::vector<std::shared_ptr<ClipWriter>> done;
  {
    std::lock_guard lock(finishing_mutex_);
    auto it = std::stable_partition(finishing_.begin(), finishing_.end(), [](const auto& c) { return !c->done(); });
    done.assign(it, finishing_.end());
    finishing_.erase(it, finishing_.end());
  }
  for (const auto& clip : done) {
    if (auto error = clip->error()) {
      failed("event clip " + *error);
      std::error_code ec;
      if (fs::exists(clip->path(), ec)) record(clip->path());  // what was written stays playable, and bounded
      continue;
    }
    std::error_code ec;
    stats_.clip_bytes += int64_t(fs::file_size(clip->path(), ec));
    ++stats_.clips;
    if (clip->dropped() > 0) {
      vc::log::get("events")->warn("event clip {}: {} packet(s) dropped (the disk was too slow)", clip->path(),
                                   clip->dropped());
    }
    record(clip->path());
  }
  if (!done.empty()) {
    const auto now_s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    for (const auto& f : retention_->enforce(now_s)) vc::log::get("events")->info("retention: deleted {}", f);
  }
}

void EventStage::work() {
  const auto jsonl = (fs::path(settings_.dir) / "events.jsonl").string();
  const int fd = ::open(jsonl.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) failed(fmt::format("{}: cannot write the events file: {}", jsonl, std::strerror(errno)));
  auto next_retention = std::chrono::steady_clock::now();
  for (;;) {
    std::optional<Job> job;
    {
      std::unique_lock lock(queue_mutex_);
      if (jobs_.empty() && stop_) {
        queue_cv_.wait_for(lock, 10ms);  // stopping: only clips still being finished
      } else {
        queue_cv_.wait_for(lock, 1s, [&] { return stop_ || !jobs_.empty(); });
      }
      if (!jobs_.empty()) {
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
    }
    try {
      if (job && job->kind == Job::Kind::Line) write_line(fd, jsonl, job->text);
      if (job && job->kind == Job::Kind::Peak) take_peak(*job);
      if (job && job->kind == Job::Kind::Snapshot) write_snapshot(*job);
    } catch (const std::exception& e) {
      failed(e.what());
    }
    try {
      collect_finished_clips();
      if (std::chrono::steady_clock::now() >= next_retention) {
        next_retention = std::chrono::steady_clock::now() + kRetentionInterval;
        const auto now_s =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
        for (const auto& f : retention_->enforce(now_s)) vc::log::get("events")->info("retention: deleted {}", f);
      }
    } catch (const std::exception& e) {
      failed(e.what());
    }
    std::lock_guard lock(queue_mutex_);
    if (stop_ && jobs_.empty()) {
      std::lock_guard finishing(finishing_mutex_);
      if (finishing_.empty()) break;
    }
  }
  if (fd >= 0) ::close(fd);
}

void EventStage::finish() {
  if (finished_ || rules_.empty()) return;
  finished_ = true;
  for (auto& gate : gates_) {  // a source still running (left behind) gives its packets to no one
    if (!gate) continue;
    std::lock_guard lock(gate->mutex);
    gate->stage = nullptr;
  }
  for (size_t s = 0; s < per_stream_.size(); ++s) (void)on_stream_end(int(s));
  {
    std::lock_guard lock(queue_mutex_);
    stop_ = true;  // the writer thread empties its queue, sees every clip finished, and stops
  }
  queue_cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  stats_.buffer_bytes = 0;
}

}  // namespace vc::pipeline
