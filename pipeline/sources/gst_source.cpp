#include "pipeline/sources/gst_source.hpp"

#include <gst/app/gstappsink.h>
#include <gst/video/video.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "config/logging.hpp"
#include "config/redact.hpp"
#include "pipeline/core/stats.hpp"
#include "pipeline/sources/decoders.hpp"
#include "pipeline/sources/gst_cuda.hpp"
#include "pipeline/sources/gst_probe.hpp"
#include "pipeline/sources/network_errors.hpp"

namespace vc::pipeline {
namespace {

namespace fs = std::filesystem;

// The formats the engines read directly, in order of preference when a conversion is unavoidable.
// 10-bit video stays 10-bit (videoconvert keeps the depth it is given: 4:2:2 and 4:4:4 come out as 4:2:0 of the
// same depth).
constexpr const char* kFormats = "{ (string)I420, (string)NV12, (string)I420_10LE, (string)P010_10LE, (string)BGR, "
                                 "(string)BGRx, (string)BGRA, (string)RGB, (string)RGBA, (string)RGBx }";

GstCaps* system_caps(const config::Input& in) {
  GstCaps* caps = gst_caps_from_string(fmt::format("video/x-raw, format=(string){}", kFormats).c_str());
  if (in.width > 0) gst_caps_set_simple(caps, "width", G_TYPE_INT, in.width, "height", G_TYPE_INT, in.height, nullptr);
  if (in.fps > 0) gst_caps_set_simple(caps, "framerate", GST_TYPE_FRACTION, int(in.fps * 1000 + 0.5), 1000, nullptr);
  return caps;
}

// The error a user should see for a pipeline ERROR message.
Failure classify(GstMessage* m, const std::string& what, bool live, const std::string& uri) {
  GError* error = nullptr;
  gst_message_parse_error(m, &error, nullptr);
  const bool resource = error && error->domain == GST_RESOURCE_ERROR;
  const int code = error ? error->code : 0;
  const bool missing = resource && (code == GST_RESOURCE_ERROR_NOT_FOUND || code == GST_RESOURCE_ERROR_OPEN_READ ||
                                    code == GST_RESOURCE_ERROR_OPEN_READ_WRITE);
  const bool gone = resource && (code == GST_RESOURCE_ERROR_BUSY || code == GST_RESOURCE_ERROR_READ ||
                                 code == GST_RESOURCE_ERROR_FAILED || code == GST_RESOURCE_ERROR_SETTINGS);
  const bool plugin = (error && error->domain == GST_CORE_ERROR && code == GST_CORE_ERROR_MISSING_PLUGIN) ||
                      (error && error->domain == GST_STREAM_ERROR && code == GST_STREAM_ERROR_CODEC_NOT_FOUND);
  const bool negotiation = error && error->domain == GST_STREAM_ERROR && code == GST_STREAM_ERROR_FORMAT;
  if (error) g_error_free(error);
  auto message = fmt::format("{}: {}", what, describe_error(m));
  // A network source that cannot be reached says why, in words (GStreamer's text is in the debug log).
  if (resource && !uri.empty()) {
    if (const auto words = explain_network_failure(uri, code); !words.empty()) message = fmt::format("{}: {}", what, words);
  }
  // An http(s) source says what the server answered.
  const GstStructure* details = nullptr;
  gst_message_parse_error_details(m, &details);
  guint status = 0;
  if (details && gst_structure_get_uint(details, "http-status-code", &status) && status > 0) {
    message = fmt::format("{}: the server answered HTTP {} ({})", what, status, describe_error(m));
  }
  if (missing && !live) return {ExitCode::kNoInput, message};
  if (plugin) return {ExitCode::kUnavailable, message + " (a GStreamer plugin is missing: see `video-classifier doctor`)"};
  if (live && (gone || negotiation || missing)) return {ExitCode::kUnavailable, message};
  return {ExitCode::kData, message};
}

std::string describe(const SourceSpec& s) {
  switch (s.input.kind) {
    case config::InputKind::Test: return "test pattern '" + s.input.pattern + "'";
    case config::InputKind::File: return s.input.path;
    case config::InputKind::Uri: return config::redact_credentials(s.input.uri);  // (in every message: no password)
    case config::InputKind::Webcam: return s.input.device;
    case config::InputKind::Image: return s.image_file;
  }
  return "?";
}

}  // namespace

std::string GstSource::network_uri() const {
  const auto& in = spec_.input;
  return in.kind == config::InputKind::Uri && in.uri.rfind("file://", 0) != 0 ? in.uri : "";
}

GstSource::GstSource(SourceSpec spec, FrameCallback on_frame)
    : spec_(std::move(spec)), on_frame_(std::move(on_frame)), what_(describe(spec_)), live_(is_live_input(spec_.input)) {
  build();
  bus_.reset(gst_element_get_bus(pipeline_.get()));
  if (gst_element_set_state(pipeline_.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    // The reason is on the bus (a missing file, a busy camera): report it now, as the error it is.
    MessagePtr m{gst_bus_timed_pop_filtered(bus_.get(), GST_SECOND, GST_MESSAGE_ERROR)};
    if (!m) throw DataError(fmt::format("{}: could not start", what_));
    const auto f = classify(m.get(), what_, live_, network_uri());
    switch (f.code) {
      case ExitCode::kNoInput: throw NoInputError(f.message);
      case ExitCode::kUnavailable: throw UnavailableError(f.message);
      default: throw DataError(f.message);
    }
  }
}

GstSource::~GstSource() {
  // Stop first: this joins the streaming threads, so no callback can reach a member being destroyed.
  if (pipeline_) stop_pipeline(pipeline_.get());
}

void GstSource::build() {
  const auto& in = spec_.input;
  pipeline_ = make_pipeline(nullptr);
  GstElement* p = pipeline_.get();

  appsink_ = add_element(p, "appsink", "sink");
  // Files are paced by the consumer (back-pressure), `realtime` files by the clock, live sources by themselves.
  g_object_set(appsink_, "sync", in.kind == config::InputKind::File && in.realtime ? TRUE : FALSE, "max-buffers", 2u,
               "drop", FALSE, "enable-last-sample", FALSE, nullptr);
  GstAppSinkCallbacks callbacks{};
  callbacks.new_sample = [](GstAppSink* sink, gpointer self) {
    return static_cast<GstSource*>(self)->on_sample(GST_ELEMENT(sink));
  };
  gst_app_sink_set_callbacks(GST_APP_SINK(appsink_), &callbacks, this, nullptr);
  // A phone video stored sideways says so in a tag (image-orientation): its frames are classified upright.
  PadPtr sink_pad(gst_element_get_static_pad(appsink_, "sink"));
  gst_pad_add_probe(sink_pad.get(), GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, [](GstPad*, GstPadProbeInfo* info, gpointer self) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(event) == GST_EVENT_TAG) static_cast<GstSource*>(self)->on_tags(event);
    return GST_PAD_PROBE_OK;
  }, this, nullptr);

  switch (in.kind) {
    case config::InputKind::Test: {
      if (!is_enum_nick("videotestsrc", "pattern", in.pattern)) {
        throw ConfigError(fmt::format("input.pattern: '{}' is not a test pattern (known: {})", in.pattern,
                                      enum_nicks("videotestsrc", "pattern")));
      }
      GstElement* src = add_element(p, "videotestsrc", "src");
      g_object_set(src, "is-live", TRUE, nullptr);
      gst_util_set_object_arg(G_OBJECT(src), "pattern", in.pattern.c_str());
      GstCaps* caps = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", nullptr);
      if (in.width > 0) gst_caps_set_simple(caps, "width", G_TYPE_INT, in.width, "height", G_TYPE_INT, in.height, nullptr);
      if (in.fps > 0) gst_caps_set_simple(caps, "framerate", GST_TYPE_FRACTION, int(in.fps * 1000 + 0.5), 1000, nullptr);
      if (spec_.on_packet) {  // no compressed video of its own: an encoder makes packets for event clips
        GstElement* tee = add_element(p, "tee");
        link_chain({src, add_capsfilter(p, caps), tee, add_element(p, "queue"), appsink_});
        add_packet_branch(tee);
      } else {
        link_chain({src, add_capsfilter(p, caps), appsink_});
      }
      fps_ = in.fps > 0 ? in.fps : 30.0;
      video_linked_ = true;
      linked_ns_ = decoded_ns_ = steady_ns(Clock::now());  // (no demuxer, no decoder: its start is the source's)
      if (spec_.place) cuda_context_ = spec_.place({in.width, in.height, in.fps, ""}).cuda_context;  // raw: no decoder
      break;
    }
    case config::InputKind::File:
    case config::InputKind::Image: {
      const auto& file = in.kind == config::InputKind::File ? in.path : spec_.image_file;
      if (spec_.open_path.empty()) check_readable_file(file);  // (an opened file was checked by who opened it)
      GstElement* src = add_element(p, "filesrc", "src");
      g_object_set(src, "location", (spec_.open_path.empty() ? file : spec_.open_path).c_str(), nullptr);
      build_parsed_input(src);
      break;
    }
    case config::InputKind::Uri: {
      if (in.uri.rfind("file://", 0) == 0) {
        gchar* local = gst_uri_get_location(in.uri.c_str());
        const std::string path = local ? local : "";
        g_free(local);
        check_readable_file(path);
      }
      if (!gst_uri_is_valid(in.uri.c_str())) throw ConfigError(fmt::format("input.uri: '{}' is not a valid URI", in.uri));
      GstElement* src = add_element(p, "urisourcebin", "src");
      g_object_set(src, "uri", in.uri.c_str(), nullptr);
      // RTSP: a short jitter buffer (rtspsrc's default is 2 s of latency).
      g_signal_connect(src, "source-setup", G_CALLBACK(+[](GstElement*, GstElement* source, gpointer) {
                         if (g_object_class_find_property(G_OBJECT_GET_CLASS(source), "latency")) {
                           g_object_set(source, "latency", 200u, nullptr);
                         }
                       }), nullptr);
      build_parsed_input(nullptr);
      GstElement* parse = gst_bin_get_by_name(GST_BIN(p), "parse");
      g_signal_connect(src, "pad-added", G_CALLBACK(+[](GstElement*, GstPad* pad, gpointer parsebin) {
                         PadPtr sink(gst_element_get_static_pad(GST_ELEMENT(parsebin), "sink"));
                         if (!gst_pad_is_linked(sink.get())) gst_pad_link(pad, sink.get());
                       }), parse);
      gst_object_unref(parse);  // the pipeline keeps it alive as long as the signal can fire
      break;
    }
    case config::InputKind::Webcam: {
      if (!fs::exists(in.device)) {
        throw NoInputError(fmt::format("{}: no such camera (unplugged?)\n{}", in.device, describe_cameras()));
      }
      GstElement* src = add_element(p, "v4l2src", "src");
      g_object_set(src, "device", in.device.c_str(), nullptr);
      GstElement* head = src;
      if (in.width > 0 || in.fps > 0) {
        GstCaps* caps = gst_caps_new_empty();
        for (const char* media : {"video/x-raw", "image/jpeg"}) {
          GstStructure* s = gst_structure_new_empty(media);
          if (in.width > 0) gst_structure_set(s, "width", G_TYPE_INT, in.width, "height", G_TYPE_INT, in.height, nullptr);
          if (in.fps > 0) gst_structure_set(s, "framerate", GST_TYPE_FRACTION, int(in.fps * 1000 + 0.5), 1000, nullptr);
          gst_caps_append_structure(caps, s);
        }
        GstElement* filter = add_capsfilter(p, caps);
        link_chain({src, filter});
        head = filter;
      }
      build_parsed_input(head);
      break;
    }
  }
}

// upstream -> parsebin; each parsebin pad gets a decoder (or none, for raw video) and the tail to the appsink.
void GstSource::build_parsed_input(GstElement* upstream) {
  GstElement* parse = add_element(pipeline_.get(), "parsebin", "parse");
  if (upstream) link_chain({upstream, parse});
  g_signal_connect(parse, "pad-added", G_CALLBACK(+[](GstElement*, GstPad* pad, gpointer self) {
                     static_cast<GstSource*>(self)->on_pad(pad);
                   }), this);
  g_signal_connect(parse, "no-more-pads", G_CALLBACK(+[](GstElement*, gpointer self) {
                     auto* s = static_cast<GstSource*>(self);
                     if (!s->video_linked_) s->fail(ExitCode::kData, s->what_ + ": no video stream in it");
                   }), this);
}

void GstSource::on_pad(GstPad* pad) {
  CapsPtr caps(gst_pad_get_current_caps(pad));
  if (!caps) caps.reset(gst_pad_query_caps(pad, nullptr));
  const GstStructure* s = caps && gst_caps_get_size(caps.get()) > 0 ? gst_caps_get_structure(caps.get(), 0) : nullptr;
  const std::string media = s ? gst_structure_get_name(s) : "";
  const bool picture = media.rfind("video/", 0) == 0 || media.rfind("image/", 0) == 0;
  if (!picture || video_linked_.exchange(true)) {
    // Audio, subtitles, a second video track: consumed and ignored.
    GstElement* sink = add_element(pipeline_.get(), "fakesink");
    g_object_set(sink, "async", FALSE, "sync", FALSE, nullptr);
    gst_element_sync_state_with_parent(sink);
    PadPtr sink_pad(gst_element_get_static_pad(sink, "sink"));
    // A stream that ends before any video appeared has none (an audio-only file): say so at once. (parsebin in
    // 1.22 signals no "no-more-pads" we could wait for instead.)
    gst_pad_add_probe(sink_pad.get(), GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM,
                      [](GstPad*, GstPadProbeInfo* info, gpointer self) {
                        auto* source = static_cast<GstSource*>(self);
                        if (GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS && !source->video_linked_) {
                          source->fail(ExitCode::kData, source->what_ + ": no video stream in it");
                        }
                        return GST_PAD_PROBE_OK;
                      },
                      this, nullptr);
    gst_pad_link(pad, sink_pad.get());
    return;
  }
  if (gst_caps_is_fixed(caps.get())) {
    link_video_or_fail(pad, caps.get());
    return;
  }
  // The pad does not know its caps yet (parsebin exposes some before the first caps event): the decoder is chosen
  // from the stream's actual caps — profile, bit depth, alpha — once they come, and linked before they go on.
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, [](GstPad* p, GstPadProbeInfo* info, gpointer self) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(event) != GST_EVENT_CAPS) return GST_PAD_PROBE_OK;
    GstCaps* event_caps = nullptr;
    gst_event_parse_caps(event, &event_caps);
    static_cast<GstSource*>(self)->link_video_or_fail(p, event_caps);
    return GST_PAD_PROBE_REMOVE;
  }, this, nullptr);
}

void GstSource::link_video_or_fail(GstPad* pad, GstCaps* caps) {
  try {
    link_video(pad, caps);
  } catch (const Error& e) {
    fail(e.code(), e.what());
  }
}

void GstSource::link_video(GstPad* pad, GstCaps* caps) {
  const auto& in = spec_.input;
  GstElement* p = pipeline_.get();
  const std::string media = gst_structure_get_name(gst_caps_get_structure(caps, 0));
  std::vector<GstElement*> chain;  // from the pad to the appsink
  bool gpu_output = false;
  // The engine that classifies this stream, now that its size, rate and codec are known; NVDEC decodes on its GPU.
  Placement placement;
  if (spec_.place) {
    const GstStructure* s = gst_caps_get_structure(caps, 0);
    DecodeLoad load;
    gst_structure_get_int(s, "width", &load.width);
    gst_structure_get_int(s, "height", &load.height);
    if (int n = 0, d = 0; gst_structure_get_fraction(s, "framerate", &n, &d) && d > 0) load.fps = double(n) / d;
    if (media != "video/x-raw") load.codec = stream_format(caps).codec;
    placement = spec_.place(load);
    cuda_context_ = placement.cuda_context;
  }
  if (media != "video/x-raw") {
    const auto decoders = decoders_for(caps, in.decoder, placement.cuda_device);
    const auto& format = decoders.format;
    if (decoders.usable.empty()) {
      const char* which = in.decoder == config::Decoder::Gpu ? "NVDEC (input.decoder is gpu) "
                          : in.decoder == config::Decoder::Cpu ? "CPU (input.decoder is cpu) " : "";
      std::string refused;
      for (const auto& d : decoders.rejected) refused += fmt::format("; {}: {}", d.factory, d.unfit);
      throw UnavailableError(fmt::format(
          "{}: no {}decoder here decodes {} correctly{} ({}; `video-classifier doctor` lists the decoders)", what_,
          which, format.describe(), refused,
          in.decoder == config::Decoder::Gpu ? "NVDEC needs the NVIDIA driver, a GPU and gstreamer1.0-plugins-bad"
                                             : "install gstreamer1.0-libav"));
    }
    const auto& choice = decoders.usable.front();
    {
      std::lock_guard lock(mutex_);
      decoder_ = choice.factory;
    }
    gchar* caps_text = gst_caps_to_string(caps);
    vc::log::get("pipeline")->debug("{}: {} ({}) decoded by {}", what_, format.describe(), caps_text, choice.factory);
    g_free(caps_text);
    chain.push_back(add_element(p, choice.factory.c_str(), "decoder"));
    // NVDEC decodes in the engine's own CUDA context: its frames are memory the engine's kernels can read.
    if (choice.gpu && placement.cuda_context) gst_element_set_context(chain.back(), placement.cuda_context.get());
    count_decoder(chain.back(), format);
    // Frames stay in GPU memory for the kernel when it reads them as they come: 4:2:0 (NV12 / P010), progressive.
    gpu_output = choice.gpu && spec_.gpu_frames && placement.cuda_context && in.width == 0 && in.fps == 0 &&
                 format.chroma == "4:2:0" && !format.interlaced && gpu_frame_sync().usable;
  }
  if (media == "video/x-raw" && spec_.on_packet) {  // a raw camera: an encoder makes packets for event clips
    GstElement* tee = add_element(p, "tee");
    chain.push_back(tee);
    chain.push_back(add_element(p, "queue"));
    add_packet_branch(tee);
  }
  if (gpu_output) {
    chain.push_back(add_capsfilter(
        p, gst_caps_from_string("video/x-raw(memory:CUDAMemory), format=(string){ NV12, P010_10LE }")));
  } else {
    // Interlaced video is deinterlaced, one frame per frame (mode auto: progressive frames pass untouched).
    chain.push_back(add_element(p, "deinterlace"));
    gst_util_set_object_arg(G_OBJECT(chain.back()), "fields", "top");
    chain.push_back(add_element(p, "videoconvert"));
    if (in.width > 0) chain.push_back(add_element(p, "videoscale"));
    if (in.fps > 0) chain.push_back(add_element(p, "videorate"));
    chain.push_back(add_capsfilter(p, system_caps(in)));
  }
  gpu_path_ = gpu_output;
  for (size_t i = 0; i < chain.size(); ++i) {
    GstElement* next = i + 1 < chain.size() ? chain[i + 1] : appsink_;
    if (!gst_element_link(chain[i], next)) {
      throw InternalError(fmt::format("{}: could not link {} to {}", what_, GST_OBJECT_NAME(chain[i]), GST_OBJECT_NAME(next)));
    }
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) gst_element_sync_state_with_parent(*it);
  PadPtr sink(gst_element_get_static_pad(chain.front(), "sink"));
  const auto result = gst_pad_link(pad, sink.get());
  if (result != GST_PAD_LINK_OK) {
    throw DataError(fmt::format("{}: cannot decode {} ({})", what_, media, gst_pad_link_get_name(result)));
  }
  linked_ns_ = steady_ns(Clock::now());
  if (media == "video/x-raw") decoded_ns_ = linked_ns_.load();
}

void GstSource::count_decoder(GstElement* decoder, const StreamFormat& format) {
  static const char* const one_to_one[] = {"H.264", "H.265", "MPEG-2", "MPEG-4", "JPEG"};
  one_to_one_ = !format.interlaced && std::find(std::begin(one_to_one), std::end(one_to_one), format.codec) != std::end(one_to_one);
  codec_ = format.codec;
  // Each access unit into the decoder that owes a picture back is counted (decoders.hpp: owes_picture), and handed to
  // the packet sink (event clips) as it is.
  PadPtr in(gst_element_get_static_pad(decoder, "sink"));
  gst_pad_add_probe(in.get(), GST_PAD_PROBE_TYPE_BUFFER, [](GstPad* pad, GstPadProbeInfo* info, gpointer self) {
    auto* source = static_cast<GstSource*>(self);
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (owes_picture(pad, buffer, source->codec_)) ++source->decoder_in_;
    if (source->spec_.on_packet) source->spec_.on_packet(make_packet(buffer, source->packet_caps(pad)));
    return GST_PAD_PROBE_OK;
  }, this, nullptr);
  // A picture the decoder flags corrupt, or the first after a decode error (GstVideoDecoder marks it DISCONT), is
  // damaged: so is the frame it becomes.
  PadPtr out(gst_element_get_static_pad(decoder, "src"));
  gst_pad_add_probe(out.get(), GST_PAD_PROBE_TYPE_BUFFER, [](GstPad*, GstPadProbeInfo* info, gpointer self) {
    auto* source = static_cast<GstSource*>(self);
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    const bool first = source->decoder_out_++ == 0;
    if (first && source->decoded_ns_ == 0) source->decoded_ns_ = steady_ns(Clock::now());
    if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_CORRUPTED) || (!first && GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DISCONT))) {
      ++source->decoder_damaged_;
      std::lock_guard lock(source->mutex_);
      source->damaged_pts_.push_back(GST_BUFFER_PTS(buffer));
    }
    return GST_PAD_PROBE_OK;
  }, this, nullptr);
}

GstSource::DecoderCounts GstSource::decoder_counts() const {
  return {decoder_in_.load(), decoder_out_.load(), decoder_damaged_.load(), one_to_one_.load()};
}

// Whether the picture with this timestamp came out of the decoder damaged (pictures arrive in order).
bool GstSource::take_damaged(GstClockTime pts) {
  std::lock_guard lock(mutex_);
  while (!damaged_pts_.empty() && GST_CLOCK_TIME_IS_VALID(pts) && GST_CLOCK_TIME_IS_VALID(damaged_pts_.front()) &&
         damaged_pts_.front() < pts) {
    damaged_pts_.pop_front();  // went elsewhere (a frame the pipeline dropped)
  }
  if (damaged_pts_.empty() || damaged_pts_.front() != pts) return false;
  damaged_pts_.pop_front();
  return true;
}

GstFlowReturn GstSource::on_sample(GstElement* sink) {
  GstSample* pulled = gst_app_sink_pull_sample(GST_APP_SINK(sink));
  if (!pulled) return GST_FLOW_EOS;
  // A sample of our own for the same buffer and caps: appsink reuses its sample object, and sets new caps on it after
  // a flush (a looping file's seek) — which it must not while a frame in flight still holds it.
  GstSample* raw = gst_sample_new(gst_sample_get_buffer(pulled), gst_sample_get_caps(pulled), nullptr, nullptr);
  gst_sample_unref(pulled);
  auto m = std::make_shared<MappedSample>();
  m->sample.reset(raw);
  GstVideoInfo info;
  GstBuffer* buffer = gst_sample_get_buffer(raw);
  if (!gst_video_info_from_caps(&info, gst_sample_get_caps(raw))) {
    fail(ExitCode::kInternal, what_ + ": frame without video caps");
    return GST_FLOW_ERROR;
  }
  const auto format = pixel_format(GST_VIDEO_INFO_FORMAT(&info));
  const bool device = gpu_path_ && is_cuda_buffer(buffer);
  if (device) sync_cuda_buffer(buffer);  // GStreamer >= 1.24: the decoder's own stream may still be writing it
  if (!format || !gst_video_frame_map(&m->frame, &info, buffer, device ? cuda_map_flags() : GST_MAP_READ)) {
    fail(ExitCode::kInternal, fmt::format("{}: cannot map a {} frame", what_, gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&info))));
    return GST_FLOW_ERROR;
  }
  m->mapped = true;
  if (fps_ == 0 && info.fps_n > 0 && info.fps_d > 0) fps_ = double(info.fps_n) / info.fps_d;

  Frame f;
  f.view.format = *format;
  f.view.width = GST_VIDEO_FRAME_WIDTH(&m->frame);
  f.view.height = GST_VIDEO_FRAME_HEIGHT(&m->frame);
  for (int i = 0; i < int(GST_VIDEO_FRAME_N_PLANES(&m->frame)) && i < 3; ++i) {
    f.view.planes[i] = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&m->frame, i));
    f.view.strides[i] = GST_VIDEO_FRAME_PLANE_STRIDE(&m->frame, i);
  }
  f.view.matrix = info.colorimetry.matrix == GST_VIDEO_COLOR_MATRIX_BT709 ? inference::YuvMatrix::BT709
                                                                           : inference::YuvMatrix::BT601;
  f.view.full_range = info.colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255;
  f.view.memory = device ? inference::MemoryKind::Device : inference::MemoryKind::Host;
  f.view.rotation = rotation_;
  try {
    inference::validate_frame(f.view);  // what the kernel will read is there, before any copy
  } catch (const Error& e) {
    fail(ExitCode::kData, fmt::format("{}: a decoded frame cannot be read: {}", what_, e.what()));
    return GST_FLOW_ERROR;
  }
  // Its regions lie inside its picture, or it is refused (a later change of size: the lane leaves them out, warned).
  if (auto why = index_ ? std::nullopt : config::regions_outside(spec_.input.regions, f.view.shown_width(), f.view.shown_height())) {
    fail(ExitCode::kConfig, fmt::format("{}: {}", what_, *why));
    return GST_FLOW_ERROR;
  }
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  f.pts_ns = GST_CLOCK_TIME_IS_VALID(pts) ? int64_t(pts) : -1;
  f.damaged = decoder_damaged_ > 0 && take_damaged(pts);
  f.index = index_++;
  f.fps = fps_;
  f.captured = Clock::now();
  f.holder = std::move(m);
  if (spec_.input.kind == config::InputKind::Image) {
    f.source = spec_.image_file;
    f.independent = true;
    f.pts_ns = -1;  // a still image has no timeline
  }
  return on_frame_(std::move(f)) ? GST_FLOW_OK : GST_FLOW_EOS;
}

void GstSource::on_tags(GstEvent* event) {
  GstTagList* tags = nullptr;
  gst_event_parse_tag(event, &tags);
  gchar* orientation = nullptr;
  if (!tags || !gst_tag_list_get_string(tags, GST_TAG_IMAGE_ORIENTATION, &orientation)) return;
  const std::string o = orientation;
  g_free(orientation);
  int rotation = 0;
  if (o == "rotate-90") rotation = 90;
  if (o == "rotate-180") rotation = 180;
  if (o == "rotate-270") rotation = 270;
  if (o.rfind("flip-", 0) == 0) {
    vc::log::get("pipeline")->warn("{}: orientation '{}' is a mirror image: classified as stored", what_, o);
  }
  if (rotation != rotation_.exchange(rotation) && rotation != 0) {
    vc::log::get("pipeline")->info("{}: stored turned ({}): classified upright", what_, o);
  }
}

void GstSource::fail(ExitCode code, std::string message) {
  {
    std::lock_guard lock(mutex_);
    if (pending_failure_) return;  // the first failure is the cause
    pending_failure_ = Failure{code, std::move(message)};
  }
  if (bus_) gst_bus_post(bus_.get(), gst_message_new_application(nullptr, gst_structure_new_empty("vc-failure")));
}

GstSource::State GstSource::poll(std::chrono::milliseconds wait) {
  const auto take_pending = [&] {
    std::lock_guard lock(mutex_);
    if (!pending_failure_) return false;
    failure_ = *pending_failure_;
    return true;
  };
  if (take_pending()) return State::Failed;
  GstClockTime timeout = GstClockTime(wait.count()) * GST_MSECOND;
  const auto types = GstMessageType(GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_WARNING | GST_MESSAGE_APPLICATION);
  while (MessagePtr m{gst_bus_timed_pop_filtered(bus_.get(), timeout, types)}) {
    timeout = 0;  // drain what is there, then return
    switch (GST_MESSAGE_TYPE(m.get())) {
      case GST_MESSAGE_ERROR:
        if (take_pending()) return State::Failed;  // our own diagnosis is the better message
        failure_ = classify(m.get(), what_, live_, network_uri());
        return State::Failed;
      case GST_MESSAGE_EOS: return take_pending() ? State::Failed : State::Ended;
      case GST_MESSAGE_WARNING: {
        ++warnings_;
        GError* w = nullptr;
        gst_message_parse_warning(m.get(), &w, nullptr);
        vc::log::get("pipeline")->warn("{}: {}: {}", what_, GST_OBJECT_NAME(GST_MESSAGE_SRC(m.get())), w ? w->message : "?");
        if (w) g_error_free(w);
        break;
      }
      default:
        if (take_pending()) return State::Failed;
        break;
    }
  }
  // A file whose streaming stopped for a second before any video came out (its demuxer failed, parsebin dropped the
  // error): said, not left to the stall watchdog.
  if (live_ || video_linked_ || !streaming_stopped(pipeline_.get())) {
    stopped_since_ = {};
  } else if (stopped_since_ == Clock::time_point{}) {
    stopped_since_ = Clock::now();
  } else if (Clock::now() - stopped_since_ > std::chrono::seconds(1)) {
    failure_ = {ExitCode::kData, what_ + ": no playable video stream: its demuxer stopped before any came out (truncated?)"};
    return State::Failed;
  }
  return State::Running;
}

bool GstSource::rewind() {
  // No frame flows after the end of stream: the pass's counts start again (the first picture after the seek is
  // DISCONT, as any first picture: not damage).
  decoder_in_ = decoder_out_ = decoder_damaged_ = warnings_ = 0;
  next_damaged_ = false;
  std::unique_lock lock(mutex_);
  damaged_pts_.clear();
  lock.unlock();
  return gst_element_seek_simple(pipeline_.get(), GST_FORMAT_TIME, GstSeekFlags(GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT), 0);
}

std::string GstSource::decoder() const {
  std::lock_guard lock(mutex_);
  return decoder_;
}

bool GstSource::duration_known() {
  gint64 duration = 0;
  return gst_element_query_duration(pipeline_.get(), GST_FORMAT_TIME, &duration) && duration > 0;
}

int64_t GstSource::expected_frames() {
  if (expected_ != -2 || live_) return live_ ? -1 : expected_;
  gint64 duration = 0;
  if (fps_ > 0 && gst_element_query_duration(pipeline_.get(), GST_FORMAT_TIME, &duration) && duration > 0) {
    duration_ns_ = duration;
    expected_ = int64_t(double(duration) * 1e-9 * fps_ + 0.5);
  } else if (fps_ > 0) {
    expected_ = -1;
  }
  return expected_ < 0 ? -1 : expected_;
}

}  // namespace vc::pipeline
