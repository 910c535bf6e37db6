#include "pipeline/outputs/collector.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "pipeline/outputs/appsrc_feed.hpp"
#include "pipeline/outputs/frame_image.hpp"
#include "pipeline/sources/gst_cuda.hpp"

namespace vc::pipeline {

namespace fs = std::filesystem;

namespace {

constexpr size_t kQueue = 16;  // frames waiting for the writer; beyond, one is dropped (counted)

// A label as a folder name: '/' and other path characters replaced ("T-shirt/top" -> "T-shirt_top").
std::string folder_name(const std::string& label) {
  std::string out;
  for (unsigned char c : label) out += std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == ' ' ? char(c) : '_';
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

}  // namespace

Collector::Collector(const config::Output& s, size_t capacity)
    : dir_(s.collect_dir), below_(s.collect_below), per_minute_(s.collect_per_minute), capacity_(capacity) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw CantCreateError(fmt::format("output.collect.dir: cannot create {}: {}", dir_, ec.message()));
  const auto index = (fs::path(dir_) / "collect.jsonl").string();
  fd_ = ::open(index.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw CantCreateError(fmt::format("output.collect.dir: cannot write {}: {}", index, std::strerror(errno)));
  thread_ = std::thread([this] { work(); });
}

Collector::~Collector() {
  finish();
  if (fd_ >= 0) ::close(fd_);
}

bool Collector::wants(const FrameResult& r) {
  if (r.top.empty() || !r.finite || r.top.front().score >= below_) return false;
  if (size_t(r.stream) >= capacity_) return false;
  const int64_t t = r.pts_ns >= 0 ? r.pts_ns : r.captured_ns;
  auto& next = next_ns_.try_emplace({r.stream, r.region}, INT64_MIN).first->second;  // (each region at its own rate)
  if (next != INT64_MIN && t < next && t >= next - int64_t(120e9)) return false;  // (a restart: again)
  next = t + int64_t(60e9 / per_minute_);
  return true;
}

void Collector::take(std::shared_ptr<const Frame> frame, const FrameResult& r) {
  if (!frame) return;
  {
    std::lock_guard lock(mutex_);
    if (stop_) return;
    if (queue_.size() >= kQueue) {
      queue_.pop_front();  // the oldest: the disk is behind
      ++dropped_;
    }
    queue_.push_back({std::move(frame), r});
  }
  cv_.notify_one();
}

void Collector::finish() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (const auto lost = failures_.load() + dropped_.load()) {
    vc::log::get("collect")->error("output.collect: {} frame(s) could not be kept ({} write failures, {} dropped while "
                                   "the disk was behind)", lost, failures_.load(), dropped_.load());
  }
}

void Collector::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      write(job);
    } catch (const std::exception& e) {
      const auto n = ++failures_;
      if (n <= 3) vc::log::get("collect")->error("output.collect: {} (the run goes on)", e.what());
    }
  }
}

void Collector::write(const Job& job) {
  const auto& r = job.result;
  const auto& top = r.top.front();
  // A region's go to DIR/REGION/LABEL/: its own dataset (its model has classes of its own), the region alone.
  const auto folder = r.region.empty() ? fs::path(dir_) / folder_name(top.label) : fs::path(dir_) / r.region / folder_name(top.label);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw IoError(fmt::format("cannot create {}: {}", folder.string(), ec.message()));
  const auto name = fmt::format("{}{}-{:06d}-{:02d}.jpg", r.stream_name, r.region.empty() ? "" : "-" + r.region, r.frame,
                                int(std::floor(top.score * 100)));
  const auto file = folder / name;
  const auto part = file.string() + ".part";
  const Frame host = in_host_memory(*job.frame);
  cv::Mat picture = to_bgr(host.view);
  if (!r.region.empty()) {
    picture = picture(cv::Rect(r.box.x, r.box.y, r.box.width, r.box.height) & cv::Rect(0, 0, picture.cols, picture.rows));
  }
  write_image_file(picture, part, false);
  fs::rename(part, file, ec);
  if (ec) throw IoError(fmt::format("cannot write {}: {}", file.string(), ec.message()));
  nlohmann::json top_k = nlohmann::json::array();
  for (const auto& p : r.top) top_k.push_back({{"label", p.label}, {"score", std::round(p.score * 1e6) / 1e6}});
  auto line = nlohmann::json{{"file", fs::relative(file, dir_).generic_string()},
                                   {"stream", r.stream_name},
                                   {"source", r.source},
                                   {"frame", r.frame},
                                   {"pts", r.pts_ns >= 0 ? nlohmann::json(double(r.pts_ns) / 1e9) : nlohmann::json()},
                                   {"label", top.label},
                                   {"score", std::round(top.score * 1e6) / 1e6},
                                   {"top", top_k}};
  if (!r.region.empty()) {
    line["region"] = r.region;
    line["box"] = {r.box.x, r.box.y, r.box.width, r.box.height};
  }
  const auto text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (::write(fd_, text.data(), text.size()) != ssize_t(text.size())) {
    throw IoError(fmt::format("{}/collect.jsonl: {}", dir_, std::strerror(errno)));
  }
  ++saved_;
}

}  // namespace vc::pipeline
