// RAII for GStreamer objects and the helpers every pipeline here is built with. Pipelines are made of elements
// created by factory name with their properties set one by one: no text a user wrote is ever parsed as
// pipeline syntax.
#pragma once
#include <gst/gst.h>
#include <gst/video/video.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "inference/preprocess.hpp"

namespace vc::pipeline {

struct GstObjectUnref {
  void operator()(void* p) const {
    if (p) gst_object_unref(p);
  }
};
using ElementPtr = std::unique_ptr<GstElement, GstObjectUnref>;
using BusPtr = std::unique_ptr<GstBus, GstObjectUnref>;
using PadPtr = std::unique_ptr<GstPad, GstObjectUnref>;

struct MessageUnref {
  void operator()(GstMessage* m) const {
    if (m) gst_message_unref(m);
  }
};
using MessagePtr = std::unique_ptr<GstMessage, MessageUnref>;

struct SampleUnref {
  void operator()(GstSample* s) const {
    if (s) gst_sample_unref(s);
  }
};
using SamplePtr = std::unique_ptr<GstSample, SampleUnref>;

// A sample mapped as a video frame; unmapped and released together, when the last holder of the frame lets go.
struct MappedSample {
  SamplePtr sample;
  GstVideoFrame frame{};
  bool mapped = false;
  ~MappedSample() {
    if (mapped) gst_video_frame_unmap(&frame);
  }
};

struct CapsUnref {
  void operator()(GstCaps* c) const {
    if (c) gst_caps_unref(c);
  }
};
using CapsPtr = std::unique_ptr<GstCaps, CapsUnref>;

// Sets a pipeline to NULL and waits: never throws (used in destructors).
void stop_pipeline(GstElement* pipeline) noexcept;

// A top-level pipeline: stopped (state NULL) before its last reference goes, as GStreamer requires.
struct PipelineStopUnref {
  void operator()(GstElement* p) const {
    stop_pipeline(p);
    if (p) gst_object_unref(p);
  }
};
using PipelinePtr = std::unique_ptr<GstElement, PipelineStopUnref>;

// The engines' pixel format of a GStreamer video format (nullopt: one they do not read).
std::optional<inference::PixelFormat> pixel_format(GstVideoFormat f);

// Whether a pipeline's streaming has stopped: some pad of it has had a task (a demuxer's loop, a source's push),
// and none of them runs any more. A demuxer that fails while parsebin still tries it has its error dropped by parsebin
// (GStreamer 1.22) and just stops: this is how that is seen.
bool streaming_stopped(GstElement* pipeline);

// A new empty pipeline.
PipelinePtr make_pipeline(const char* name);

// Creates an element and adds it to `bin` (which then owns it). Throws vc::UnavailableError naming the missing
// element and what to install.
GstElement* add_element(GstElement* bin, const char* factory, const char* name = nullptr);

// Links elements in order; throws vc::InternalError naming the pair that would not link.
void link_chain(std::initializer_list<GstElement*> elements);

// A capsfilter added to `bin` with these caps.
GstElement* add_capsfilter(GstElement* bin, GstCaps* caps, const char* name = nullptr);

// "element 'src': Could not open file … (debug detail)".
std::string describe_error(GstMessage* error_message);

// A caps' media type ("video/x-h264"); "" for none.
std::string media_type(const GstCaps* caps);
// The parser that gives H.264 or H.265 packets the stream format MP4 takes ("h264parse", "h265parse"); null for any
// other video: MP4 here carries only those two (event clips put the rest into Matroska, the live view refuses it).
const char* mp4_parser(const GstCaps* caps);

// Whether a GStreamer element factory exists here.
bool has_element(const char* factory);

// The nicks an enum property of a factory's elements accepts ("smpte, snow, black, …"), for error messages, and
// whether `nick` is one of them.
std::string enum_nicks(const char* factory, const char* property);
bool is_enum_nick(const char* factory, const char* property, const std::string& nick);

}  // namespace vc::pipeline
