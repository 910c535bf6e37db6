// One event's clip: the stream's own packets remuxed into a file, never decoded or encoded — H.264 and H.265 into a
// fragmented MP4, anything else into Matroska, both playable at every moment they are being written (a kill leaves
// what was written playable). Timestamps start at 0. A thread of its own writes: push() never blocks (a bounded
// queue; what does not fit is dropped and counted), a slow or full disk never holds back the stream.
#pragma once
#include <gst/gst.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "pipeline/sources/packets.hpp"

namespace vc::pipeline {

class ClipWriter {
 public:
  // The file's extension follows the codec: clip_extension(caps).
  ClipWriter(std::string path, std::shared_ptr<GstCaps> caps);
  ~ClipWriter();
  ClipWriter(const ClipWriter&) = delete;
  ClipWriter& operator=(const ClipWriter&) = delete;

  void push(Packet packet);
  // No more packets: the file is finished on the writer's thread (close() returns at once).
  void close();
  [[nodiscard]] bool done() const;
  [[nodiscard]] std::optional<std::string> error() const;  // why writing failed (a full disk), once it did
  [[nodiscard]] int64_t dropped() const { return dropped_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  void run();
  void write(const Packet& p);  // writer thread

  std::string path_;
  std::shared_ptr<GstCaps> caps_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Packet> queue_;
  bool closing_ = false, done_ = false;
  std::optional<std::string> error_;
  std::atomic<int64_t> dropped_{0};
  int64_t base_ns_ = -1;  // writer thread: the first packet's decode time, the clip's 0
  GstElement* pipeline_ = nullptr;  // writer thread
  GstElement* src_ = nullptr;
  GstBus* bus_ = nullptr;
  std::thread thread_;  // last
};

// ".mp4" for H.264 and H.265, ".mkv" for the rest.
std::string clip_extension(const GstCaps* caps);

}  // namespace vc::pipeline
