#include "pipeline/outputs/video_output.hpp"

#include <gst/app/gstappsrc.h>
#include <gst/rtsp-server/rtsp-server.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "pipeline/outputs/appsrc_feed.hpp"
#include "pipeline/sources/gst_probe.hpp"
#include "pipeline/sources/gst_util.hpp"

namespace vc::pipeline {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// An output whose pipeline takes no frame for this long, with no error on its bus, is stuck (PipelineOutput).
constexpr auto kStuck = std::chrono::seconds(60);
// Frames an RTSP client's pipeline may hold before it skips frames (a slow encoder must not grow memory for ever).
constexpr size_t kClientQueueFrames = 4;

// fps 0: a variable frame rate (each frame carries its own time).
GstCaps* bgr_caps(int w, int h, double fps) {
  return gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "BGR", "width", G_TYPE_INT, w, "height", G_TYPE_INT,
                             h, "framerate", GST_TYPE_FRACTION, int(fps * 1000 + 0.5), fps > 0 ? 1000 : 1, nullptr);
}

bool use_nvenc(const config::Output& o) {
  if (o.codec == config::Codec::Nvh264 && !has_element("nvh264enc")) {
    throw UnavailableError("output.codec nvh264: nvh264enc (NVENC) is not available here");
  }
  return o.codec == config::Codec::Nvh264 || (o.codec == config::Codec::Auto && has_element("nvh264enc"));
}

GstElement* add_encoder(GstElement* p, const config::Output& o, bool low_latency) {
  if (use_nvenc(o)) {
    GstElement* e = add_element(p, "nvh264enc", "encoder");
    g_object_set(e, "bitrate", guint(o.bitrate_kbps), nullptr);
    return e;
  }
  GstElement* e = add_element(p, "x264enc", "encoder");
  g_object_set(e, "bitrate", guint(o.bitrate_kbps), "key-int-max", 60u, nullptr);
  gst_util_set_object_arg(G_OBJECT(e), "speed-preset", low_latency ? "ultrafast" : "veryfast");
  if (low_latency) gst_util_set_object_arg(G_OBJECT(e), "tune", "zerolatency");
  return e;
}

GstBuffer* wrap(const OutputFrame& f, double fps) {
  const cv::Mat& bgr = f.bgr;
  const size_t bytes = bgr.total() * bgr.elemSize();
  GstBuffer* buffer = gst_buffer_new_allocate(nullptr, bytes, nullptr);
  if (bgr.isContinuous()) {
    gst_buffer_fill(buffer, 0, bgr.data, bytes);
  } else {
    const cv::Mat packed = bgr.clone();
    gst_buffer_fill(buffer, 0, packed.data, bytes);
  }
  GST_BUFFER_PTS(buffer) = GstClockTime(std::max<int64_t>(f.pts_ns, 0));
  if (fps > 0) GST_BUFFER_DURATION(buffer) = GstClockTime(1e9 / fps);
  return buffer;
}


// appsrc -> … : the file and display outputs.
class PipelineOutput : public VideoOutput {
 public:
  PipelineOutput(std::string what, double fps) : what_(std::move(what)), fps_(fps), pipeline_(make_pipeline(nullptr)) {}

  void start(GstElement* src) {
    src_ = src;
    bus_.reset(gst_element_get_bus(pipeline_.get()));
    if (gst_element_set_state(pipeline_.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) check_bus(true);
  }

  ~PipelineOutput() override {
    try {
      finish();
    } catch (const std::exception& e) {
      vc::log::get("pipeline")->error("{}", e.what());
    }
    stop_pipeline(pipeline_.get());
  }

  // The appsrc never blocks (a push into a full appsrc whose pipeline then fails would never return): we wait for
  // room ourselves, watching the bus all the while, so a failed encoder or a full disk ends the wait at once.
  void push(const OutputFrame& f) override {
    check_bus(false);
    wait_for_room();
    if (gst_app_src_push_buffer(GST_APP_SRC(src_), wrap(f, fps_)) != GST_FLOW_OK) check_bus(true);
    ++frames_;
  }

  void finish() override {
    if (finished_ || !src_) return;
    finished_ = true;
    gst_app_src_end_of_stream(GST_APP_SRC(src_));
    // The muxer writes its index on EOS: wait for it to reach the sink.
    MessagePtr m{gst_bus_timed_pop_filtered(bus_.get(), 60 * GST_SECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR))};
    stop_pipeline(pipeline_.get());
    if (m && GST_MESSAGE_TYPE(m.get()) == GST_MESSAGE_ERROR) {
      failed();
      throw_output_error(m.get(), what_);
    }
    if (!m && wants_eos()) {
      failed();
      throw IoError(fmt::format("{}: the encoder did not finish within 60 s", what_));
    }
    completed();
  }

  std::string description() const override { return what_; }
  int64_t frames() const override { return frames_; }

 protected:
  virtual bool wants_eos() const { return false; }
  virtual void completed() {}
  virtual void failed() {}

  GstElement* pipeline() const { return pipeline_.get(); }

  void wait_for_room() {
    try {
      pipeline::wait_for_room(src_, bus_.get(), what_, kStuck);
    } catch (...) {
      finished_ = true;
      failed();
      throw;
    }
  }

  void check_bus(bool must_fail) {
    if (MessagePtr m{gst_bus_pop_filtered(bus_.get(), GST_MESSAGE_ERROR)}) {
      finished_ = true;
      failed();
      throw_output_error(m.get(), what_);
    }
    if (must_fail) {
      MessagePtr m{gst_bus_timed_pop_filtered(bus_.get(), 2 * GST_SECOND, GST_MESSAGE_ERROR)};
      finished_ = true;
      failed();
      if (m) throw_output_error(m.get(), what_);
      throw UnavailableError(fmt::format("{}: the output stopped", what_));
    }
  }

  std::string what_;
  double fps_;
  int64_t frames_ = 0;

 private:
  PipelinePtr pipeline_;
  GstElement* src_ = nullptr;
  BusPtr bus_;
  bool finished_ = false;
};

GstElement* add_appsrc(GstElement* p, int w, int h, double fps, bool live) {
  GstElement* src = add_element(p, "appsrc", "src");
  g_object_set(src, "format", GST_FORMAT_TIME, "block", FALSE, "is-live", live ? TRUE : FALSE, "max-bytes",
               guint64(size_t(w) * h * 3 * 4), nullptr);
  GstCaps* caps = bgr_caps(w, h, fps);
  g_object_set(src, "caps", caps, nullptr);
  gst_caps_unref(caps);
  return src;
}

class FileOutput final : public PipelineOutput {
 public:
  explicit FileOutput(const VideoOutput::Options& o) : PipelineOutput(o.path, o.fps), final_path_(o.path) {
    const fs::path path(o.path);
    std::error_code ec;
    if (path.has_parent_path()) {
      fs::create_directories(path.parent_path(), ec);
      if (ec) throw CantCreateError(fmt::format("{}: cannot create directory: {}", path.parent_path().string(), ec.message()));
    }
    auto ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    // Every file is started aside (NAME.partial), so the real name never holds an empty or broken file. A plain
    // MP4/MOV only becomes valid at its end and is renamed then; a crash-safe one (MKV, fragmented MP4) is renamed
    // as soon as its header is written — from then on it is playable whenever the process dies.
    in_place_ = ext == ".mkv" || (ext == ".mp4" && o.output.fragment_s > 0);
    write_path_ = o.path + ".partial";
    if (!std::ofstream(write_path_, std::ios::binary)) {
      throw CantCreateError(fmt::format("{}: cannot write the output file", o.path));
    }
    try {
      build(o, ext);
    } catch (...) {
      failed();
      throw;
    }
    vc::log::get("pipeline")->info("output: {} ({}x{}, {})", o.path, o.width, o.height,
                                   use_nvenc(o.output) ? "NVENC" : "x264");
  }

 private:
  void build(const VideoOutput::Options& o, const std::string& ext) {
    GstElement* p = pipeline();
    GstElement* src = add_appsrc(p, o.width, o.height, o.fps, false);
    GstElement* mux = add_element(p, ext == ".mkv" ? "matroskamux" : ext == ".mov" ? "qtmux" : "mp4mux", "mux");
    if (ext == ".mp4" && o.output.fragment_s > 0) {
      g_object_set(mux, "fragment-duration", guint(o.output.fragment_s * 1000), nullptr);
    }
    GstElement* sink = add_element(p, "filesink", "file");
    g_object_set(sink, "location", write_path_.c_str(), nullptr);
    if (in_place_) {
      // Written straight to the kernel, not through a stdio buffer: what the muxer has written survives a kill.
      gst_util_set_object_arg(G_OBJECT(sink), "buffer-mode", "unbuffered");
      // The first buffer after the header reaches the file sink: the header is on disk (it writes in its thread).
      PadPtr pad(gst_element_get_static_pad(sink, "sink"));
      gst_pad_add_probe(pad.get(), GST_PAD_PROBE_TYPE_BUFFER, [](GstPad*, GstPadProbeInfo* info, gpointer self) {
        auto* out = static_cast<FileOutput*>(self);
        const bool header = GST_BUFFER_FLAG_IS_SET(GST_PAD_PROBE_INFO_BUFFER(info), GST_BUFFER_FLAG_HEADER);
        return !header && out->move_into_place() ? GST_PAD_PROBE_REMOVE : GST_PAD_PROBE_OK;
      }, this, nullptr);
    }
    link_chain({src, add_element(p, "videoconvert"),
                add_capsfilter(p, gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", nullptr)),
                add_encoder(p, o.output, false), add_element(p, "h264parse"), mux, sink});
    start(src);
  }

  // Gives the file its real name once it holds something (never an empty file under the real name; at the end, once
  // complete, whatever it holds): the open file goes on being written under it. Whether it has its name now.
  bool move_into_place(bool complete = false) {
    std::error_code ec;
    if (in_place_name_) return true;
    if (!complete && fs::file_size(write_path_, ec) == 0) return false;
    in_place_name_ = true;
    fs::rename(write_path_, final_path_, ec);
    if (ec) rename_error_ = ec.message();
    return true;
  }

  bool wants_eos() const override { return true; }
  void completed() override {
    move_into_place(true);
    if (!rename_error_.empty()) {
      throw IoError(fmt::format("{}: cannot rename {} into place: {}", final_path_, write_path_, rename_error_));
    }
    vc::log::get("pipeline")->info("wrote {} frames to {}", frames_, final_path_);
  }
  void failed() override {
    // A file that never got its index is unplayable: do not leave it behind under a name that suggests otherwise.
    // (A crash-safe file under its real name keeps what it holds: it plays up to the failure.)
    if (!in_place_name_) {
      std::error_code ec;
      fs::remove(write_path_, ec);
    }
  }

  std::string final_path_, write_path_;
  bool in_place_ = false;
  std::atomic<bool> in_place_name_{false};
  std::string rename_error_;  // written by the streaming thread before the pipeline stops, read after
};

class DisplayOutput final : public PipelineOutput {
 public:
  explicit DisplayOutput(const VideoOutput::Options& o) : PipelineOutput("display (" + o.name + ")", o.fps) {
    const auto sink_name = display_sink(false);
    GstElement* p = pipeline();
    GstElement* src = add_appsrc(p, o.width, o.height, o.fps, true);
    GstElement* sink = add_element(p, sink_name.c_str(), "display");
    g_object_set(sink, "sync", FALSE, nullptr);
    link_chain({src, add_element(p, "videoconvert"), sink});
    start(src);
    vc::log::get("pipeline")->info("output: window ({}) for {}", sink_name, o.name);
  }
};

// An RTSP server (gst-rtsp-server) whose clients all see the labelled stream. Its media pipeline is the one
// place a launch description is used (gst-rtsp-server builds media from it): it holds only numbers we format.
class RtspOutput final : public VideoOutput {
 public:
  explicit RtspOutput(const VideoOutput::Options& o) : fps_(o.fps), frame_bytes_(size_t(o.width) * size_t(o.height) * 3) {
    const int rate = o.fps > 0 ? std::max(1, int(o.fps + 0.5)) : 30;  // RTSP clients are timed by the server's clock
    context_ = g_main_context_new();
    loop_ = g_main_loop_new(context_, FALSE);
    server_ = gst_rtsp_server_new();
    gst_rtsp_server_set_address(server_, o.output.rtsp_address.c_str());
    gst_rtsp_server_set_service(server_, std::to_string(o.output.rtsp_port).c_str());
    GstRTSPMountPoints* mounts = gst_rtsp_server_get_mount_points(server_);
    GstRTSPMediaFactory* factory = gst_rtsp_media_factory_new();
    const std::string encoder = use_nvenc(o.output)
                                    ? fmt::format("nvh264enc bitrate={}", o.output.bitrate_kbps)
                                    : fmt::format("x264enc tune=zerolatency speed-preset=ultrafast bitrate={} key-int-max={}",
                                                  o.output.bitrate_kbps, rate);  // a key frame a second: clients join fast
    const auto launch = fmt::format(
        "( appsrc name=src is-live=true format=time do-timestamp=true "
        "caps=video/x-raw,format=BGR,width={},height={},framerate={}/1000 ! videoconvert ! video/x-raw,format=I420 "
        "! {} ! rtph264pay name=pay0 pt=96 config-interval=1 )",
        o.width, o.height, rate * 1000, encoder);
    gst_rtsp_media_factory_set_launch(factory, launch.c_str());
    gst_rtsp_media_factory_set_shared(factory, TRUE);
    g_signal_connect(factory, "media-configure", G_CALLBACK(+[](GstRTSPMediaFactory*, GstRTSPMedia* media, gpointer self) {
                       static_cast<RtspOutput*>(self)->on_media(media);
                     }), this);
    gst_rtsp_mount_points_add_factory(mounts, o.path.c_str(), factory);
    g_object_unref(mounts);
    server_source_ = gst_rtsp_server_attach(server_, context_);
    if (server_source_ == 0) {
      g_object_unref(server_);
      g_main_loop_unref(loop_);
      g_main_context_unref(context_);
      throw UnavailableError(fmt::format("cannot serve RTSP on {}:{} (port in use, or not an address of this host?)",
                                         o.output.rtsp_address, o.output.rtsp_port));
    }
    what_ = fmt::format("rtsp://{}:{}{}", o.output.rtsp_address, o.output.rtsp_port, o.path);
    thread_ = std::thread([this] { g_main_loop_run(loop_); });
    vc::log::get("pipeline")->info("output: serving {}", what_);
  }
  ~RtspOutput() override {
    finish();
    // Quit from inside the loop: a g_main_loop_quit() before the thread has entered g_main_loop_run() is lost (and
    // join() would wait for ever); an idle source attached to the loop's context runs once the loop does.
    GSource* quit = g_idle_source_new();
    g_source_set_callback(quit, [](gpointer loop) {
      g_main_loop_quit(static_cast<GMainLoop*>(loop));
      return gboolean(G_SOURCE_REMOVE);
    }, loop_, nullptr);
    g_source_attach(quit, context_);
    g_source_unref(quit);
    if (thread_.joinable()) thread_.join();
    if (GSource* listening = g_main_context_find_source_by_id(context_, server_source_)) g_source_destroy(listening);
    if (dropped_ > 0) {
      vc::log::get("pipeline")->warn("{}: {} frame(s) not sent to clients that could not keep up", what_, dropped_);
    }
    g_object_unref(server_);
    g_main_loop_unref(loop_);
    g_main_context_unref(context_);
  }
  // Never blocks: a client's pipeline that is behind by its queue (kClientQueueFrames) skips this frame, counted.
  void push(const OutputFrame& f) override {
    std::lock_guard lock(mutex_);
    bool skipped = false;
    for (auto it = sources_.begin(); it != sources_.end();) {
      auto* src = GST_APP_SRC(*it);
      if (gst_app_src_get_current_level_bytes(src) >= gst_app_src_get_max_bytes(src)) {
        skipped = true;
        ++it;
        continue;
      }
      // Stamped by each client's own pipeline (appsrc do-timestamp): its clock starts when that client's media does,
      // and a frame with the source's own time would look seconds in its future to a client that joined late.
      GstBuffer* buffer = wrap(f, fps_);
      GST_BUFFER_PTS(buffer) = GST_CLOCK_TIME_NONE;
      GST_BUFFER_DTS(buffer) = GST_CLOCK_TIME_NONE;
      if (gst_app_src_push_buffer(src, buffer) != GST_FLOW_OK) {
        gst_object_unref(*it);
        it = sources_.erase(it);  // that client went away
      } else {
        ++it;
      }
    }
    dropped_ += skipped;
    ++frames_;
  }
  int64_t dropped() const override { return dropped_; }
  void finish() override {
    std::lock_guard lock(mutex_);
    for (auto* s : sources_) {
      gst_app_src_end_of_stream(GST_APP_SRC(s));
      gst_object_unref(s);
    }
    sources_.clear();
  }
  std::string description() const override { return what_; }
  int64_t frames() const override { return frames_; }

 private:
  void on_media(GstRTSPMedia* media) {
    GstElement* bin = gst_rtsp_media_get_element(media);
    GstElement* src = gst_bin_get_by_name_recurse_up(GST_BIN(bin), "src");
    gst_object_unref(bin);
    if (!src) return;
    g_object_set(src, "max-bytes", guint64(frame_bytes_) * kClientQueueFrames, nullptr);
    std::lock_guard lock(mutex_);
    sources_.push_back(src);
  }

  double fps_;
  size_t frame_bytes_;
  std::string what_;
  guint server_source_ = 0;
  int64_t dropped_ = 0;
  GMainContext* context_ = nullptr;
  GMainLoop* loop_ = nullptr;
  GstRTSPServer* server_ = nullptr;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<GstElement*> sources_;
  int64_t frames_ = 0;
};

// Labelled images, one file each: named after the input image (or STREAM-FRAME for video), JPEG or PNG.
class ImagesOutput final : public VideoOutput {
 public:
  explicit ImagesOutput(const VideoOutput::Options& o) : target_(o.path) {
    const bool in_folder = target_.find("%s") == std::string::npos && !config::single_image_output(target_);
    const fs::path dir = in_folder ? fs::path(target_) : fs::path(target_).parent_path();
    std::error_code ec;
    if (!dir.empty()) fs::create_directories(dir, ec);
    if (ec) throw CantCreateError(fmt::format("{}: cannot create the image folder: {}", dir.string(), ec.message()));
    vc::log::get("pipeline")->info("output: labelled images in {}", target_);
  }

  void push(const OutputFrame& f) override {
    const auto file = image_output_file(target_, f.source, f.stream, f.index);
    if (config::single_image_output(target_) && frames_ > 0) {
      throw DataError(fmt::format("{}: one image file takes one image; more came (give a folder or a %s pattern)", target_));
    }
    auto fext = fs::path(file).extension().string();
    std::transform(fext.begin(), fext.end(), fext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    write_image_file(f.bgr, file, fext == ".png");
    ++frames_;
  }
  void finish() override {
    if (frames_ && !reported_) vc::log::get("pipeline")->info("wrote {} labelled image(s) to {}", frames_, target_);
    reported_ = true;
  }
  std::string description() const override { return target_; }
  int64_t frames() const override { return frames_; }

 private:

  std::string target_;
  bool reported_ = false;
  int64_t frames_ = 0;
};

class NullOutput final : public VideoOutput {
 public:
  void push(const OutputFrame&) override { ++frames_; }
  void finish() override {}
  std::string description() const override { return "none"; }
  int64_t frames() const override { return frames_; }

 private:
  int64_t frames_ = 0;
};

}  // namespace

std::string image_output_file(const std::string& target, const std::string& source, const std::string& stream,
                              int64_t index) {
  if (config::single_image_output(target)) return target;
  const fs::path from(source);
  auto ext = from.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const std::string stem = source.empty() ? fmt::format("{}-{:06}", stream, index) : from.stem().string();
  if (target.find("%s") != std::string::npos) {
    std::string file = target;
    file.replace(file.find("%s"), 2, stem);
    return file;
  }
  return (fs::path(target) / (stem + (ext == ".png" || ext == ".bmp" ? ".png" : ".jpg"))).string();
}

std::string display_sink(bool check_opens) {
  ensure_gstreamer();
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  const char* x11 = std::getenv("DISPLAY");
  std::string sink;
  if (wayland && *wayland && has_element("waylandsink")) {
    sink = "waylandsink";
  } else if (x11 && *x11) {
    for (const char* candidate : {"ximagesink", "glimagesink"}) {
      if (has_element(candidate)) {
        sink = candidate;
        break;
      }
    }
    if (sink.empty()) throw UnavailableError("no X11 video sink: install gstreamer1.0-x (ximagesink)");
  } else {
    throw UnavailableError("no display: neither DISPLAY nor WAYLAND_DISPLAY is set (use --output FILE.mp4, "
                           "--output rtsp://0.0.0.0:8554/classify or --output none)");
  }
  if (check_opens) {
    GstElement* e = gst_element_factory_make(sink.c_str(), nullptr);
    const bool ok = e && gst_element_set_state(e, GST_STATE_READY) != GST_STATE_CHANGE_FAILURE;
    if (e) {
      gst_element_set_state(e, GST_STATE_NULL);
      gst_object_unref(e);
    }
    if (!ok) {
      throw UnavailableError(fmt::format("{} cannot open the display '{}'", sink, wayland && *wayland ? wayland : x11 ? x11 : ""));
    }
  }
  return sink;
}

std::unique_ptr<VideoOutput> VideoOutput::open(const Options& o) {
  switch (o.output.kind) {
    case config::OutputKind::None: return std::make_unique<NullOutput>();
    case config::OutputKind::Display: return std::make_unique<DisplayOutput>(o);
    case config::OutputKind::Rtsp: return std::make_unique<RtspOutput>(o);
    case config::OutputKind::Images: return std::make_unique<ImagesOutput>(o);
    case config::OutputKind::File: return std::make_unique<FileOutput>(o);
  }
  throw InternalError("unknown output kind");
}

}  // namespace vc::pipeline
