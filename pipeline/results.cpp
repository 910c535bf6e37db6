#include "pipeline/results.hpp"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"

namespace vc::pipeline {

ResultsWriter::ResultsWriter(const std::string& path, std::string source) : source_(std::move(source)) {
  if (path.empty()) return;
  if (path == "-") {
    file_ = stdout;
    return;
  }
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) throw NoInputError(fmt::format("{}: cannot write the results file", path));
  owned_ = true;
}

ResultsWriter::~ResultsWriter() { close(); }

void ResultsWriter::close() {
  if (file_ && owned_) std::fclose(file_);
  else if (file_) std::fflush(file_);
  file_ = nullptr;
}

void ResultsWriter::write(const FrameResult& r) {
  if (!file_) return;
  nlohmann::json top = nlohmann::json::array();
  for (const auto& p : r.top) top.push_back({{"label", p.label}, {"index", p.index}, {"score", p.score}});
  nlohmann::json line = {{"source", source_},
                         {"frame", r.frame},
                         {"pts", r.pts_ns >= 0 ? nlohmann::json(double(r.pts_ns) * 1e-9) : nlohmann::json()},
                         {"top", top},
                         {"latency_ms", r.latency_ms}};
  if (r.smoothed.index >= 0) {
    line["smoothed"] = {{"label", r.uncertain ? "uncertain" : r.smoothed.label},
                        {"index", r.smoothed.index},
                        {"score", r.smoothed.score},
                        {"uncertain", r.uncertain}};
  }
  std::fputs((line.dump() + "\n").c_str(), file_);
  if (r.smoothed.index >= 0) {
    const std::string label = r.uncertain ? "uncertain" : r.smoothed.label;
    if (last_label_ != label) {
      nlohmann::json event = {{"event", "label_change"},
                              {"frame", r.frame},
                              {"pts", r.pts_ns >= 0 ? nlohmann::json(double(r.pts_ns) * 1e-9) : nlohmann::json()},
                              {"from", last_label_ ? nlohmann::json(*last_label_) : nlohmann::json()},
                              {"to", label}};
      std::fputs((event.dump() + "\n").c_str(), file_);
      last_label_ = label;
    }
  }
}

}  // namespace vc::pipeline
