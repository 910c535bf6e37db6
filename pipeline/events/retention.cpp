#include "pipeline/events/retention.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

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

// A relative path's parts, none empty, "." or ".."; nothing for anything else (an absolute path included).
std::optional<std::vector<std::string>> parts_of(const std::string& relative) {
  const fs::path p(relative);
  if (relative.empty() || p.is_absolute()) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& part : p) {
    const auto s = part.string();
    if (s.empty() || s == "." || s == "..") return std::nullopt;
    out.push_back(s);
  }
  return out;
}

}  // namespace

Retention::Retention(std::string dir, double days, double max_gib)
    : dir_(std::move(dir)), index_(dir_ + "/index.jsonl"), days_(days), max_gib_(max_gib) {
  std::error_code ec;
  const auto base = fs::weakly_canonical(fs::absolute(dir_), ec);
  std::ifstream in(index_);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    const auto* path = j.is_object() && j.contains("path") ? &j["path"] : nullptr;
    std::string relative;
    if (path && path->is_string()) {
      relative = path->get<std::string>();
      // Indexes written before paths were kept relative hold absolute ones: taken only when inside the folder.
      if (fs::path(relative).is_absolute()) {
        const auto rel = fs::path(relative).lexically_normal().lexically_relative(base);
        relative = rel.empty() || *rel.begin() == ".." ? "" : rel.string();
      }
    }
    const bool sized = j.is_object() && (!j.contains("bytes") || j["bytes"].is_number_unsigned()) &&
                       (!j.contains("created") || j["created"].is_number_integer());
    if (relative.empty() || !parts_of(relative) || !sized) {
      ++skipped_;  // (a torn last line from a crash, or an entry that is not ours to delete)
      vc::log::get("events")->warn("{}:{}: skipped: not a file of this folder ({})", index_, line_no, line.substr(0, 200));
      continue;
    }
    entries_.push_back({relative, j.value("bytes", uint64_t(0)), j.value("created", int64_t(0))});
  }
}

void Retention::add(const std::string& path) {
  std::error_code ec;
  const auto base = fs::weakly_canonical(fs::absolute(dir_), ec);
  const auto file = fs::weakly_canonical(fs::absolute(path), ec);
  const auto rel = file.lexically_relative(base);
  if (ec || rel.empty() || !parts_of(rel.string())) {
    throw IoError(fmt::format("retention: {} is not inside {}: not recorded", path, dir_));
  }
  const auto size = fs::file_size(path, ec);
  Entry e{rel.string(), ec ? 0 : size, unix_now()};
  const auto line = nlohmann::json{{"path", e.path}, {"bytes", e.bytes}, {"created", e.created_s}}.dump() + "\n";
  const int fd = ::open(index_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  bool written = fd >= 0;
  size_t done = 0;
  while (written && done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) done += size_t(n);
  }
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!written) {
    throw IoError(fmt::format("{}: cannot record {} for retention ({}): it will not be deleted", index_, path,
                              std::strerror(err ? err : ENOSPC)));
  }
  entries_.push_back(std::move(e));
}

uint64_t Retention::bytes() const {
  uint64_t total = 0;
  for (const auto& e : entries_) total += e.bytes;
  return total;
}

Retention::Removed Retention::remove(const Entry& e) const {
  const auto parts = parts_of(e.path);
  if (!parts) return Removed::NotOurs;
  // Down the folders with no link followed, then the file itself only if it is a regular file (not a link).
  int at = ::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (size_t i = 0; at >= 0 && i + 1 < parts->size(); ++i) {
    const int next = ::openat(at, (*parts)[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(at);
    at = next;
  }
  if (at < 0) return errno == ENOENT ? Removed::Absent : errno == ENOTDIR || errno == ELOOP ? Removed::NotOurs : Removed::Failed;
  struct stat st {};
  const auto& name = parts->back();
  Removed result = Removed::Deleted;
  if (::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    result = errno == ENOENT ? Removed::Absent : Removed::Failed;
  } else if (!S_ISREG(st.st_mode)) {
    result = Removed::NotOurs;
  } else if (::unlinkat(at, name.c_str(), 0) != 0) {
    result = errno == ENOENT ? Removed::Absent : Removed::Failed;
  }
  const int err = errno;
  ::close(at);
  errno = err;
  return result;
}

std::vector<std::string> Retention::enforce(int64_t now_s) {
  std::vector<std::string> deleted;
  const auto too_old = [&](const Entry& e) { return days_ > 0 && double(now_s - e.created_s) > days_ * 86400.0; };
  const auto limit = uint64_t(max_gib_ * 1073741824.0);
  uint64_t total = bytes();
  std::vector<Entry> kept;
  bool changed = false;
  for (const auto& e : entries_) {  // oldest first
    if (too_old(e) || (max_gib_ > 0 && total > limit)) {
      const auto result = remove(e);
      if (result == Removed::Failed) {
        vc::log::get("events")->warn("retention: cannot delete {}/{}: {}", dir_, e.path, std::strerror(errno));
        kept.push_back(e);
        continue;
      }
      if (result == Removed::NotOurs) {
        vc::log::get("events")->warn("retention: {}/{} is not the file it wrote any more (a link or a folder on the "
                                     "way, or not a regular file): left alone, forgotten", dir_, e.path);
      }
      total -= std::min(total, e.bytes);
      if (result == Removed::Deleted) deleted.push_back((fs::path(dir_) / e.path).string());
      changed = true;
    } else {
      kept.push_back(e);
    }
  }
  if (changed || skipped_ > 0) {  // (an index with skipped lines is written again without them)
    entries_ = std::move(kept);
    skipped_ = 0;
    save();
  }
  return deleted;
}

void Retention::save() const {
  const auto tmp = fmt::format("{}.{}.tmp", index_, getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& e : entries_) out << nlohmann::json{{"path", e.path}, {"bytes", e.bytes}, {"created", e.created_s}}.dump() << "\n";
    out.flush();
    if (!out) throw IoError(fmt::format("{}: cannot rewrite the retention index", index_));
  }
  std::error_code ec;
  fs::rename(tmp, index_, ec);
  if (ec) throw IoError(fmt::format("{}: cannot rewrite the retention index: {}", index_, ec.message()));
}

}  // namespace vc::pipeline
