// The results as JSON lines (one per frame and one per event: a file, one file per stream, or stdout), the JSON
// every sink writes, and the label-change events.
#pragma once
#include <cstdint>
#include <sys/types.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pipeline/core/events.hpp"

namespace vc::pipeline {

// Which label a frame stands for (the smoothed label, or "uncertain"), and when it changes.
class LabelChangeDetector {
 public:
  // The event if `r`'s label differs from the previous one of the stream; images are never compared.
  std::optional<StreamEvent> update(const FrameResult& r, bool independent);

 private:
  std::optional<std::string> last_;
};

// JSON lines, one per frame and one per event: to a file, per-stream files ({stream} in the path) or stdout ("-").
// Every line is written with a single write(2) as soon as it is made — a crash or a second Ctrl-C never leaves
// half a line — and every write is checked (vc::IoError: disk full, closed pipe).
class JsonLinesSink final : public ResultSink {
 public:
  // Throws vc::CantCreateError when a file cannot be created.
  JsonLinesSink(const std::string& path_template, const std::vector<std::string>& stream_names, bool timing);
  ~JsonLinesSink() override;
  void frame(const FrameResult& r) override;
  void event(const StreamEvent& e) override;
  // Per-stream files: the stream's file opens (a name used before in this run is appended to, never truncated) and
  // is finished when the stream ends.
  void add_stream(int stream, const std::string& name) override;
  void end_stream(int stream) override;
  void close() override;
  std::string name() const override { return "results " + path_template_; }

 private:
  struct File {
    std::string path;
    int fd = -1;
    bool owned = false;
    off_t written = 0;  // bytes of whole lines written
  };
  void write_line(int stream, const std::string& line);
  File& file_for(int stream);
  File open_file(const std::string& path, bool append);
  static void finish_file(File& f);

  std::string path_template_;
  bool timing_;
  std::vector<File> files_;       // one, or one per stream
  bool per_stream_ = false;
  std::set<std::string> opened_;  // every path opened in this run
};

// The JSON of a result or an event (shared by the sinks; invalid UTF-8 in names is replaced, never fatal).
std::string to_json(const FrameResult& r, bool timing);
std::string to_json(const StreamEvent& e);

}  // namespace vc::pipeline
