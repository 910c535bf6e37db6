#include "inference/cuda/engine/plan_cache.hpp"

#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend_version.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/logging.hpp"
#include "inference/cuda/engine/algo_cache.hpp"

namespace vc::inference {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMachineFile = "machine.json";

// The NVIDIA kernel module's version ("580.95.05"), "" where /proc does not say.
std::string driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  std::smatch m;
  static const std::regex version(R"(Kernel Module\s+([0-9][0-9.]*))");
  return std::regex_search(line, m, version) ? m[1].str() : "";
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

std::string machine_identity(const cudaDeviceProp& prop) {
  int cuda_driver = 0;
  if (cudaDriverGetVersion(&cuda_driver) != cudaSuccess) cudaGetLastError();
  const auto driver = driver_version();
  return fmt::format("{} sm{}{} | driver {}(CUDA {}) | cuDNN {} | frontend {}", prop.name, prop.major, prop.minor,
                     driver.empty() ? "" : driver + " ", cuda_driver, cudnnGetVersion(), CUDNN_FRONTEND_VERSION);
}

PlanCache::PlanCache(const std::string& algorithm_cache, std::string machine) : machine_(std::move(machine)) {
  if (algorithm_cache.empty()) return;
  folder_ = fs::path(algorithm_cache).replace_extension(".plans").string();
  const auto text = read_all(fs::path(folder_) / kMachineFile);
  if (text.empty()) return;  // none kept yet
  std::string made_for;
  try {
    made_for = nlohmann::json::parse(text).at("machine").get<std::string>();
  } catch (const std::exception&) {
    made_for = "(unreadable)";
  }
  usable_ = made_for == machine_;
  if (!usable_) {
    vc::log::get("inference")->info("compiled plans in {} are for {}, not this machine ({}): compiling them here",
                                    folder_, made_for, machine_);
  }
}

std::string PlanCache::file_of(const std::string& key) const {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a: a name that is the same in every build
  for (const unsigned char c : key) hash = (hash ^ c) * 1099511628211ull;
  return (fs::path(folder_) / fmt::format("{:016x}.plan", hash)).string();
}

std::optional<std::vector<uint8_t>> PlanCache::find(const std::string& key) const {
  if (!usable_) return std::nullopt;
  const auto data = read_all(file_of(key));
  const auto newline = data.find('\n');
  if (newline == std::string::npos || data.compare(0, newline, key) != 0) return std::nullopt;  // absent, or another key
  return std::vector<uint8_t>(data.begin() + long(newline) + 1, data.end());
}

void PlanCache::put(const std::string& key, const std::vector<uint8_t>& plan) {
  if (folder_.empty() || plan.empty()) return;
  try {
    if (!usable_) {  // a fresh folder, or another machine's plans: those go
      fs::create_directories(folder_);
      for (const auto& entry : fs::directory_iterator(folder_)) {
        if (entry.path().extension() == ".plan") fs::remove(entry.path());
      }
      write_file_atomically((fs::path(folder_) / kMachineFile).string(), nlohmann::json{{"machine", machine_}}.dump() + "\n");
      usable_ = true;
    }
    write_file_atomically(file_of(key), key + "\n", plan);
  } catch (const std::exception& e) {
    if (!warned_) vc::log::get("inference")->warn("could not keep a compiled plan in {}: {}", folder_, e.what());
    warned_ = true;
  }
}

}  // namespace vc::inference
