// Which engine — which GPU — classifies each stream, when a run has several (inference.gpus). A stream is placed
// when its format is first known (its caps: size, frame rate, codec), on the engine with the least expected decode
// load, and its NVDEC decoder runs on that engine's GPU, so its frames never cross GPUs. It stays there for its
// life: a reconnect or a file's next loop keeps its engine. Running streams are never moved (a move would restart
// the decoder and lose frames); the balance changes only as streams come and go — a stream that ends or is removed
// gives its load back, and the next one placed takes the lightest engine.
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace vc::pipeline {

// What a stream asks of its decoder, from its caps (0 = not said).
struct DecodeLoad {
  int width = 0, height = 0;
  double fps = 0;
  std::string codec;  // "H.264", "H.265", … ; "" for raw video (no decoding)
};
// Expected decoder work per second, in 1080p30 H.264 streams (1.0 each): pixels per second, weighted by what the
// codec costs NVDEC (H.265 and AV1 decode ~1.7x faster than H.264 per pixel; raw video costs only its copy). Unknown
// sizes count as 1080p, unknown rates as 30 fps.
double decode_cost(const DecodeLoad& load);

class GpuAssignment {
 public:
  // One entry per engine: the CUDA device it runs on (a device may appear twice: two engines on one GPU).
  explicit GpuAssignment(std::vector<int> devices);

  struct Place {
    int lane = 0;    // the engine's index
    int device = 0;  // its CUDA device
  };
  // The engine of `stream`: the one it already has, else the least loaded (then the one with fewest streams, then
  // the lowest index), which takes on its load. Thread-safe.
  Place place(int stream, const DecodeLoad& load);
  // `stream` has ended or was removed: its load is given back (nothing if it was never placed).
  void release(int stream);
  // The engine failed: no stream is placed on it from now on (unless every engine has failed).
  void retire(int lane);
  // The engine `stream` has (nullopt: not placed yet, or released).
  [[nodiscard]] std::optional<Place> placed(int stream) const;

  [[nodiscard]] size_t lanes() const { return devices_.size(); }
  [[nodiscard]] int device(size_t lane) const { return devices_.at(lane); }
  struct LaneLoad {
    double load = 0;  // the sum of its streams' decode_cost
    int streams = 0;
    bool retired = false;
  };
  [[nodiscard]] std::vector<LaneLoad> loads() const;

 private:
  const std::vector<int> devices_;
  mutable std::mutex mutex_;
  std::vector<LaneLoad> loads_;
  std::map<int, std::pair<int, double>> placed_;  // stream -> (lane, its cost)
};

}  // namespace vc::pipeline
