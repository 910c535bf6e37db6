#include "inference/cuda/engine/algo_cache.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/logging.hpp"

namespace vc::inference {

AlgoCache::AlgoCache(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::ifstream in(path_);
  if (!in) return;
  try {
    const auto json = nlohmann::json::parse(in);
    for (const auto& [key, v] : json.at("algorithms").items()) {
      entries_[key] = {v.at("algo").get<int>(), v.at("math").get<int>(), v.value("api", "legacy") == "graph",
                       v.at("workspace").get<size_t>(), v.at("ms").get<float>()};
    }
  } catch (const std::exception& e) {
    vc::log::get("inference")->warn("{}: ignoring unreadable algorithm cache ({})", path_, e.what());
    entries_.clear();
  }
}

std::optional<CachedAlgo> AlgoCache::find(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void AlgoCache::put(const std::string& key, const CachedAlgo& algo) {
  entries_[key] = algo;
  dirty_ = true;
}

void AlgoCache::save() const {
  if (path_.empty() || !dirty_) return;
  auto log = vc::log::get("inference");
  try {
    nlohmann::json algos = nlohmann::json::object();
    for (const auto& [key, a] : entries_) {
      algos[key] = {{"api", a.graph ? "graph" : "legacy"}, {"algo", a.algorithm}, {"math", a.math},
                    {"workspace", a.workspace}, {"ms", a.ms}};
    }
    const std::filesystem::path path(path_);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    write_file_atomically(path_, nlohmann::json{{"version", 1}, {"algorithms", algos}}.dump(1) + "\n");
    log->info("saved {} tuned algorithms to {}", entries_.size(), path_);
  } catch (const std::exception& e) {
    log->warn("could not save the algorithm cache to {}: {}", path_, e.what());
  }
}

void write_file_atomically(const std::string& path, std::string_view head, std::span<const uint8_t> body) {
  static std::atomic<int> writes{0};
  const auto tmp = fmt::format("{}.tmp.{}.{}", path, getpid(), writes++);
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(head.data(), std::streamsize(head.size()));
    out.write(reinterpret_cast<const char*>(body.data()), std::streamsize(body.size()));
    if (!out.flush()) {
      out.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw std::runtime_error("write failed");
    }
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace vc::inference
