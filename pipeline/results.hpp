// The per-frame record: one JSON line per frame (source, frame, pts, top-k, smoothed label, latency) and an
// event line whenever the smoothed label changes.
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "inference/postprocess.hpp"

namespace vc::pipeline {

struct FrameResult {
  int64_t frame = 0;
  int64_t pts_ns = -1;
  std::vector<inference::Prediction> top;
  inference::Prediction smoothed;  // index -1 when there is none
  bool uncertain = false;
  double latency_ms = 0;
};

class ResultsWriter {
 public:
  // path: a file, "-" for stdout, "" for none. Throws NoInputError if the file can't be created.
  ResultsWriter(const std::string& path, std::string source);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  void write(const FrameResult& r);
  void close();

 private:
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::string source_;
  std::optional<std::string> last_label_;
};

}  // namespace vc::pipeline
