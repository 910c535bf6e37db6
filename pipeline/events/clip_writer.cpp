#include "pipeline/events/clip_writer.hpp"

#include <gst/app/gstappsrc.h>

#include <cstring>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "pipeline/outputs/appsrc_feed.hpp"
#include "pipeline/sources/gst_util.hpp"

namespace vc::pipeline {
namespace {

constexpr size_t kMaxQueued = 2000;  // packets waiting for the writer (about a minute of 30 fps video)

}  // namespace

std::string clip_extension(const GstCaps* caps) { return mp4_parser(caps) ? ".mp4" : ".mkv"; }

ClipWriter::ClipWriter(std::string path, std::shared_ptr<GstCaps> caps)
    : path_(std::move(path)), caps_(std::move(caps)), thread_([this] { run(); }) {}

ClipWriter::~ClipWriter() {
  close();
  if (thread_.joinable()) thread_.join();
}

void ClipWriter::push(Packet packet) {
  {
    std::lock_guard lock(mutex_);
    if (closing_) return;
    if (queue_.size() >= kMaxQueued) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(packet));
  }
  wake_.notify_one();
}

void ClipWriter::close() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  wake_.notify_one();
}

bool ClipWriter::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

std::optional<std::string> ClipWriter::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void ClipWriter::write(const Packet& p) {
  if (!pipeline_) {
    // appsrc (the stream's own caps) -> parser (H.26x: the muxer's stream format) -> muxer -> file, unbuffered.
    pipeline_ = make_pipeline(nullptr).release();
    src_ = add_element(pipeline_, "appsrc", "src");
    g_object_set(src_, "caps", caps_.get(), "format", GST_FORMAT_TIME, "block", FALSE, "max-bytes", guint64(8) << 20,
                 nullptr);
    GstElement* mux = nullptr;
    std::vector<GstElement*> chain{src_};
    if (const char* parser = mp4_parser(caps_.get())) {
      chain.push_back(add_element(pipeline_, parser));
      mux = add_element(pipeline_, "mp4mux", "mux");
      // A fragment a second: playable while written, and after a kill. Finished, it is rewritten as a plain MP4
      // (a fragmented file's duration leaves out the last pictures of B-frame video: players would drop them).
      g_object_set(mux, "fragment-duration", 1000u, nullptr);
      gst_util_set_object_arg(G_OBJECT(mux), "fragment-mode", "first-moov-then-finalise");
    } else {
      mux = add_element(pipeline_, "matroskamux", "mux");
    }
    GstElement* sink = add_element(pipeline_, "filesink", "file");
    g_object_set(sink, "location", path_.c_str(), nullptr);
    gst_util_set_object_arg(G_OBJECT(sink), "buffer-mode", "unbuffered");
    chain.push_back(mux);
    chain.push_back(sink);
    for (size_t i = 0; i + 1 < chain.size(); ++i) {
      if (!gst_element_link(chain[i], chain[i + 1])) {
        throw InternalError(fmt::format("{}: cannot link {} to {}", path_, GST_OBJECT_NAME(chain[i]), GST_OBJECT_NAME(chain[i + 1])));
      }
    }
    bus_ = gst_element_get_bus(pipeline_);
    if (gst_element_set_state(pipeline_, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
      if (MessagePtr m{gst_bus_timed_pop_filtered(bus_, GST_SECOND, GST_MESSAGE_ERROR)}) throw_output_error(m.get(), path_);
      throw CantCreateError(fmt::format("{}: cannot start writing the clip", path_));
    }
    base_ns_ = std::min(p.dts_ns >= 0 ? p.dts_ns : p.pts_ns, p.pts_ns >= 0 ? p.pts_ns : p.dts_ns);
  }
  wait_for_room(src_, bus_, path_, std::chrono::seconds(30));
  GstBuffer* out = gst_buffer_copy(p.buffer.get());  // shares the memory: the packet's own bytes
  GST_BUFFER_PTS(out) = p.pts_ns >= base_ns_ ? GstClockTime(p.pts_ns - base_ns_) : GST_CLOCK_TIME_NONE;
  GST_BUFFER_DTS(out) = p.dts_ns >= base_ns_ ? GstClockTime(p.dts_ns - base_ns_) : GST_CLOCK_TIME_NONE;
  if (gst_app_src_push_buffer(GST_APP_SRC(src_), out) != GST_FLOW_OK) {
    if (MessagePtr m{gst_bus_timed_pop_filtered(bus_, GST_SECOND, GST_MESSAGE_ERROR)}) throw_output_error(m.get(), path_);
    throw IoError(fmt::format("{}: the clip's writer stopped", path_));
  }
}

void ClipWriter::run() {
  std::string failure;
  for (;;) {
    Packet p;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) break;  // closing, and all written
      p = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!failure.empty()) continue;  // a failed clip takes nothing more
    try {
      write(p);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (pipeline_) {
    if (failure.empty()) {
      gst_app_src_end_of_stream(GST_APP_SRC(src_));
      MessagePtr m{gst_bus_timed_pop_filtered(bus_, 30 * GST_SECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR))};
      if (m && GST_MESSAGE_TYPE(m.get()) == GST_MESSAGE_ERROR) {
        try {
          throw_output_error(m.get(), path_);
        } catch (const std::exception& e) {
          failure = e.what();
        }
      } else if (!m) {
        failure = path_ + ": the clip was not finished within 30 s";
      }
    }
    stop_pipeline(pipeline_);
    gst_object_unref(bus_);
    gst_object_unref(pipeline_);
  }
  std::lock_guard lock(mutex_);
  if (!failure.empty()) error_ = failure;
  done_ = true;
}

}  // namespace vc::pipeline
