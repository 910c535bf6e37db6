// What GStreamer offers here: its version and which of the elements the app may use are installed.
#pragma once
#include <string>
#include <vector>

namespace vc::pipeline {

struct ElementStatus {
  std::string name;     // factory name, e.g. "x264enc"
  std::string purpose;  // what the app uses it for
  bool required;        // the app cannot run its main job without it
  bool present;
};

// Initializes GStreamer once (safe to call repeatedly; thread-safe).
void ensure_gstreamer();

std::string gstreamer_version();
std::vector<ElementStatus> probe_elements();

// Cameras GStreamer can see, with their modes, for error messages ("/dev/video0 (HD Webcam): 1280x720 …").
std::string describe_cameras();

}  // namespace vc::pipeline
