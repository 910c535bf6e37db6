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
#include <thread>
#include <vector>

#include "config/version.hpp"
#include "inference/cpu/cpu_ops.hpp"
#include "inference/model/half.hpp"

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

// ||a - b|| / ||b||  (b is the reference): the measure the engine's own diagnose uses.
using inference::cpu::relative_error;

// A random NHWC input rounded to FP16 (an engine's input type): the FP16 bits and the same values as float.
struct Fp16Input {
  std::vector<uint16_t> fp16;
  std::vector<float> value;
};
inline Fp16Input random_fp16_input(size_t count) {
  Fp16Input in;
  for (float v : random_floats(count, -2.f, 2.f)) {
    in.fp16.push_back(inference::float_to_half(v));
    in.value.push_back(inference::half_to_float(in.fp16.back()));
  }
  return in;
}

// Waits until `ready` holds, yielding meanwhile — the tests' latch: no sleep, no time limit (a hang fails the suite
// by its ctest timeout).
template <typename Pred>
void wait_until(Pred ready) {
  while (!ready()) std::this_thread::yield();
}

inline int argmax(std::span<const float> v) {
  int best = 0;
  for (int i = 1; i < int(v.size()); ++i) if (v[i] > v[best]) best = i;
  return best;
}

}  // namespace vc::test
