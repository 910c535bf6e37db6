#include "pipeline/outputs/collector.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/thread_name.hpp"
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
    : dir_(s.collect_dir), below_(s.collect_below), per_minute_(s.collect_per_minute),
      max_frames_(size_t(std::max(1, s.collect_max_frames))), capacity_(capacity) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw CantCreateError(fmt::format("output.collect.dir: cannot create {}: {}", dir_, ec.message()));
  load_index();
  compact();  // (the lines of frames reviewed or dropped since are left out: the index stays the size of the queue)
  thread_ = std::thread([this] {
    name_this_thread("vc-collect");
    work();
  });
}

// The frames still waiting (their files there), oldest first, and the count of those dropped for room so far.
void Collector::load_index() {
  std::ifstream in(fs::path(dir_) / "collect.jsonl");
  for (std::string text; std::getline(in, text);) {
    const auto line = nlohmann::json::parse(text, nullptr, false);
    if (!line.is_object()) continue;  // (a line cut short by a crash)
    if (const auto n = line.find("dropped_for_room"); n != line.end() && n->is_number_integer()) {
      evicted_ += n->get<int64_t>();
      continue;
    }
    const auto file = line.find("file");
    if (file == line.end() || !file->is_string() || !is_frame_file(file->get<std::string>())) continue;
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(fs::path(dir_) / file->get<std::string>(), ec))) continue;
    if (names_.insert(file->get<std::string>()).second) kept_.push_back({file->get<std::string>(), text});
  }
}

bool Collector::is_frame_file(const std::string& file) {
  if (file.empty() || file.front() == '/' || !file.ends_with(".jpg") || file.find('\\') != std::string::npos) return false;
  size_t parts = 0;
  for (size_t at = 0; at <= file.size();) {
    const auto slash = std::min(file.find('/', at), file.size());
    const auto part = std::string_view(file).substr(at, slash - at);
    if (part.empty() || part == "." || part == "..") return false;
    ++parts;
    at = slash + 1;
  }
  return parts == 2 || parts == 3;  // LABEL/NAME.jpg or REGION/LABEL/NAME.jpg
}

// The frames a person has labelled or discarded since (their files gone) are no longer waiting.
void Collector::forget_reviewed() {
  std::erase_if(kept_, [&](const Kept& k) {
    std::error_code ec;
    if (fs::is_regular_file(fs::symlink_status(fs::path(dir_) / k.file, ec))) return false;
    names_.erase(k.file);
    return true;
  });
}

// collect.jsonl rewritten from the frames still waiting (atomically: a reader sees the old index or the new one).
void Collector::compact() {
  const auto index = fs::path(dir_) / "collect.jsonl";
  const auto tmp = fs::path(dir_) / "collect.jsonl.tmp";
  forget_reviewed();
  std::string text;
  if (evicted_ > 0) text += nlohmann::json{{"dropped_for_room", evicted_.load()}}.dump() + "\n";
  for (const auto& k : kept_) text += k.line + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw CantCreateError(fmt::format("output.collect.dir: cannot write {}: {}", tmp.string(), std::strerror(errno)));
  const bool whole = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  ::close(fd);
  std::error_code ec;
  if (whole) fs::rename(tmp, index, ec);
  if (!whole || ec) {
    fs::remove(tmp, ec);
    throw IoError(fmt::format("output.collect.dir: cannot write {}", index.string()));
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(index.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw CantCreateError(fmt::format("output.collect.dir: cannot write {}: {}", index.string(), std::strerror(errno)));
  appended_ = 0;
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
  if (evicted_ > 0) {
    vc::log::get("collect")->info("output.collect: {} frame(s) waiting for review dropped so far to keep at most {} "
                                  "(output.collect.max_frames), the oldest first", evicted_.load(), max_frames_);
  }
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
  auto file = folder / name;
  // (a restarted run numbers its frames from 0 again: never over a file, nor under a name the queue still holds)
  for (int n = 2; fs::exists(fs::symlink_status(file, ec)) || names_.count(fs::relative(file, dir_).generic_string()); ++n) {
    file = folder / fmt::format("{}-{}.jpg", name.substr(0, name.size() - 4), n);
  }
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
                                   // (stream time, else when it came: what the dataset's split rule reads)
                                   {"t", std::round(double(r.pts_ns >= 0 ? r.pts_ns : r.captured_ns) / 1e6) / 1e3},
                                   {"label", top.label},
                                   {"score", std::round(top.score * 1e6) / 1e6},
                                   {"top", top_k},
                                   {"model", r.model},
                                   {"model_id", r.model_id}};
  if (!r.region.empty()) {
    line["region"] = r.region;
    line["box"] = {r.box.x, r.box.y, r.box.width, r.box.height};
  }
  const auto text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (::write(fd_, (text + "\n").data(), text.size() + 1) != ssize_t(text.size() + 1)) {
    throw IoError(fmt::format("{}/collect.jsonl: {}", dir_, std::strerror(errno)));
  }
  kept_.push_back({fs::relative(file, dir_).generic_string(), text});
  names_.insert(kept_.back().file);
  // The queue kept within output.collect.max_frames: the oldest frame still waiting goes first (those a person has
  // labelled or discarded in the meantime have left already: not counted, and they make room).
  if (kept_.size() > max_frames_) forget_reviewed();
  while (kept_.size() > max_frames_) {
    if (fs::remove(fs::path(dir_) / kept_.front().file, ec)) {
      static const std::string one = nlohmann::json{{"dropped_for_room", 1}}.dump() + "\n";
      if (::write(fd_, one.data(), one.size()) != ssize_t(one.size())) {
        throw IoError(fmt::format("{}/collect.jsonl: {}", dir_, std::strerror(errno)));
      }
      if (++evicted_ == 1) {
        vc::log::get("collect")->warn("output.collect: more than {} frames wait for review (output.collect.max_frames): "
                                      "the oldest are dropped from now on", max_frames_);
      }
    }
    names_.erase(kept_.front().file);
    kept_.pop_front();
  }
  if (++appended_ > std::max<size_t>(1000, max_frames_)) compact();
  ++saved_;
}

}  // namespace vc::pipeline
