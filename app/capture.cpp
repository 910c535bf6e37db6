// `video-classifier capture`: frames of any input (webcam, file, RTSP, images, test pattern) saved as JPEG into an
// image-folder dataset, DATASET/SPLIT/LABEL/…jpg, with labels.txt (every label of the dataset, sorted: the class order
// torchvision's ImageFolder and tools/train.py use) and manifest.jsonl (each image's file, label, split, source,
// stream time). Frames are taken through the app's own sources and decoders — the pictures training sees are the
// pictures the pipeline classifies — every Nth or at a rate, within a time span, up to a count. Splits are given to
// blocks of stream time, not to frames, so that near-identical neighbouring frames never land in two splits; the frames
// just after a change of split are left out as well.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/utc_time.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/outputs/appsrc_feed.hpp"
#include "pipeline/outputs/dataset_folder.hpp"
#include "pipeline/outputs/frame_image.hpp"
#include "pipeline/sources/gst_cuda.hpp"
#include "pipeline/sources/stream.hpp"

namespace vc::app {

namespace fs = std::filesystem;

namespace {

// Frames of a stream this close after a change of split are not kept (they would be near-copies across splits).
constexpr double kSplitGapS = 0.5;

}  // namespace

// Ctrl-C: stop taking frames; what is written stays (the manifest is flushed line by line).
std::atomic<bool> interrupted{false};
void on_interrupt(int) { interrupted = true; }

// Says how far it has come: on a terminal a line rewritten twice a second, elsewhere a log line every 5 s.
class CaptureProgress {
 public:
  explicit CaptureProgress(std::string label) : label_(std::move(label)), terminal_(::isatty(STDERR_FILENO) != 0) {}
  void update(int64_t saved, const std::map<std::string, int64_t>& per_split, double t, bool force = false) {
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < (terminal_ ? std::chrono::milliseconds(500) : std::chrono::milliseconds(5000))) return;
    last_ = now;
    std::string splits;
    for (const auto& [s, n] : per_split) splits += fmt::format("{}{} {}", splits.empty() ? "" : ", ", n, s);
    const auto line = fmt::format("capture: {} image(s) of '{}'{}, at {:.1f} s of the input", saved, label_,
                                  splits.empty() ? "" : " (" + splits + ")", t);
    if (terminal_) {
      fmt::print(stderr, "\r{}   ", line);
      shown_ = true;
    } else {
      fmt::print(stderr, "{}\n", line);
    }
  }
  void done() {
    if (shown_) fmt::print(stderr, "\n");
  }

 private:
  std::string label_;
  bool terminal_, shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

namespace {

// The region --region/--box names (the input's own, or the box given), or none: the whole picture.
std::optional<config::Region> capture_region(const CommandLine& cl) {
  const auto& c = cl.capture;
  if (c.region.empty() && c.box.empty()) return std::nullopt;
  config::Region r;
  r.name = c.region.empty() ? "box" : c.region;
  if (c.box.empty()) {
    std::vector<std::string> known;
    for (const auto& in : cl.config.inputs) {
      for (const auto& x : in.regions) {
        if (x.name == c.region) return x;
        known.push_back(x.name);
      }
    }
    throw UsageError(fmt::format("--region: the input has no region '{}' ({}): give its --box X,Y,W,H, or a --config whose "
                                 "input has it", c.region, known.empty() ? "it has none" : fmt::format("it has {}", fmt::join(known, ", "))));
  }
  std::copy(c.box.begin(), c.box.end(), r.box.begin());
  if (std::any_of(c.box.begin(), c.box.end(), [](double v) { return v < 0; }) || r.box[2] <= 0 || r.box[3] <= 0) {
    throw UsageError("--box: X,Y,W,H: none below 0, a width and a height above 0");
  }
  return r;
}

}  // namespace

int capture(const CommandLine& cl, std::ostream& out) {
  const auto& c = cl.capture;
  if (!cl.input_given) {
    throw UsageError("capture: give --input: what to take the frames from (a camera /dev/video0, a video file, "
                     "rtsp://…, test:ball), e.g. capture --input /dev/video0 --dataset mine --label mug --fps 5 --to 60");
  }
  if (const auto why = pipeline::label_problem(c.label); !why.empty()) throw UsageError("--label: " + why);
  if (c.every < 1) throw UsageError("--every: at least 1");
  if (c.fps < 0) throw UsageError("--fps: at least 0 (0: every --every-th frame)");
  if (c.to_s >= 0 && c.to_s <= c.from_s) throw UsageError("--to: after --from");
  const auto region = capture_region(cl);
  pipeline::SplitPlan plan(pipeline::parse_splits(c.split));
  const fs::path dataset(c.dataset);
  std::error_code ec;
  fs::create_directories(dataset, ec);
  if (ec) throw CantCreateError(fmt::format("{}: cannot create the dataset folder: {}", c.dataset, ec.message()));
  std::ofstream manifest(dataset / "manifest.jsonl", std::ios::app);
  if (!manifest) throw CantCreateError(fmt::format("{}: cannot write manifest.jsonl", c.dataset));
  pipeline::add_label(dataset, c.label);  // first: a capture stopped midway still leaves a dataset that reads whole

  const auto run = utc_now(UtcForm::kCompact);
  std::map<std::string, int64_t> per_split;
  int64_t saved = 0;
  interrupted = false;
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) sigaction(sig, &action, nullptr);
  CaptureProgress progress(c.label);
  double last_t = 0;
  for (size_t i = 0; i < cl.config.inputs.size() && (c.max <= 0 || saved < c.max) && !interrupted; ++i) {
    const auto& input = cl.config.inputs[i];
    auto hub = std::make_shared<pipeline::FrameHub>(std::vector<pipeline::QueuePolicy>{{8, false}});
    auto stop = std::make_shared<std::atomic<bool>>(false);
    pipeline::Stream stream(0, input, false, {hub, nullptr, nullptr, stop, nullptr, nullptr});
    stream.start();
    const auto& name = stream.stats().name;
    fmt::print(stderr, "capture: frames of {} as '{}' into {}{} (Ctrl-C stops it)\n", stream.stats().source, c.label,
               c.dataset, c.to_s >= 0 ? fmt::format(", until {:.0f} s of the input", c.to_s)
                                      : c.max > 0 ? fmt::format(", {} at most", c.max) : "");
    int64_t seen = 0;
    double next_t = c.from_s;
    std::optional<pipeline::Clock::time_point> first;
    int64_t last_split = -1;
    double split_changed_at = -1e9;
    for (;;) {
      auto batch = hub->pop_batch(8, std::chrono::microseconds(0));
      if (batch.empty() && hub->all_done()) break;
      for (const auto& f : batch) {
        // Stream time: the frame's own timestamp (files), else when it came (cameras, network streams).
        if (!first) first = f.captured;
        const double t = f.pts_ns >= 0 ? double(f.pts_ns) / 1e9
                                        : std::chrono::duration<double>(f.captured - *first).count();
        const bool in_span = t >= c.from_s && (c.to_s < 0 || t < c.to_s);
        const bool past = c.to_s >= 0 && t >= c.to_s;
        last_t = t;
        progress.update(saved, per_split, t);
        const bool done = past || (c.max > 0 && saved >= c.max) || interrupted;
        if (done) *stop = true;
        if (!in_span || done) continue;
        if (c.fps > 0) {
          if (t + 1e-6 < next_t) continue;
          next_t = std::max(next_t + 1.0 / c.fps, t);
        } else if (seen++ % c.every != 0) {
          continue;
        }
        const auto block = int64_t(std::floor(t / c.block_s));
        const auto split = int64_t(plan.split_of(block));
        if (split != last_split) {
          if (last_split >= 0) split_changed_at = double(block) * c.block_s;
          last_split = split;
        }
        if (t - split_changed_at < kSplitGapS) continue;
        const auto& split_name = plan.name(size_t(split));
        const auto folder = dataset / split_name / c.label;
        fs::create_directories(folder, ec);
        if (ec) throw CantCreateError(fmt::format("{}: cannot create: {}", folder.string(), ec.message()));
        const auto file = folder / fmt::format("{}-{}-{:06d}.jpg", name, run, f.index);
        const pipeline::Frame host = pipeline::in_host_memory(f);
        cv::Mat picture = pipeline::to_bgr(host.view);  // (as shown: what a region's box is in)
        nlohmann::json line{{"file", fs::relative(file, dataset).generic_string()},
                            {"label", c.label},
                            {"split", split_name},
                            {"stream", name},
                            {"source", f.source.empty() ? stream.stats().source : f.source},
                            {"frame", f.index},
                            {"t", std::round(t * 1000) / 1000}};
        if (region) {  // the region alone: what its model sees
          const auto box = config::region_pixels(*region, picture.cols, picture.rows);
          if (!box) throw DataError(fmt::format("--region: {}", config::region_outside(*region, picture.cols, picture.rows)));
          picture = picture(cv::Rect(box->x, box->y, box->width, box->height)).clone();
          line["region"] = region->name;
          line["box"] = {box->x, box->y, box->width, box->height};
        }
        pipeline::write_image_file(picture, file.string(), false);
        manifest << line.dump() << std::endl;  // (flushed: a capture stopped at any moment leaves a manifest of whole lines)
        ++per_split[split_name];
        ++saved;
      }
    }
    *stop = true;
    stream.join();
    if (auto failure = stream.failure()) throw Error(failure->code, failure->message);
  }
  progress.update(saved, per_split, last_t, true);
  progress.done();
  manifest.flush();
  if (!manifest) throw IoError(fmt::format("{}: manifest.jsonl could not be written", c.dataset));
  if (saved == 0) throw DataError("capture: no frame was saved (the input was empty, or --from/--to left nothing)");
  std::string splits;
  for (const auto& [s, n] : per_split) splits += fmt::format("{}{} {}", splits.empty() ? "" : ", ", n, s);
  fmt::print(out, "captured {} frame(s) of '{}' into {} ({})\n", saved, c.label, c.dataset, splits);
  return 0;
}

}  // namespace vc::app
