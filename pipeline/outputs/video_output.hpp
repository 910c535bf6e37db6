// Where labelled frames go: an MP4/MKV/MOV file (H.264 by NVENC or x264), a window, an RTSP server, a folder of
// labelled images, or nowhere. Files are always finalized: finish() sends end-of-stream and waits for the muxer to
// write its index. A file is started under a temporary name (PATH.partial), so the final name never holds an empty
// or broken file: a plain MP4/MOV is renamed when complete; MKV and fragmented MP4 (output.fragment_s), which stay
// playable even if the process is killed, as soon as their header is written.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "config/config.hpp"

namespace vc::pipeline {

struct OutputFrame {
  cv::Mat bgr;           // CV_8UC3, exactly the output's size
  int64_t pts_ns = 0;    // the frame's time on the output's timeline (from 0)
  int64_t index = 0;     // frame number within its stream
  std::string stream;    // stream name
  std::string source;    // image inputs: the image's file (names the labelled image)
};

class VideoOutput {
 public:
  struct Options {
    config::Output output;  // kind, codec, bitrate, fragment_s, rtsp address/port
    std::string path;       // file: the file; images: the directory or %s pattern; rtsp: the mount point
    int width = 0, height = 0;  // even, >= 16 (files, RTSP); images keep each frame's own size
    double fps = 30;
    std::string name;       // for messages ("stream cam1")
  };

  // Throws UnavailableError (missing elements, no display, port in use), CantCreateError (unwritable path).
  static std::unique_ptr<VideoOutput> open(const Options& options);
  virtual ~VideoOutput() = default;

  // Blocks when the encoder falls behind (files lose nothing). Throws vc::IoError when the output fails (disk
  // full), vc::UnavailableError when a window or server goes away.
  virtual void push(const OutputFrame& frame) = 0;
  // Ends the stream, waits until it is written, and gives the file its final name. Safe to call twice.
  virtual void finish() = 0;
  [[nodiscard]] virtual std::string description() const = 0;
  [[nodiscard]] virtual int64_t frames() const = 0;
  // Frames a live output skipped because its consumer could not keep up (RTSP clients), counted.
  [[nodiscard]] virtual int64_t dropped() const { return 0; }
};

// Where an images output writes the labelled frame of `source` (an image input's file; "" for video): `target` is
// one file, a folder (SOURCE-STEM.jpg, or .png for PNG/BMP sources; STREAM-FRAME.jpg for video), or a %s pattern.
std::string image_output_file(const std::string& target, const std::string& source, const std::string& stream,
                              int64_t index);

// The display sink this machine would use ("ximagesink", "waylandsink"), or throws vc::UnavailableError saying
// why there is none. `check_opens`: also make sure it can open the display (doctor).
std::string display_sink(bool check_opens);

}  // namespace vc::pipeline
