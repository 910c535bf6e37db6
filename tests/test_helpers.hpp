// Shared by the tests: fixture paths, random data, error measures.
#pragma once
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "config/version.hpp"

namespace vc::test {

// The source tree: $VC_SOURCE_DIR when set (the GPU machine runs the tests from a copy elsewhere), else the build's.
inline std::string source_dir() {
  const char* env = std::getenv("VC_SOURCE_DIR");
  return env && *env ? env : vc::kSourceDir;
}
inline std::string fixture(const std::string& name) { return source_dir() + "/tests/fixtures/" + name; }

// Runs a shell command from the source tree, returning its exit code and its stdout+stderr.
struct CommandResult {
  int code;
  std::string output;
};
inline CommandResult run_command(const std::string& command) {
  static int counter = 0;
  const auto log = std::filesystem::temp_directory_path() / ("vc-test-cmd-" + std::to_string(getpid()) + "-" +
                                                             std::to_string(counter++) + ".log");
  // In a subshell, so that the redirections cover every command of a list, not only the last.
  const std::string cmd = "cd '" + source_dir() + "' && (" + command + ") >'" + log.string() + "' 2>&1 </dev/null";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// A generator seeded from the OS: every run draws fresh inputs (the seed is printed by the failing CAPTURE).
inline std::mt19937& rng() {
  static std::mt19937 g(std::random_device{}());
  return g;
}

inline std::vector<float> random_floats(size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

// ||a - b|| / ||b||  (b is the reference)
inline double relative_error(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return a.size() != b.size() ? INFINITY : std::sqrt(num / (den > 0 ? den : 1e-30));
}

inline int argmax(std::span<const float> v) {
  int best = 0;
  for (int i = 1; i < int(v.size()); ++i) if (v[i] > v[best]) best = i;
  return best;
}

}  // namespace vc::test
