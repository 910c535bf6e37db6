#include "pipeline/events/retention.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"

namespace vc::pipeline {
namespace {

namespace fs = std::filesystem;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Retention::Retention(std::string dir, double days, double max_gib)
    : dir_(std::move(dir)), index_(dir_ + "/index.jsonl"), days_(days), max_gib_(max_gib) {
  std::ifstream in(index_);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("path")) continue;  // a torn last line from a crash: skipped
    entries_.push_back({j["path"].get<std::string>(), j.value("bytes", uint64_t(0)), j.value("created", int64_t(0))});
  }
}

void Retention::add(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  Entry e{path, ec ? 0 : size, unix_now()};
  entries_.push_back(e);
  std::ofstream out(index_, std::ios::app);
  out << nlohmann::json{{"path", e.path}, {"bytes", e.bytes}, {"created", e.created_s}}.dump() << "\n";
}

uint64_t Retention::bytes() const {
  uint64_t total = 0;
  for (const auto& e : entries_) total += e.bytes;
  return total;
}

std::vector<std::string> Retention::enforce(int64_t now_s) {
  std::vector<std::string> deleted;
  const auto too_old = [&](const Entry& e) { return days_ > 0 && double(now_s - e.created_s) > days_ * 86400.0; };
  const auto limit = uint64_t(max_gib_ * 1073741824.0);
  uint64_t total = bytes();
  std::vector<Entry> kept;
  for (const auto& e : entries_) {  // oldest first
    if (too_old(e) || (max_gib_ > 0 && total > limit)) {
      std::error_code ec;
      fs::remove(e.path, ec);
      if (ec && fs::exists(e.path)) {
        vc::log::get("events")->warn("retention: cannot delete {}: {}", e.path, ec.message());
        kept.push_back(e);
        continue;
      }
      total -= std::min(total, e.bytes);
      deleted.push_back(e.path);
    } else {
      kept.push_back(e);
    }
  }
  if (!deleted.empty()) {
    entries_ = std::move(kept);
    save();
  }
  return deleted;
}

void Retention::save() const {
  const auto tmp = fmt::format("{}.{}.tmp", index_, getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& e : entries_) out << nlohmann::json{{"path", e.path}, {"bytes", e.bytes}, {"created", e.created_s}}.dump() << "\n";
    if (!out) throw IoError(fmt::format("{}: cannot rewrite the retention index", index_));
  }
  std::error_code ec;
  fs::rename(tmp, index_, ec);
  if (ec) throw IoError(fmt::format("{}: cannot rewrite the retention index: {}", index_, ec.message()));
}

}  // namespace vc::pipeline
