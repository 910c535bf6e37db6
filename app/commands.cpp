#include "app/commands.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "pipeline/runner.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace vc::app {

namespace {

std::atomic<int> stop_requests{0};

// First Ctrl-C/SIGTERM: stop reading, finish the outputs (the MP4 gets its index). Second: leave at once.
void on_signal(int) {
  if (stop_requests.fetch_add(1) >= 1) _exit(130);
  const char msg[] = "\nstopping: finishing the output (Ctrl-C again to quit at once)\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
}

}  // namespace

int classify(const config::Config& config) {
  stop_requests = 0;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const auto s = pipeline::run(config, stop_requests);
  vc::log::get("app")->info("{} frames in {:.1f} s ({:.1f} fps), {} dropped; latency mean {:.1f} ms, p50 {:.1f} ms, "
                            "p99 {:.1f} ms{}",
                            s.frames, s.seconds, s.seconds > 0 ? double(s.frames) / s.seconds : 0.0, s.dropped,
                            s.mean_latency_ms, s.p50_latency_ms, s.p99_latency_ms, s.interrupted ? " (interrupted)" : "");
  return 0;
}

int print_config(const CommandLine& cl, std::ostream& out) {
  if (!cl.list_keys) {
    out << config::to_yaml(cl.config);
    return 0;
  }
  for (const auto& k : config::describe_keys()) {
    fmt::print(out, "{:<28} {:<44} {}\n", k.path, k.default_value, k.description);
  }
  return 0;
}


}  // namespace vc::app
