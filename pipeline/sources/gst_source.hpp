// One GStreamer source: a pipeline built element by element that ends in an appsink and hands each decoded
// frame to a callback. Files and URIs go through parsebin (demuxing, parsing, RTP depayloading) and a decoder
// we choose (decoders.hpp); NVDEC frames stay in GPU memory when asked; every other path delivers NV12, I420 or
// packed RGB in system memory exactly as decoded — colour conversion happens only where a format needs it (e.g.
// a webcam's YUY2). Errors are reported by poll(), as soon as the pipeline posts them.
//
// Lifetime: the destructor stops the pipeline (joining its streaming threads) before anything else is released,
// so no callback runs after it; the callback's target must outlive the source.
#pragma once
#include <gst/gst.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "pipeline/core/failure.hpp"
#include "pipeline/batching/gpu_assignment.hpp"
#include "pipeline/core/frame.hpp"
#include "pipeline/sources/decoders.hpp"
#include "pipeline/sources/gst_util.hpp"
#include "pipeline/sources/input_checks.hpp"
#include "pipeline/sources/packets.hpp"

namespace vc::pipeline {

// Where a stream is classified — the engine, and the GPU whose NVDEC decodes it — asked once its format is known
// (gpu_assignment.hpp).
struct Placement {
  int engine = 0;                            // inference.gpus: the engine's index
  int cuda_device = -1;                      // the GPU whose NVDEC decoder decodes it; -1 = any decoder
  std::shared_ptr<GstContext> cuda_context;  // that engine's CUDA context, shared with NVDEC; may be null
};
using Placer = std::function<Placement(const DecodeLoad&)>;

struct SourceSpec {
  config::Input input;
  std::string image_file;              // kind image: the one file this source decodes
  std::string open_path;               // where the file is read from when not its name: /proc/self/fd/N of a file a
                                       // layer above opened after checking it (the name is what messages show)
  bool gpu_frames = false;             // NVDEC output may stay in GPU memory (a CUDA engine, no video output)
  Placer place;                        // may be empty: any decoder, frames through host memory
  PacketSink on_packet;                // the compressed video before the decoder (raw video: encoded for it); may be empty
  std::function<bool()> packets_wanted;  // raw video: whether to encode it now (empty: always)
};

class GstSource {
 public:
  // Returns false to stop the stream (the pipeline then ends as at end of stream).
  using FrameCallback = std::function<bool(Frame&&)>;

  // Builds and starts the pipeline. Throws NoInputError (no such file/device), ConfigError (unknown test
  // pattern), UnavailableError (missing element, no GPU decoder when input.decoder is gpu).
  GstSource(SourceSpec spec, FrameCallback on_frame);
  ~GstSource();
  GstSource(const GstSource&) = delete;
  GstSource& operator=(const GstSource&) = delete;

  enum class State { Running, Ended, Failed };
  // Handles the pipeline's messages, waiting up to `wait` for one. Failed: failure() says why.
  State poll(std::chrono::milliseconds wait);
  [[nodiscard]] const Failure& failure() const { return failure_; }

  // A new reference to the pipeline's bus (gst_object_unref it): a message posted there wakes poll() at once.
  [[nodiscard]] GstBus* bus_ref() const { return GST_BUS(gst_object_ref(bus_.get())); }
  [[nodiscard]] bool live() const { return live_; }
  [[nodiscard]] std::string decoder() const;  // the decoder element in use ("nvh264dec"), "" before it is known
  [[nodiscard]] bool delivers_gpu_frames() const { return gpu_path_.load(); }
  [[nodiscard]] double fps() const { return fps_.load(); }
  // Frames the container says it holds (duration x frame rate), -1 if unknown (live, or not yet known).
  [[nodiscard]] int64_t expected_frames();
  // The container's duration in ns, -1 if unknown (known once expected_frames() has been asked).
  [[nodiscard]] int64_t duration_ns() const { return duration_ns_; }
  // Whether the source knows its duration (a clip does; a live stream does not).
  [[nodiscard]] bool duration_known();
  // Warnings the pipeline posted (decoding errors in a damaged file come as warnings).
  [[nodiscard]] int64_t warnings() const { return warnings_; }
  // A file at its end (poll() said Ended) plays again from its start in the same pipeline — demuxer, decoder and its
  // CUDA context stay: a looping file behaves as a camera would, with no decoder torn down and made again. The
  // counts above start again for the new pass. False when the file cannot seek (then open it again).
  bool rewind();

  // What the decoder made of the stream so far: the pictures it was given and gave back, whether those two must match
  // (one picture per access unit: H.264, H.265, MPEG-2, MPEG-4 Part 2, JPEG, progressive), and the pictures it
  // flagged corrupt or gave back right after a decode error.
  struct DecoderCounts {
    int64_t in = 0, out = 0, damaged = 0;
    bool one_to_one = false;
  };
  [[nodiscard]] DecoderCounts decoder_counts() const;

  // Where a start goes, in steady-clock nanoseconds (0: not yet): the demuxer found the video and its decoder was
  // linked; the decoder gave its first picture (raw video: when linked). The first frame itself is the Stream's.
  struct StartTimes {
    int64_t linked_ns = 0, decoded_ns = 0;
  };
  [[nodiscard]] StartTimes start_times() const { return {linked_ns_.load(), decoded_ns_.load()}; }

 private:
  void build();
  void build_parsed_input(GstElement* upstream_or_null);
  void on_pad(GstPad* pad);           // a parsebin pad (streaming thread)
  void link_video(GstPad* pad, GstCaps* caps);
  void link_video_or_fail(GstPad* pad, GstCaps* caps);  // a failure goes to poll()
  GstFlowReturn on_sample(GstElement* appsink);
  void on_tags(GstEvent* tag_event);  // streaming thread
  void count_decoder(GstElement* decoder, const StreamFormat& format);
  GstElement* add_packet_branch(GstElement* tee);  // raw video: an encoder whose packets go to on_packet
  bool take_damaged(GstClockTime pts);
  std::shared_ptr<GstCaps> packet_caps(GstPad* pad);
  void fail(ExitCode code, std::string message);  // any thread: recorded, poll() reports it
  [[nodiscard]] std::string network_uri() const;  // the URI of a network source, "" for any other

  SourceSpec spec_;
  FrameCallback on_frame_;
  std::string what_;  // the source as the user named it, for messages
  bool live_ = false;
  GstElement* appsink_ = nullptr;  // owned by the pipeline
  std::atomic<bool> video_linked_{false};
  std::atomic<bool> gpu_path_{false};
  std::atomic<double> fps_{0};
  std::atomic<int> rotation_{0};  // clockwise degrees that turn a frame upright (the image-orientation tag)
  std::atomic<int64_t> index_{0};
  int64_t expected_ = -2;  // -2: not asked yet
  int64_t duration_ns_ = -1;
  int64_t warnings_ = 0;
  std::atomic<int64_t> decoder_in_{0}, decoder_out_{0}, decoder_damaged_{0};
  std::atomic<bool> one_to_one_{false};
  std::atomic<int64_t> linked_ns_{0}, decoded_ns_{0};
  std::string codec_;                    // the compressed stream's codec (set before its first buffer, with the probe)
  std::atomic<bool> next_damaged_{false};  // the decoder's last output picture was damaged: the frame carries it
  mutable std::mutex mutex_;  // guards decoder_, pending_failure_ and damaged_pts_
  std::deque<GstClockTime> damaged_pts_;  // damaged pictures on their way from the decoder to the appsink
  std::shared_ptr<GstCaps> packet_caps_;  // the packets' caps (a streaming thread's only)
  bool encoding_ = false;                 // raw video: the packet encoder has pictures (its branch's thread only)
  // x264enc moves every time by one constant (1000 hours on: its min-pts), and a picture's packet must carry the
  // picture's own time (clips and the live view match them): the first picture's time after the encoder (re)starts,
  // and the shift its packet shows, give every packet its picture's time back.
  std::mutex encoder_mutex_;
  GstClockTime encoder_first_ = GST_CLOCK_TIME_NONE;
  std::optional<int64_t> encoder_shift_;
  std::string decoder_;
  std::optional<Failure> pending_failure_;
  std::shared_ptr<GstContext> cuda_context_;  // the placed engine's, held while its decoder may use it (streaming thread)
  Clock::time_point stopped_since_{};         // a file's streaming stopped before any video came out (poll only)
  Failure failure_;
  BusPtr bus_;
  PipelinePtr pipeline_;  // declared last: destroyed (stopped) first of all the members
};

}  // namespace vc::pipeline
