#include "pipeline/sources/stream.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "config/logging.hpp"
#include "config/redact.hpp"
#include "config/thread_name.hpp"
#include "pipeline/sources/gst_cuda.hpp"
#include "pipeline/sources/image_files.hpp"

namespace vc::pipeline {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto kPoll = 100ms;              // how often the supervisor looks: Ctrl-C acts within this
// A file yielding fewer frames than this share of what its container declares (duration x frame rate) failed: it
// is damaged. Generous, so that files with a variable frame rate never trip it.
constexpr double kShortFileRatio = 0.75;

std::string source_of(const config::Input& in) {
  switch (in.kind) {
    case config::InputKind::Test: return "test:" + in.pattern;
    case config::InputKind::File:
    case config::InputKind::Image: return in.path;
    case config::InputKind::Uri: return in.uri;
    case config::InputKind::Webcam: return in.device;
  }
  return "?";
}

double seconds_since(int64_t steady) {
  return std::chrono::duration<double>(Clock::now() - from_steady_ns(steady)).count();
}

}  // namespace

std::shared_ptr<GstContext> share_context(GstContext* owned) {
  return {owned, [](GstContext* c) {
            if (c) gst_context_unref(c);
          }};
}

std::vector<std::shared_ptr<GstContext>> decoder_contexts(const std::vector<int>& devices, bool draw) {
  std::vector<std::shared_ptr<GstContext>> contexts;
  for (size_t at = 0; at < devices.size(); ++at) {
    std::shared_ptr<GstContext> context;
    for (size_t i = 0; i < at; ++i) {
      if (devices[i] == devices[at]) context = contexts[i];
    }
    if (!context && devices[at] >= 0 && !draw) {
      try {
        context = share_context(make_shared_cuda_context(devices[at]));
      } catch (const Error& e) {
        vc::log::get("pipeline")->warn("NVDEC frames will be copied through host memory: {}", e.what());
      }
    }
    contexts.push_back(context);
  }
  return contexts;
}

Stream::Stream(int id, config::Input input, bool gpu_frames, StreamEnvironment env,
               std::shared_ptr<const OpenedInput> opened)
    : id_(id), input_(std::move(input)), gpu_frames_(gpu_frames), env_(std::move(env)), opened_(std::move(opened)) {
  stats_.name = input_.name;
  stats_.source = config::redact_credentials(source_of(input_));  // (what every output shows: no password)
  stats_.live = is_live_input(input_);
}

Stream::~Stream() {
  join();
  if (wake_bus_) gst_object_unref(wake_bus_);
}

void Stream::start() {
  stats_.opening_ns = steady_ns(Clock::now());
  if (input_.kind == config::InputKind::Image) {
    if (opened_ && opened_->directory) images_ = image_files_in(opened_->fd, input_.path);
    else if (opened_) images_ = {input_.path};
    else images_ = image_files(input_.path);
  } else {
    set_source(open());
  }
  // "starting" until its first frame (a camera's handshake, a decoder's start), then "running".
  stats_.started_ns = steady_ns(Clock::now());
  thread_ = std::thread([this] {
    name_this_thread("vc-stream");
    supervise();
  });
}

void Stream::join() {
  if (thread_.joinable()) thread_.join();
}

bool Stream::join_for(std::chrono::milliseconds limit) {
  if (!thread_.joinable()) return true;
  std::unique_lock lock(done_mutex_);
  if (!done_cv_.wait_for(lock, limit, [&] { return done_; })) return false;
  lock.unlock();
  thread_.join();
  return true;
}

bool Stream::finished() const {
  if (!thread_.joinable()) return true;
  std::lock_guard lock(done_mutex_);
  return done_;
}

std::optional<Failure> Stream::failure() const {
  std::lock_guard lock(abort_mutex_);
  return aborted_ ? aborted_ : failure_;  // (aborted after its end: its last frames were lost with its engine)
}

void start_all(std::vector<std::unique_ptr<Stream>>& streams, size_t threads) {
  const size_t n = streams.size();
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  {
    std::vector<std::jthread> workers;  // (joined however this block is left)
    for (size_t k = 0; k < std::min(n, std::max<size_t>(threads, 1)); ++k) {
      workers.emplace_back([&] {
        for (size_t i; (i = next++) < n;) {
          try {
            streams[i]->start();
          } catch (...) {
            errors[i] = std::current_exception();
          }
        }
      });
    }
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::unique_ptr<GstSource> Stream::open(const std::string& image_file) {
  Placer place;
  if (env_.place) {
    place = [this](const DecodeLoad& load) {
      auto p = env_.place(id_, load);
      stats_.gpu = p.cuda_device;
      stats_.engine = p.engine;
      return p;
    };
  }
  config::Input input;
  {
    std::lock_guard lock(regions_mutex_);
    input = input_;
  }
  SourceSpec spec{std::move(input), image_file, "", gpu_frames_, std::move(place), env_.on_packet, env_.packets_wanted};
  if (opened_ && !opened_->directory) spec.open_path = opened_->proc_path();
  if (opened_ && opened_->directory && !image_file.empty()) {  // one image of an opened folder: opened from it
    image_fd_.reset();
    const int fd = open_image_in(opened_->fd, fs::path(image_file).filename().string());
    if (fd < 0) throw NoInputError(fmt::format("{}: cannot be read ({})", image_file, std::strerror(errno)));
    image_fd_ = std::make_unique<OpenedInput>(fd, false);
    spec.open_path = image_fd_->proc_path();
  }
  pass_frames_ = 0;
  last_pts_ = -1;
  return std::make_unique<GstSource>(std::move(spec), [this](Frame&& f) { return on_frame(std::move(f)); });
}

// What the decoder could not decode, or decoded from damaged data, in the pass that just ended (nullopt: nothing).
std::optional<std::string> Stream::damage_found() {
  if (!source_) return std::nullopt;
  const auto counts = source_->decoder_counts();
  const int64_t lost = counts.one_to_one ? std::max<int64_t>(0, counts.in - counts.out) : 0;
  stats_.lost_frames += lost;
  if (lost == 0 && counts.damaged == 0) return std::nullopt;
  std::string what;
  if (lost > 0) what = fmt::format("{} of the {} frames the decoder was given could not be decoded", lost, counts.in);
  if (counts.damaged > 0) {
    what += fmt::format("{}{} frame(s) were decoded from damaged data (\"damaged\": true in the results)",
                        what.empty() ? "" : ", ", counts.damaged);
  }
  return fmt::format("{}: the file is damaged: {}", stats_.source, what);
}

bool Stream::on_frame(Frame&& f) {
  if (stopping()) return false;
  f.stream = id_;
  f.index = next_index_++;
  const bool damaged = f.damaged;
  const int64_t pts = f.pts_ns;
  const int64_t now = steady_ns(f.captured);
  int64_t none = 0;
  stats_.first_frame_ns.compare_exchange_strong(none, now);
  auto starting = StreamState::Starting;
  stats_.state.compare_exchange_strong(starting, StreamState::Running);
  stats_.last_frame_ns = now;
  waiting_for_room_ = true;  // a file's push waits while its queue is full
  const bool accepted = env_.hub->push(std::move(f));
  progress_ns_ = steady_ns(Clock::now());
  waiting_for_room_ = false;
  if (!accepted) return false;
  ++pass_frames_;
  if (pts > last_pts_) last_pts_ = pts;
  const int64_t delivered = ++stats_.delivered;
  if (damaged) ++stats_.damaged_frames;
  stats_.queue_dropped = env_.hub->dropped(id_);
  // max_frames counts frames classified: a live stream's dropped frames do not count. Once no more are pushed, none
  // of those waiting is dropped any more, so every frame counted here gets its result.
  if (input_.max_frames > 0 && delivered - stats_.queue_dropped >= input_.max_frames) {
    max_reached_ = true;  // the supervisor ends the stream; the source gets end-of-stream from here
    return false;
  }
  return true;
}

bool Stream::wait_interruptibly(double seconds) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < until) {
    if (stopping()) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(kPoll, until - Clock::now()));
  }
  return !stopping();
}

void Stream::emit(StreamEvent::Kind kind, const std::string& reason, int64_t attempt) {
  StreamEvent e;
  e.kind = kind;
  e.stream = id_;
  e.stream_name = input_.name;
  e.source = stats_.source;
  e.frame = next_index_ - 1;
  e.reason = reason;
  e.attempt = attempt;
  if (env_.on_event) env_.on_event(std::move(e));
}

GstSource::State Stream::run_source(Failure& why) {
  progress_ns_ = steady_ns(Clock::now());
  for (;;) {
    const auto state = source_->poll(kPoll);
    if (down_ && pass_frames_ > 0) {  // frames flow again after a restart: say so as soon as they do
      emit(StreamEvent::Kind::StreamUp, "frames flow again");
      vc::log::get("pipeline")->info("stream {}: up again after {} restart(s)", input_.name, attempts_);
      down_ = false;
      attempts_ = 0;
      delay_ = input_.reconnect.delay_s;
      stats_.state = StreamState::Running;
    }
    stats_.set_decoder(source_->decoder());
    stats_.gpu_frames = source_->delivers_gpu_frames();
    if (stats_.decoded_ns == 0) {  // (the first pass's: where the stream's start went)
      const auto times = source_->start_times();
      stats_.linked_ns = times.linked_ns;
      stats_.decoded_ns = times.decoded_ns;
    }
    if (stats_.expected < 0 && pass_frames_ > 0 && !input_.loop) stats_.expected = source_->expected_frames();
    if (!live_decided_ && pass_frames_ > 0) decide_liveness();
    if (state == GstSource::State::Failed) {
      why = source_->failure();
      return state;
    }
    if (state == GstSource::State::Ended || stopping()) return GstSource::State::Ended;
    // The watchdog: no frame from the source for stall_timeout_s — until its first frame, for the start allowance
    // (input.start_timeout_s, if longer: a slow handshake, or 150 streams starting at once, is not a stall).
    // A source waiting for room in its full queue is not stalled — the engine is slow (16 processes autotuning at
    // once did it): the time counts again from when the frame got in.
    const bool started = pass_frames_ > 0;
    const double limit = started ? input_.stall_timeout_s : std::max(input_.stall_timeout_s, input_.start_timeout_s);
    if (input_.stall_timeout_s > 0 && !waiting_for_room_ && seconds_since(progress_ns_) > limit) {
      why = {stats_.live ? ExitCode::kUnavailable : ExitCode::kData,
             started ? fmt::format("{}: no frame for {:.0f} s (stalled)", stats_.source, limit)
                     : fmt::format("{}: no first frame {:.0f} s after it started (stalled; input.start_timeout_s)",
                                   stats_.source, limit)};
      return GstSource::State::Failed;
    }
  }
}

// An http(s) clip is finite unless its server gives it no end: no duration once frames flow (a live HLS playlist,
// a camera's MJPEG over http) makes it a live stream from then on — it drops stale frames and restarts when it ends.
void Stream::decide_liveness() {
  live_decided_ = true;
  const bool http = input_.kind == config::InputKind::Uri && (input_.uri.rfind("http://", 0) == 0 ||
                                                               input_.uri.rfind("https://", 0) == 0);
  if (!http || input_.live != config::Live::Auto || stats_.live || source_->duration_known()) return;
  stats_.live = true;
  env_.hub->set_policy(id_, {2, true});
  vc::log::get("pipeline")->info("stream {}: {} has no duration: treated as live (input.live: false treats it as a clip)",
                                 input_.name, stats_.source);
}

void Stream::supervise() {
  struct Done {  // tells join_for() the thread is about to end, however it ends
    Stream* s;
    ~Done() {
      std::lock_guard lock(s->done_mutex_);
      s->done_ = true;
      s->done_cv_.notify_all();
    }
  } done{this};
  try {
    if (input_.kind == config::InputKind::Image) {
      supervise_images();
    } else {
      supervise_source();
    }
  } catch (const Error& e) {
    finish_with(Failure{e.code(), e.what()});
  } catch (const std::exception& e) {
    finish_with(Failure{ExitCode::kInternal, e.what()});
  }
}

void Stream::abort(Failure why) {
  {
    std::lock_guard lock(abort_mutex_);
    aborted_ = std::move(why);
  }
  removed_ = true;
  wake();
}

void Stream::remove() {
  removed_ = true;
  wake();  // the supervisor looks at once, not at its next poll
}

void Stream::set_source(std::unique_ptr<GstSource> source) {
  GstBus* old = nullptr;
  {
    std::lock_guard lock(wake_mutex_);
    old = std::exchange(wake_bus_, source ? source->bus_ref() : nullptr);
  }
  if (old) gst_object_unref(old);
  source_ = std::move(source);  // (the one before is stopped here, on the stream's thread)
}

void Stream::wake() {
  std::lock_guard lock(wake_mutex_);
  if (wake_bus_) gst_bus_post(wake_bus_, gst_message_new_application(nullptr, gst_structure_new_empty("vc-wake")));
}

void Stream::finish_with(std::optional<Failure> failure) {
  env_.hub->close(id_);  // first: the run must not wait for the teardown below (a stuck network source)
  set_source(nullptr);       // stops the pipeline: no more frames from it
  {
    std::lock_guard lock(abort_mutex_);
    if (aborted_) failure = aborted_;  // its engine failed: that is why it ends, whatever its source did
  }
  if (failure) {
    failure_ = failure;
    stats_.set_error(failure->message);
    stats_.state = StreamState::Failed;
    vc::log::get("pipeline")->error("stream {}: {}", input_.name, failure->message);
  } else {
    stats_.state = StreamState::Ended;
  }
  // The stream_end event itself is sent by the post-processing stage once the stream's last result is out.
  stats_.set_end_reason(failure ? failure->message
                                : removed_         ? "removed"
                                : env_.stop->load() ? "stopped"
                                : max_reached_      ? "max_frames reached"
                                                    : "end of input");
}

void Stream::supervise_source() {
  auto log = vc::log::get("pipeline");
  delay_ = input_.reconnect.delay_s;
  Failure why;  // why the source stopped (also: why reopening it failed)
  for (;;) {
    // Without a source the last attempt to open one failed, and `why` says why.
    const auto state = source_ ? run_source(why) : GstSource::State::Failed;
    if (stopping()) return finish_with(std::nullopt);
    // A finite source (a file, also one paced in real time, a clip over http) ends or fails for good; only cameras
    // and network streams come back.
    const bool file = !stats_.live || input_.kind == config::InputKind::File;
    if (file) {
      if (state == GstSource::State::Failed) return finish_with(why);
      // A file at its end: check it gave what it holds, then loop or finish.
      const int64_t expected = stats_.expected;
      if (pass_frames_ == 0) {
        return finish_with(Failure{ExitCode::kData, fmt::format("{}: no frame could be decoded", stats_.source)});
      }
      // Short of what the container declares, and damaged by the signs: decoding warnings, or frames that stop well
      // before the end (a cut file). A variable-rate recording is short of "duration x rate" too, but has neither.
      const bool cut_short = source_ && source_->duration_ns() > 0 && last_pts_ >= 0 &&
                             double(last_pts_) < 0.9 * double(source_->duration_ns());
      const bool damaged = source_ && (source_->warnings() > 0 || cut_short);
      if (expected >= 10 && double(pass_frames_) < kShortFileRatio * double(expected) && damaged) {
        return finish_with(Failure{ExitCode::kData,
                                         fmt::format("{}: decoded only {} of the {} frames the file holds (damaged?)",
                                                     stats_.source, pass_frames_.load(), expected)});
      }
      if (auto damage = damage_found(); damage && input_.on_damage == config::OnDamage::Fail) {
        return finish_with(Failure{ExitCode::kData, *damage + " (input.on_damage: warn accepts it)"});
      } else if (damage) {
        vc::log::get("pipeline")->warn("stream {}: {} (accepted: input.on_damage is warn)", input_.name, *damage);
      }
      if (!input_.loop) return finish_with(std::nullopt);
      pass_frames_ = 0;
      last_pts_ = -1;
      ++stats_.loops;
      if (!source_->rewind()) {  // (a file that cannot seek: opened again)
        set_source(nullptr);
        set_source(open());
      }
      continue;
    }
    // The configuration does not fit it (a region outside its picture): a restart would not change that.
    if (state == GstSource::State::Failed && why.code == ExitCode::kConfig) return finish_with(why);
    // A live source failed, ended or stalled: restart it, with backoff.
    if (state == GstSource::State::Ended) why = {ExitCode::kUnavailable, stats_.source + ": the source ended"};
    set_source(nullptr);
    if (!down_) {
      emit(StreamEvent::Kind::StreamDown, why.message, attempts_ + 1);
      down_ = true;
    }
    if (input_.reconnect.attempts > 0 && attempts_ >= input_.reconnect.attempts) {
      why.message = fmt::format("gave up after {} restart(s): {}", attempts_, why.message);
      return finish_with(why);
    }
    ++attempts_;
    stats_.state = StreamState::Reconnecting;
    log->warn("stream {}: {} — restarting in {:.1f} s (attempt {}{})", input_.name, why.message, delay_, attempts_,
              input_.reconnect.attempts > 0 ? fmt::format(" of {}", input_.reconnect.attempts) : "");
    if (!wait_interruptibly(delay_)) return finish_with(std::nullopt);
    delay_ = std::min(delay_ * 2, input_.reconnect.max_delay_s);
    ++stats_.reconnects;
    try {
      set_source(open());
    } catch (const Error& e) {
      set_source(nullptr);
      why = {e.code(), e.what()};
    }
  }
}

void Stream::supervise_images() {
  auto log = vc::log::get("pipeline");
  std::optional<Failure> first_failure;
  int64_t failed = 0;
  do {
    for (const auto& file : images_) {
      if (stopping()) break;
      Failure why;
      GstSource::State state = GstSource::State::Failed;
      try {
        set_source(open(file));
        state = run_source(why);
      } catch (const Error& e) {
        why = {e.code(), e.what()};
      }
      set_source(nullptr);
      if (state == GstSource::State::Ended && pass_frames_ == 0 && !stopping()) {
        why = {ExitCode::kData, file + ": no image could be decoded"};
        state = GstSource::State::Failed;
      }
      if (state == GstSource::State::Failed) {
        ++failed;
        ++stats_.failed_items;
        log->warn("stream {}: skipping {}", input_.name, why.message);
        if (!first_failure) first_failure = why;
      }
    }
  } while (input_.loop && !stopping() && failed < int64_t(images_.size()));
  if (first_failure) {
    first_failure->message = fmt::format("{} of {} image(s) could not be decoded; the first: {}", failed,
                                         images_.size(), first_failure->message);
  }
  finish_with(first_failure);
}

}  // namespace vc::pipeline
