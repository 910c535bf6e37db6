#include "pipeline/source.hpp"

#include <gst/app/gstappsink.h>
#include <gst/video/video.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <glob.h>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "pipeline/frame_queue.hpp"
#include "pipeline/gst_util.hpp"

namespace vc::pipeline {
namespace {

namespace fs = std::filesystem;
constexpr auto kFirstFrameTimeout = std::chrono::seconds(15);

// A sample mapped as a video frame; unmapped and released together.
struct MappedSample {
  SamplePtr sample;
  GstVideoFrame frame{};
  bool mapped = false;
  ~MappedSample() {
    if (mapped) gst_video_frame_unmap(&frame);
  }
};

std::optional<Frame> frame_from_sample(GstSample* raw, int64_t index) {
  auto m = std::make_shared<MappedSample>();
  m->sample.reset(raw);
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, gst_sample_get_caps(raw))) return std::nullopt;
  if (!gst_video_frame_map(&m->frame, &info, gst_sample_get_buffer(raw), GST_MAP_READ)) return std::nullopt;
  m->mapped = true;
  Frame f;
  f.view.format = inference::PixelFormat::BGR;
  f.view.width = GST_VIDEO_FRAME_WIDTH(&m->frame);
  f.view.height = GST_VIDEO_FRAME_HEIGHT(&m->frame);
  f.view.planes[0] = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&m->frame, 0));
  f.view.strides[0] = GST_VIDEO_FRAME_PLANE_STRIDE(&m->frame, 0);
  const GstClockTime pts = GST_BUFFER_PTS(gst_sample_get_buffer(raw));
  f.pts_ns = GST_CLOCK_TIME_IS_VALID(pts) ? int64_t(pts) : -1;
  f.index = index;
  f.captured = Clock::now();
  f.holder = m;
  return f;
}

// The appsink's caps: BGR at the requested size and rate (one caps filter: gst-launch syntax allows no two in a row).
std::string caps_tail(const config::Input& in) {
  std::string caps = "video/x-raw,format=BGR";
  if (in.width > 0) caps += fmt::format(",width={},height={}", in.width, in.height);
  if (in.fps > 0) caps += fmt::format(",framerate={}/1000", int(in.fps * 1000 + 0.5));
  return caps;
}

std::string rate_stage(const config::Input& in) { return in.fps > 0 ? "videorate ! " : ""; }

// Errors a source's bus reports, as the exception a user should see.
[[noreturn]] void throw_source_error(GstMessage* m, const std::string& what, bool live) {
  GError* error = nullptr;
  gst_message_parse_error(m, &error, nullptr);
  const bool missing = error && error->domain == GST_RESOURCE_ERROR &&
                       (error->code == GST_RESOURCE_ERROR_NOT_FOUND || error->code == GST_RESOURCE_ERROR_OPEN_READ ||
                        error->code == GST_RESOURCE_ERROR_OPEN_READ_WRITE);
  const bool busy_or_gone = error && error->domain == GST_RESOURCE_ERROR &&
                            (error->code == GST_RESOURCE_ERROR_BUSY || error->code == GST_RESOURCE_ERROR_READ ||
                             error->code == GST_RESOURCE_ERROR_FAILED);
  const bool negotiation = error && error->domain == GST_STREAM_ERROR && error->code == GST_STREAM_ERROR_FORMAT;
  if (error) g_error_free(error);
  const auto message = fmt::format("{}: {}", what, describe_error(m));
  if (missing) throw NoInputError(message);
  if (live && (busy_or_gone || negotiation)) {
    throw UnavailableError(message + (what.find("/dev/video") != std::string::npos ? "\n" + describe_cameras() : ""));
  }
  throw DataError(message);
}

// A GStreamer pipeline ending in an appsink named "sink".
class GstSource final : public Source {
 public:
  // `src_property`: a string property of the element named "src" set from the config (location, uri, device),
  // so that no path needs quoting inside the pipeline description.
  GstSource(const std::string& description, std::string what, bool live, bool drop,
            const std::pair<const char*, std::string>& src_property = {})
      : what_(std::move(what)), live_(live), drop_(drop), queue_(drop ? 2 : 8) {
    pipeline_ = parse_pipeline(description);
    if (src_property.first) {
      g_object_set(child(pipeline_.get(), "src").get(), src_property.first, src_property.second.c_str(), nullptr);
    }
    auto sink = child(pipeline_.get(), "sink");
    g_object_set(sink.get(), "sync", FALSE, "max-buffers", 2u, "drop", FALSE, nullptr);
    GstAppSinkCallbacks callbacks{};
    callbacks.eos = [](GstAppSink*, gpointer self) { static_cast<GstSource*>(self)->queue_.close(); };
    callbacks.new_sample = [](GstAppSink* s, gpointer self) { return static_cast<GstSource*>(self)->on_sample(s); };
    gst_app_sink_set_callbacks(GST_APP_SINK(sink.get()), &callbacks, this, nullptr);
    bus_.reset(gst_element_get_bus(pipeline_.get()));

    const auto change = gst_element_set_state(pipeline_.get(), GST_STATE_PLAYING);
    if (change == GST_STATE_CHANGE_FAILURE) fail_from_bus("could not start");
    // Files preroll (decode their first frame) here; errors such as "not a video" surface at once.
    const auto state = gst_element_get_state(pipeline_.get(), nullptr, nullptr, 10 * GST_SECOND);
    if (state == GST_STATE_CHANGE_FAILURE) fail_from_bus("could not start");
    query_stream_info();
    vc::log::get("pipeline")->info("source: {} ({}{})", what_, live_ ? "live, " : "",
                                   drop_ ? "drops stale frames" : "never drops");
  }

  ~GstSource() override {
    queue_.close();
  }

  std::optional<Frame> next() override {
    const auto start = Clock::now();
    for (;;) {
      check_bus();
      if (auto f = queue_.pop(std::chrono::milliseconds(50))) return f;
      if (queue_.closed_and_empty()) {
        check_bus();
        return std::nullopt;
      }
      if (!seen_frame_ && Clock::now() - start > kFirstFrameTimeout) {
        throw DataError(fmt::format("{}: no frame within {} s", what_,
                                    std::chrono::duration_cast<std::chrono::seconds>(kFirstFrameTimeout).count()));
      }
    }
  }

  std::optional<Frame> poll() override {
    check_bus();
    return queue_.pop(std::chrono::milliseconds(0));
  }

  bool live() const override { return live_; }
  int64_t dropped() const override { return dropped_; }
  double fps() const override { return fps_; }
  int64_t total_frames() const override { return total_frames_; }
  std::string description() const override { return what_; }

 private:
  GstFlowReturn on_sample(GstAppSink* sink) {
    GstSample* sample = gst_app_sink_pull_sample(sink);
    if (!sample) return GST_FLOW_EOS;
    if (fps_ == 0) read_fps(sample);
    auto frame = frame_from_sample(sample, next_index_);
    if (!frame) return GST_FLOW_ERROR;
    ++next_index_;
    seen_frame_ = true;
    if (drop_) {
      dropped_ += queue_.push_drop_oldest(std::move(*frame));
    } else if (!queue_.push_wait(std::move(*frame))) {
      return GST_FLOW_FLUSHING;  // the queue was closed: we are shutting down
    }
    return GST_FLOW_OK;
  }

  void read_fps(GstSample* sample) {
    GstVideoInfo info;
    if (gst_video_info_from_caps(&info, gst_sample_get_caps(sample)) && info.fps_d > 0 && info.fps_n > 0) {
      fps_ = double(info.fps_n) / info.fps_d;
    }
  }

  void query_stream_info() {
    gint64 duration = 0;
    if (!live_ && gst_element_query_duration(pipeline_.get(), GST_FORMAT_TIME, &duration) && duration > 0) {
      duration_ns_ = duration;
    }
    auto sink = child(pipeline_.get(), "sink");
    GstPad* pad = gst_element_get_static_pad(sink.get(), "sink");
    if (GstCaps* caps = gst_pad_get_current_caps(pad)) {
      GstVideoInfo info;
      if (gst_video_info_from_caps(&info, caps) && info.fps_d > 0 && info.fps_n > 0) fps_ = double(info.fps_n) / info.fps_d;
      gst_caps_unref(caps);
    }
    gst_object_unref(pad);
    if (duration_ns_ > 0 && fps_ > 0) total_frames_ = int64_t(double(duration_ns_) * 1e-9 * fps_ + 0.5);
  }

  void check_bus() {
    while (MessagePtr m{gst_bus_pop_filtered(bus_.get(), GstMessageType(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING))}) {
      if (GST_MESSAGE_TYPE(m.get()) == GST_MESSAGE_ERROR) throw_source_error(m.get(), what_, live_);
      GError* w = nullptr;
      gst_message_parse_warning(m.get(), &w, nullptr);
      vc::log::get("pipeline")->warn("{}: {}: {}", what_, GST_OBJECT_NAME(GST_MESSAGE_SRC(m.get())), w ? w->message : "?");
      if (w) g_error_free(w);
    }
  }

  [[noreturn]] void fail_from_bus(const char* doing) {
    MessagePtr m{gst_bus_timed_pop_filtered(bus_.get(), 2 * GST_SECOND, GST_MESSAGE_ERROR)};
    if (m) throw_source_error(m.get(), what_, live_);
    throw DataError(fmt::format("{}: {}", what_, doing));
  }

  std::string what_;
  bool live_, drop_;
  PipelinePtr pipeline_;
  BusPtr bus_;
  FrameQueue<Frame> queue_;
  std::atomic<int64_t> dropped_{0};
  int64_t next_index_ = 0;
  std::atomic<bool> seen_frame_{false};
  std::atomic<double> fps_{0};
  int64_t duration_ns_ = 0;
  int64_t total_frames_ = -1;
};

// A list of image files, each decoded by its own short GStreamer pipeline.
class ImageSource final : public Source {
 public:
  ImageSource(std::vector<std::string> files, bool loop) : files_(std::move(files)), loop_(loop) {}

  std::optional<Frame> next() override {
    if (position_ >= files_.size()) {
      if (!loop_ || files_.empty()) return std::nullopt;
      position_ = 0;
    }
    const auto& file = files_[position_++];
    auto pipeline = parse_pipeline("filesrc name=src ! decodebin ! videoconvert ! video/x-raw,format=BGR ! appsink name=sink");
    g_object_set(child(pipeline.get(), "src").get(), "location", file.c_str(), nullptr);
    auto sink = child(pipeline.get(), "sink");
    gst_element_set_state(pipeline.get(), GST_STATE_PLAYING);
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink.get()), 10 * GST_SECOND);
    BusPtr bus{gst_element_get_bus(pipeline.get())};
    MessagePtr error{gst_bus_pop_filtered(bus.get(), GST_MESSAGE_ERROR)};
    if (!sample) {
      stop_pipeline(pipeline.get());
      if (error) throw_source_error(error.get(), file, false);
      throw DataError(fmt::format("{}: no image decoded", file));
    }
    auto frame = frame_from_sample(sample, index_++);
    stop_pipeline(pipeline.get());
    if (!frame) throw DataError(fmt::format("{}: cannot map the decoded image", file));
    return frame;
  }
  bool live() const override { return false; }
  int64_t dropped() const override { return 0; }
  double fps() const override { return 1.0; }
  int64_t total_frames() const override { return loop_ ? -1 : int64_t(files_.size()); }
  std::string description() const override { return fmt::format("{} image(s)", files_.size()); }

 private:
  std::vector<std::string> files_;
  bool loop_;
  size_t position_ = 0;
  int64_t index_ = 0;
};

std::vector<std::string> image_files(const std::string& spec) {
  std::vector<std::string> files;
  auto is_image = [](const fs::path& p) {
    auto ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
  };
  if (fs::is_directory(spec)) {
    for (const auto& e : fs::directory_iterator(spec)) {
      if (e.is_regular_file() && is_image(e.path())) files.push_back(e.path().string());
    }
  } else if (spec.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    if (glob(spec.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
  } else {
    if (!fs::exists(spec)) throw NoInputError(fmt::format("{}: no such image", spec));
    files.push_back(spec);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw NoInputError(fmt::format("{}: no images (.jpg, .jpeg, .png, .bmp) found", spec));
  return files;
}

void check_readable_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw NoInputError(fmt::format("{}: no such file", path));
  if (!fs::is_regular_file(path, ec)) throw NoInputError(fmt::format("{}: not a regular file", path));
  if (access(path.c_str(), R_OK) != 0) throw NoInputError(fmt::format("{}: not readable (permissions)", path));
  if (fs::file_size(path, ec) == 0) throw DataError(fmt::format("{}: the file is empty (0 bytes)", path));
}

}  // namespace

std::unique_ptr<Source> Source::open(const config::Input& in) {
  auto drop_for = [&](bool live) { return in.drop == "auto" ? live : in.drop == "drop"; };
  const std::string tail = fmt::format("videoconvert ! videoscale ! {}{} ! appsink name=sink", rate_stage(in), caps_tail(in));
  if (in.kind == "test") {
    return std::make_unique<GstSource>(
        fmt::format("videotestsrc name=src is-live=true pattern={} {} ! {}", in.pattern,
                    in.max_frames > 0 ? fmt::format("num-buffers={}", in.max_frames) : "",
                    in.width > 0 || in.fps > 0
                        ? fmt::format("video/x-raw{}{} ! ", in.width > 0 ? fmt::format(",width={},height={}", in.width, in.height) : "",
                                      in.fps > 0 ? fmt::format(",framerate={}/1000", int(in.fps * 1000 + 0.5)) : "")
                        : "") + tail,
        "test pattern '" + in.pattern + "'", true, drop_for(true));
  }
  if (in.kind == "file") {
    check_readable_file(in.path);
    return std::make_unique<GstSource>("filesrc name=src ! decodebin ! " + tail, in.path, false, drop_for(false),
                                       std::pair{"location", in.path});
  }
  if (in.kind == "uri") {
    const bool live = in.uri.rfind("file://", 0) != 0;
    if (!live) check_readable_file(in.uri.substr(7));
    return std::make_unique<GstSource>("uridecodebin name=src ! " + tail, in.uri, live, drop_for(live),
                                       std::pair{"uri", in.uri});
  }
  if (in.kind == "webcam") {
    if (!fs::exists(in.device)) {
      throw NoInputError(fmt::format("{}: no such camera (unplugged?)\n{}", in.device, describe_cameras()));
    }
    std::string caps;
    if (in.width > 0 || in.fps > 0) {
      const auto size = in.width > 0 ? fmt::format(",width={},height={}", in.width, in.height) : "";
      const auto rate = in.fps > 0 ? fmt::format(",framerate={}/1000", int(in.fps * 1000 + 0.5)) : "";
      caps = fmt::format("capsfilter caps=\"video/x-raw{0}{1};image/jpeg{0}{1}\" ! ", size, rate);
    }
    return std::make_unique<GstSource>(fmt::format("v4l2src name=src ! {}decodebin ! {}", caps, tail), in.device, true,
                                       drop_for(true), std::pair{"device", in.device});
  }
  if (in.kind == "image") return std::make_unique<ImageSource>(image_files(in.path), in.loop);
  throw ConfigError(fmt::format("input.kind: unknown '{}'", in.kind));
}

std::string describe_cameras() {
  GstDeviceMonitor* monitor = gst_device_monitor_new();
  gst_device_monitor_add_filter(monitor, "Video/Source", nullptr);
  std::string text = "cameras found:";
  int count = 0;
  if (gst_device_monitor_start(monitor)) {
    GList* devices = gst_device_monitor_get_devices(monitor);
    for (GList* d = devices; d; d = d->next) {
      auto* device = GST_DEVICE(d->data);
      gchar* name = gst_device_get_display_name(device);
      std::string modes;
      if (GstCaps* caps = gst_device_get_caps(device)) {
        for (guint i = 0; i < gst_caps_get_size(caps) && i < 12; ++i) {
          const GstStructure* s = gst_caps_get_structure(caps, i);
          int w = 0, h = 0;
          gst_structure_get_int(s, "width", &w);
          gst_structure_get_int(s, "height", &h);
          modes += fmt::format("{}{}x{} {}", modes.empty() ? "" : ", ", w, h, gst_structure_get_name(s));
        }
        gst_caps_unref(caps);
      }
      text += fmt::format("\n  {}: {}", name ? name : "?", modes);
      g_free(name);
      ++count;
    }
    g_list_free_full(devices, gst_object_unref);
    gst_device_monitor_stop(monitor);
  }
  gst_object_unref(monitor);
  return count ? text : "no cameras found (is one plugged in, and are you in the 'video' group?)";
}

}  // namespace vc::pipeline
