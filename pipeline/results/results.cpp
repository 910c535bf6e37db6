#include "pipeline/results/results.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/redact.hpp"
#include "config/config.hpp"
#include "config/errors.hpp"

namespace vc::pipeline {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written: stream, source, frame, …

json seconds(int64_t ns) { return ns >= 0 ? json(double(ns) / 1e9) : json(); }

// Scores rounded to 6 digits: enough for any decision, and lines stay short.
double rounded(double v, double scale) { return std::isfinite(v) ? std::round(v * scale) / scale : v; }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::optional<StreamEvent> LabelChangeDetector::update(const FrameResult& r, bool independent) {
  if (independent || r.smoothed.index < 0) return std::nullopt;
  const std::string label = r.uncertain ? "uncertain" : r.smoothed.label;
  if (last_ == label) return std::nullopt;
  StreamEvent e;
  e.kind = StreamEvent::Kind::LabelChange;
  e.stream = r.stream;
  e.stream_name = r.stream_name;
  e.source = r.source;
  e.frame = r.frame;
  e.pts_ns = r.pts_ns;
  e.from = last_;
  e.to = label;
  last_ = label;
  return e;
}

std::string to_json(const FrameResult& r, bool timing) {
  json top = json::array();
  for (const auto& p : r.top) {
    top.push_back({{"label", p.label}, {"index", p.index}, {"score", std::isfinite(p.score) ? json(rounded(p.score, 1e6)) : json()}});
  }
  json line = {{"stream", r.stream_name}, {"source", r.source},       {"frame", r.frame},
               {"pts", seconds(r.pts_ns)},  {"top", top},              {"latency_ms", rounded(r.latency_ms, 1e3)}};
  // Which model and which weights ("default@3f2a…"): a deploy changes it from one line to the next.
  if (!r.model_id.empty() || !r.model.empty()) line["model"] = r.model_id.empty() ? r.model : r.model_id;
  if (r.smoothed.index >= 0) {
    line["smoothed"] = {{"label", r.uncertain ? "uncertain" : r.smoothed.label},
                        {"index", r.smoothed.index},
                        {"score", std::isfinite(r.smoothed.score) ? json(rounded(r.smoothed.score, 1e6)) : json()},
                        {"uncertain", r.uncertain}};
  }
  if (!r.region.empty()) {  // a region's result: which, where in the picture, by which model
    line["region"] = r.region;
    line["box"] = {r.box.x, r.box.y, r.box.width, r.box.height};
  }
  if (!r.finite) line["non_finite"] = true;
  if (r.damaged) line["damaged"] = true;
  if (timing) {
    line["timing"] = {{"queue_ms", rounded(r.stages.queue_ms, 1e3)},
                      {"inference_ms", rounded(r.stages.inference_ms, 1e3)},
                      {"post_ms", rounded(r.stages.post_ms, 1e3)}};
  }
  return dump(line);
}

std::string to_json(const StreamEvent& e) {
  json line = {{"event", event_name(e.kind)}, {"stream", e.stream_name}, {"source", e.source}};
  if (!e.region.empty()) line["region"] = e.region;
  if (e.kind == StreamEvent::Kind::Rule) {
    const auto& r = e.rule;
    line["type"] = r.type;
    line["id"] = r.id;
    line["rule"] = r.rule;
    line["label"] = r.label;
    line["start"] = seconds(r.start_ns);
    line["start_time"] = r.start_time;
    line["end"] = seconds(r.end_ns);
    line["end_time"] = r.end_time.empty() ? json() : json(r.end_time);
    line["peak"] = {{"score", rounded(r.peak_score, 1e6)}, {"frame", r.peak_frame}, {"pts", seconds(r.peak_ns)}};
    line["clip"] = r.clip.empty() ? json() : json(r.clip);
    line["clip_start"] = seconds(r.clip_start_ns);
    line["snapshot"] = r.snapshot.empty() ? json() : json(r.snapshot);
    line["thumbnail"] = r.thumbnail.empty() ? json() : json(r.thumbnail);
    if (!r.reason.empty()) line["reason"] = r.reason;
  } else if (e.kind == StreamEvent::Kind::LabelChange) {
    line["frame"] = e.frame;
    line["pts"] = seconds(e.pts_ns);
    line["from"] = e.from ? json(*e.from) : json();
    line["to"] = e.to;
  } else {
    if (e.frame >= 0) line["frame"] = e.frame;
    if (!e.reason.empty()) line["reason"] = e.reason;
    if (e.kind == StreamEvent::Kind::StreamDown) line["attempt"] = e.attempt;
  }
  return dump(line);
}

JsonLinesSink::JsonLinesSink(const std::string& path_template, const std::vector<std::string>& names, bool timing)
    : path_template_(path_template), timing_(timing) {
  per_stream_ = path_template != "-" && path_template.find("{stream}") != std::string::npos;
  if (!per_stream_) {
    files_.push_back(open_file(path_template, false));
    return;
  }
  for (size_t i = 0; i < names.size(); ++i) add_stream(int(i), names[i]);
}

JsonLinesSink::File JsonLinesSink::open_file(const std::string& path, bool append) {
  File f;
  f.path = path;
  if (f.path == "-") {
    f.fd = STDOUT_FILENO;
    return f;
  }
  const std::filesystem::path p(f.path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  f.fd = ::open(f.path.c_str(), O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);
  if (f.fd < 0) throw CantCreateError(fmt::format("{}: cannot write the results file: {}", f.path, std::strerror(errno)));
  if (append) f.written = ::lseek(f.fd, 0, SEEK_END);
  f.owned = true;
  opened_.insert(f.path);
  return f;
}

void JsonLinesSink::add_stream(int stream, const std::string& name) {
  if (!per_stream_) return;
  if (files_.size() <= size_t(stream)) files_.resize(size_t(stream) + 1);
  const auto path = config::for_stream(path_template_, name);
  files_[size_t(stream)] = open_file(path, opened_.count(path) > 0);  // a stream back under its name: appended
}

void JsonLinesSink::end_stream(int stream) {
  if (per_stream_ && size_t(stream) < files_.size()) finish_file(files_[size_t(stream)]);
}

JsonLinesSink::~JsonLinesSink() {
  for (auto& f : files_) {
    if (f.owned && f.fd >= 0) ::close(f.fd);
  }
}

JsonLinesSink::File& JsonLinesSink::file_for(int stream) { return files_.at(per_stream_ ? size_t(stream) : 0); }

void JsonLinesSink::write_line(int stream, const std::string& text) {
  File& f = file_for(stream);
  if (f.fd < 0) throw IoError(fmt::format("{}: results written after close", f.path));
  const std::string line = config::redact_credentials(text) + "\n";  // (a reason quoting a URI: never its password)
  // One write(2) per line as a rule, so that a line is in the file whole or not at all. A signal may interrupt a
  // write into a full pipe (EINTR, or a short count): the rest follows. A short count into a file means a full disk:
  // the next write says so, and the partial line is cut off again.
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(f.fd, line.data() + done, line.size() - done);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int err = n < 0 ? errno : ENOSPC;
    if (done > 0 && f.owned && ::ftruncate(f.fd, f.written) != 0) {
      // Nothing more can be done; the error below says what happened.
    }
    throw IoError(fmt::format("{}: cannot write results: {}{}", f.path == "-" ? "stdout" : f.path, std::strerror(err),
                              err == EPIPE ? " (the reader closed the pipe)" : ""));
  }
  f.written += off_t(done);
}

void JsonLinesSink::frame(const FrameResult& r) { write_line(r.stream, to_json(r, timing_)); }
void JsonLinesSink::event(const StreamEvent& e) { write_line(e.stream, to_json(e)); }

void JsonLinesSink::finish_file(File& f) {
  if (f.fd < 0) return;
  // Data written with write(2) is in the kernel; fsync makes sure a full disk or an I/O error shows now.
  if (f.owned) {
    const bool synced = ::fsync(f.fd) == 0 || errno == EINVAL;
    const int err = errno;
    const bool closed = ::close(f.fd) == 0;
    f.fd = -1;
    if (!synced || !closed) throw IoError(fmt::format("{}: cannot finish the results file: {}", f.path, std::strerror(err)));
  }
  f.fd = -1;
}

void JsonLinesSink::close() {
  for (auto& f : files_) finish_file(f);
}

}  // namespace vc::pipeline
