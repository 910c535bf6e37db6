// RAII for GStreamer objects and the few helpers every pipeline here uses: building a pipeline from a
// description (missing elements named), turning bus errors into typed exceptions.
#pragma once
#include <gst/gst.h>

#include <memory>
#include <string>

namespace vc::pipeline {

struct GstObjectUnref {
  void operator()(void* p) const {
    if (p) gst_object_unref(p);
  }
};
using ElementPtr = std::unique_ptr<GstElement, GstObjectUnref>;
using BusPtr = std::unique_ptr<GstBus, GstObjectUnref>;

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

// gst_parse_launch with errors as exceptions: a missing element is vc::UnavailableError naming it.
PipelinePtr parse_pipeline(const std::string& description);

// The named element of a pipeline (a new reference). Throws vc::InternalError if absent.
ElementPtr child(GstElement* pipeline, const char* name);

// "element 'src': Could not open file … (debug detail)".
std::string describe_error(GstMessage* error_message);

// Whether a GStreamer element factory exists here.
bool has_element(const char* factory);

}  // namespace vc::pipeline
