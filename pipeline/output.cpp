#include "pipeline/output.hpp"

#include <gst/app/gstappsrc.h>
#include <gst/rtsp-server/rtsp-server.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "pipeline/gst_util.hpp"

namespace vc::pipeline {
namespace {

std::string raw_caps(int w, int h, double fps) {
  return fmt::format("video/x-raw,format=BGR,width={},height={},framerate={}/1000", w, h, int(fps * 1000 + 0.5));
}

std::string h264_encoder(const config::Output& o) {
  const bool nvenc = o.codec == "nvh264" || (o.codec == "auto" && has_element("nvh264enc"));
  if (o.codec == "nvh264" && !has_element("nvh264enc")) throw UnavailableError("output.codec nvh264: nvh264enc is not available");
  if (nvenc) return fmt::format("nvh264enc bitrate={}", o.bitrate_kbps);
  return fmt::format("x264enc bitrate={} speed-preset=veryfast key-int-max=60", o.bitrate_kbps);
}

GstBuffer* wrap(const cv::Mat& bgr, int64_t index, double fps) {
  const size_t bytes = bgr.total() * bgr.elemSize();
  GstBuffer* buffer = gst_buffer_new_allocate(nullptr, bytes, nullptr);
  gst_buffer_fill(buffer, 0, bgr.isContinuous() ? bgr.data : bgr.clone().data, bytes);
  const double period = 1e9 / fps;
  GST_BUFFER_PTS(buffer) = GstClockTime(double(index) * period);
  GST_BUFFER_DURATION(buffer) = GstClockTime(period);
  return buffer;
}

// appsrc -> … : files and the display.
class PipelineOutput final : public Output {
 public:
  PipelineOutput(const std::string& description, std::string what, double fps, bool is_file)
      : what_(std::move(what)), fps_(fps), is_file_(is_file) {
    pipeline_ = parse_pipeline(description);
    if (is_file_) g_object_set(child(pipeline_.get(), "file").get(), "location", what_.c_str(), nullptr);
    src_ = child(pipeline_.get(), "src");
    bus_.reset(gst_element_get_bus(pipeline_.get()));
    if (gst_element_set_state(pipeline_.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) check_bus(true);
    vc::log::get("pipeline")->info("output: {}", what_);
  }
  ~PipelineOutput() override {
    try {
      finish();
    } catch (const std::exception& e) {
      vc::log::get("pipeline")->error("{}: {}", what_, e.what());
    }
    stop_pipeline(pipeline_.get());
  }

  void push(const cv::Mat& bgr) override {
    check_bus(false);
    if (gst_app_src_push_buffer(GST_APP_SRC(src_.get()), wrap(bgr, index_++, fps_)) != GST_FLOW_OK) check_bus(true);
  }

  void finish() override {
    if (finished_) return;
    finished_ = true;
    gst_app_src_end_of_stream(GST_APP_SRC(src_.get()));
    // The muxer writes its index on EOS: wait for it to reach the sink.
    MessagePtr m{gst_bus_timed_pop_filtered(bus_.get(), 30 * GST_SECOND,
                                            GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR))};
    if (m && GST_MESSAGE_TYPE(m.get()) == GST_MESSAGE_ERROR) {
      throw DataError(fmt::format("{}: {}", what_, describe_error(m.get())));
    }
    if (!m && is_file_) throw InternalError(fmt::format("{}: the encoder did not finish within 30 s", what_));
    stop_pipeline(pipeline_.get());
    if (is_file_) vc::log::get("pipeline")->info("wrote {} frames to {}", index_, what_);
  }

  std::string description() const override { return what_; }

 private:
  void check_bus(bool must_fail) {
    while (MessagePtr m{gst_bus_pop_filtered(bus_.get(), GST_MESSAGE_ERROR)}) {
      finished_ = true;
      throw UnavailableError(fmt::format("{}: {}", what_, describe_error(m.get())));
    }
    if (must_fail) {
      MessagePtr m{gst_bus_timed_pop_filtered(bus_.get(), 2 * GST_SECOND, GST_MESSAGE_ERROR)};
      finished_ = true;
      throw UnavailableError(fmt::format("{}: {}", what_, m ? describe_error(m.get()) : "the output stopped"));
    }
  }

  std::string what_;
  double fps_;
  bool is_file_;
  PipelinePtr pipeline_;
  ElementPtr src_;
  BusPtr bus_;
  int64_t index_ = 0;
  bool finished_ = false;
};

// An RTSP server (gst-rtsp-server) whose clients all see the labelled stream.
class RtspOutput final : public Output {
 public:
  RtspOutput(const config::Output& o, int w, int h, double fps) : fps_(fps) {
    context_ = g_main_context_new();
    loop_ = g_main_loop_new(context_, FALSE);
    server_ = gst_rtsp_server_new();
    gst_rtsp_server_set_address(server_, o.rtsp_address.c_str());
    gst_rtsp_server_set_service(server_, std::to_string(o.rtsp_port).c_str());
    GstRTSPMountPoints* mounts = gst_rtsp_server_get_mount_points(server_);
    GstRTSPMediaFactory* factory = gst_rtsp_media_factory_new();
    const auto launch = fmt::format(
        "( appsrc name=src is-live=true format=time do-timestamp=true caps={} ! videoconvert ! video/x-raw,format=I420 "
        "! {} ! rtph264pay name=pay0 pt=96 config-interval=1 )",
        raw_caps(w, h, fps), h264_encoder(o).find("x264enc") == 0
                                 ? fmt::format("x264enc tune=zerolatency speed-preset=ultrafast bitrate={}", o.bitrate_kbps)
                                 : h264_encoder(o));
    gst_rtsp_media_factory_set_launch(factory, launch.c_str());
    gst_rtsp_media_factory_set_shared(factory, TRUE);
    g_signal_connect(factory, "media-configure", G_CALLBACK(+[](GstRTSPMediaFactory*, GstRTSPMedia* media, gpointer self) {
                       static_cast<RtspOutput*>(self)->on_media(media);
                     }), this);
    gst_rtsp_mount_points_add_factory(mounts, o.rtsp_path.c_str(), factory);
    g_object_unref(mounts);
    if (gst_rtsp_server_attach(server_, context_) == 0) {
      throw UnavailableError(fmt::format("cannot serve RTSP on {}:{} (port in use, or not an address of this host?)",
                                         o.rtsp_address, o.rtsp_port));
    }
    what_ = fmt::format("rtsp://{}:{}{}", o.rtsp_address, o.rtsp_port, o.rtsp_path);
    thread_ = std::thread([this] { g_main_loop_run(loop_); });
    vc::log::get("pipeline")->info("output: serving {}", what_);
  }
  ~RtspOutput() override {
    finish();
    g_main_loop_quit(loop_);
    if (thread_.joinable()) thread_.join();
    g_object_unref(server_);
    g_main_loop_unref(loop_);
    g_main_context_unref(context_);
  }
  void push(const cv::Mat& bgr) override {
    std::lock_guard lock(mutex_);
    for (auto it = sources_.begin(); it != sources_.end();) {
      if (gst_app_src_push_buffer(GST_APP_SRC(*it), wrap(bgr, index_, fps_)) != GST_FLOW_OK) {
        gst_object_unref(*it);
        it = sources_.erase(it);  // that client went away
      } else {
        ++it;
      }
    }
    ++index_;
  }
  void finish() override {
    std::lock_guard lock(mutex_);
    for (auto* s : sources_) {
      gst_app_src_end_of_stream(GST_APP_SRC(s));
      gst_object_unref(s);
    }
    sources_.clear();
  }
  std::string description() const override { return what_; }

 private:
  void on_media(GstRTSPMedia* media) {
    GstElement* bin = gst_rtsp_media_get_element(media);
    GstElement* src = gst_bin_get_by_name_recurse_up(GST_BIN(bin), "src");
    gst_object_unref(bin);
    if (!src) return;
    std::lock_guard lock(mutex_);
    sources_.push_back(src);
  }

  double fps_;
  std::string what_;
  GMainContext* context_ = nullptr;
  GMainLoop* loop_ = nullptr;
  GstRTSPServer* server_ = nullptr;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<GstElement*> sources_;
  int64_t index_ = 0;
};

class NullOutput final : public Output {
 public:
  void push(const cv::Mat&) override {}
  void finish() override {}
  std::string description() const override { return "none"; }
};

}  // namespace

std::unique_ptr<Output> Output::open(const config::Output& o, int w, int h, double fps) {
  if (fps <= 0) fps = 30;
  const auto src = fmt::format("appsrc name=src format=time block=true max-bytes={} caps={}", size_t(w) * h * 3 * 4,
                               raw_caps(w, h, fps));
  if (o.kind == "none") return std::make_unique<NullOutput>();
  if (o.kind == "display") {
    return std::make_unique<PipelineOutput>(src + " ! videoconvert ! autovideosink sync=false", "display", fps, false);
  }
  if (o.kind == "rtsp") return std::make_unique<RtspOutput>(o, w, h, fps);
  const std::filesystem::path path(o.path);
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) throw NoInputError(fmt::format("{}: cannot create directory: {}", path.parent_path().string(), ec.message()));
  }
  if (!std::ofstream(o.path, std::ios::binary)) throw NoInputError(fmt::format("{}: cannot write the output file", o.path));
  const bool mkv = path.extension() == ".mkv";
  auto output = std::make_unique<PipelineOutput>(
      fmt::format("{} ! videoconvert ! video/x-raw,format=I420 ! {} ! h264parse ! {} ! filesink name=file", src,
                  h264_encoder(o), mkv ? "matroskamux" : "mp4mux"),
      o.path, fps, true);
  return output;
}

}  // namespace vc::pipeline
