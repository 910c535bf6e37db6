#include "pipeline/outputs/dataset_folder.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "config/config.hpp"
#include "config/errors.hpp"

namespace vc::pipeline {

namespace fs = std::filesystem;

std::vector<Split> parse_splits(const std::string& spec, const std::string& what) {
  std::vector<Split> out;
  double total = 0;
  size_t at = 0;
  while (at <= spec.size()) {
    const auto comma = std::min(spec.find(',', at), spec.size());
    const auto part = spec.substr(at, comma - at);
    const auto eq = part.find('=');
    Split s;
    s.name = part.substr(0, eq);
    try {
      s.share = eq == std::string::npos ? -1 : std::stod(part.substr(eq + 1));
    } catch (const std::exception&) {
      s.share = -1;
    }
    if (s.name.empty() || !(s.share > 0) || std::isinf(s.share) || s.name.find_first_of("/\\.") != std::string::npos) {
      throw UsageError(fmt::format("{}: '{}' is not NAME=SHARE,… (e.g. train=0.8,val=0.2)", what, spec));
    }
    total += s.share;
    out.push_back(s);
    at = comma + 1;
  }
  for (auto& s : out) s.share /= total;
  return out;
}

SplitPlan::SplitPlan(std::vector<Split> splits) : splits_(std::move(splits)), given_(splits_.size(), 0) {}

size_t SplitPlan::split_of(int64_t block) {
  while (int64_t(assigned_.size()) <= block) {
    const double n = double(assigned_.size()) + 1;
    size_t best = 0;
    double deficit = -1e9;
    for (size_t i = 0; i < splits_.size(); ++i) {
      const double d = splits_[i].share * n - double(given_[i]);
      if (d > deficit + 1e-12) {
        deficit = d;
        best = i;
      }
    }
    ++given_[best];
    assigned_.push_back(best);
  }
  return assigned_[size_t(block)];
}

std::string label_problem(const std::string& label) {
  if (label.empty()) return "a label cannot be empty";
  if (label.size() > 200) return "a label is at most 200 bytes";
  if (label == "." || label == ".." || label.find_first_of("/\\") != std::string::npos) {
    return fmt::format("'{}' cannot name a class: it names a folder (no '/', '\\', '.' or '..')", label);
  }
  if (config::invalid_utf8_at(label) != std::string::npos) return "a label must be UTF-8 text";
  if (std::any_of(label.begin(), label.end(), [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; })) {
    return "a label cannot hold control characters";
  }
  return {};
}

void add_label(const fs::path& dataset, const std::string& label) {
  std::set<std::string> labels{label};
  {
    std::ifstream in(dataset / "labels.txt");
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) labels.insert(line);
    }
  }
  const auto tmp = dataset / "labels.txt.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& l : labels) out << l << "\n";
    if (!out.flush()) throw IoError(fmt::format("{}: cannot write", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, dataset / "labels.txt", ec);
  if (ec) throw IoError(fmt::format("{}: cannot write labels.txt: {}", dataset.string(), ec.message()));
}

DatasetFolder::DatasetFolder(fs::path dir, std::vector<Split> splits, double block_s)
    : dir_(std::move(dir)), plan_(std::move(splits)), block_s_(block_s > 0 ? block_s : 10) {}

fs::path DatasetFolder::folder_for(const std::string& label, double t, std::string& split) {
  if (const auto why = label_problem(label); !why.empty()) throw DataError(why);
  // The split of the frame's block of stream time: the rule `capture` follows (its plan repeats with the shares'
  // period, so the block number is taken modulo a multiple of it: no table grows with a camera's hours).
  if (!(t >= 0 && t < 1e12)) t = 0;  // (a time from a hand-edited line)
  const auto block = int64_t(t / block_s_) % 5040;  // (5040 = 7!: a multiple of the period of halves … tenths)
  split = plan_.name(plan_.split_of(block));
  const auto folder = dir_ / split / label;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw IoError(fmt::format("{}: cannot create: {}", folder.string(), ec.message()));
  return folder;
}

// `from` renamed to FOLDER/STEM.jpg (STEM-2.jpg, … when taken: never over another file). Returns where, or empty
// with `err` set.
fs::path DatasetFolder::rename_new(const fs::path& from, const fs::path& folder, const std::string& stem, int& err) {
  for (int n = 1; n < 10000; ++n) {
    const auto to = folder / (n == 1 ? stem + ".jpg" : fmt::format("{}-{}.jpg", stem, n));
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return to;
    if (errno != EEXIST) {
      err = errno;
      return {};
    }
  }
  err = EEXIST;
  return {};
}

nlohmann::json DatasetFolder::finish(const fs::path& to, const std::string& label, const std::string& split,
                                     nlohmann::json meta) {
  add_label(dir_, label);  // (after the image is in: a label never names a class without one)
  meta["file"] = to.lexically_relative(dir_).generic_string();
  meta["label"] = label;
  meta["split"] = split;
  record(meta);
  return meta;
}

void DatasetFolder::record(nlohmann::json line) {
  const auto path = (dir_ / "manifest.jsonl").string();
  const auto text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(fmt::format("{}: {}", path, std::strerror(errno)));
  const bool whole = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  const int err = errno;
  ::close(fd);
  if (!whole) throw IoError(fmt::format("{}: {}", path, std::strerror(err)));
}

nlohmann::json DatasetFolder::add_file(const fs::path& from, const std::string& label, double t, nlohmann::json meta) {
  std::lock_guard lock(mutex_);
  std::string split;
  const auto folder = folder_for(label, t, split);
  int err = 0;
  auto to = rename_new(from, folder, from.stem().string(), err);
  std::error_code ec;
  if (to.empty() && err == EXDEV) {  // another file system: copied whole under a temporary name, then moved in
    const auto part = folder / (from.stem().string() + ".jpg.part");
    fs::copy_file(from, part, fs::copy_options::overwrite_existing, ec);
    if (!ec) to = rename_new(part, folder, from.stem().string(), err);
    if (to.empty()) {
      fs::remove(part, ec);
    } else {
      fs::remove(from, ec);  // (if it stays, the queue shows it again: labelled twice at worst, never lost)
    }
  }
  if (to.empty()) {
    throw IoError(fmt::format("{}: cannot move it into {}: {}", from.string(), folder.string(), std::strerror(err ? err : EIO)));
  }
  return finish(to, label, split, std::move(meta));
}

nlohmann::json DatasetFolder::add_bytes(const std::string& jpeg, const std::string& stem, const std::string& label,
                                        double t, nlohmann::json meta) {
  std::lock_guard lock(mutex_);
  std::string split;
  const auto folder = folder_for(label, t, split);
  const auto part = folder / (stem + ".jpg.part");
  std::error_code ec;
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    out.write(jpeg.data(), std::streamsize(jpeg.size()));
    if (!out.flush()) {
      fs::remove(part, ec);
      throw IoError(fmt::format("{}: cannot write", part.string()));
    }
  }
  int err = 0;
  const auto to = rename_new(part, folder, stem, err);
  if (to.empty()) {
    fs::remove(part, ec);
    throw IoError(fmt::format("{}: cannot write: {}", (folder / stem).string(), std::strerror(err)));
  }
  return finish(to, label, split, std::move(meta));
}

nlohmann::json DatasetFolder::counts() const {
  nlohmann::json out = nlohmann::json::object();
  std::error_code ec;
  const auto list = [&](const fs::path& dir) {  // (the folders as they are; one that cannot be read is empty)
    std::vector<fs::directory_entry> entries;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
    ec.clear();
    return entries;
  };
  for (const auto& split : list(dir_)) {
    if (!split.is_directory(ec)) continue;
    for (const auto& label : list(split.path())) {
      if (!label.is_directory(ec)) continue;
      int64_t n = 0;
      for (const auto& image : list(label.path())) n += image.path().extension() == ".jpg" && image.is_regular_file(ec);
      out[label.path().filename().string()][split.path().filename().string()] = n;
    }
  }
  return out;
}

}  // namespace vc::pipeline
