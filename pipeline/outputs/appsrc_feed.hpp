// Feeding GStreamer pipelines from the app without ever blocking inside them (an appsrc that blocks while full
// never returns if its pipeline fails meanwhile): waiting for room ourselves while watching the bus, errors as the
// exceptions they are, and one image written to a JPEG or PNG file or encoded into memory.
#pragma once
#include <gst/gst.h>

#include <chrono>
#include <string>

#include <opencv2/core.hpp>

namespace vc::pipeline {

// The bus's error as the exception it is: a write failure (disk full, named as such) is vc::IoError (data lost),
// anything else vc::UnavailableError. `what` names the output.
[[noreturn]] void throw_output_error(GstMessage* error_message, const std::string& what);

// Waits while `appsrc` holds its max-bytes, watching `bus`: throws the first error posted there, or vc::IoError when
// the pipeline takes nothing for `stuck`.
void wait_for_room(GstElement* appsrc, GstBus* bus, const std::string& what, std::chrono::seconds stuck);

// Writes a BGR image (CV_8UC3) to `file` as PNG or JPEG, through GStreamer's encoders. Throws vc::CantCreateError
// or vc::IoError.
void write_image_file(const cv::Mat& bgr, const std::string& file, bool png);
// A BGR image (CV_8UC3) as JPEG bytes, in memory (the service's snapshots). Throws vc::UnavailableError.
std::string encode_jpeg(const cv::Mat& bgr, int quality = 80);

}  // namespace vc::pipeline
