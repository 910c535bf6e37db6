#include "app/commands.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/classifier.hpp"
#include "pipeline/runner.hpp"
#include "service/server.hpp"

namespace vc::app {

namespace {

std::atomic<int> stop_requests{0};

// First Ctrl-C, SIGTERM or SIGHUP: stop reading, finish the outputs (the MP4 gets its index, the results file its
// last line). Second: leave at once — every results line is already whole (each is one write), only a plain MP4
// is left unfinished (under its .partial name).
void on_signal(int) {
  if (stop_requests.fetch_add(1) >= 1) _exit(130);
  const char msg[] = "\nstopping: finishing the outputs (Ctrl-C again to quit at once)\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
}

}  // namespace

int classify(const config::Config& config) {
  stop_requests = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;  // a stop request must not turn a blocked write (results into a full pipe) into an error
  sigemptyset(&action.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &action, nullptr);
  // A closed pipe is an error on the write that hit it (results to `| head`), not a silent death: the run stops,
  // finalizes its outputs and exits 74.
  std::signal(SIGPIPE, SIG_IGN);
  pipeline::Runner runner(config);
  // The service stands above the pipeline: it reads the run through the runner's control interface.
  std::unique_ptr<service::Server> server;
  if (config.metrics.enabled) server = std::make_unique<service::Server>(config.metrics, runner.control());
  const auto s = runner.run(stop_requests);
  auto log = vc::log::get("app");
  log->info("summary ({}):\n{}", s.engine, pipeline::format_summary(s));
  for (const auto& p : s.problems) log->error("{}", p);
  if (s.code != ExitCode::kOk) {
    // Each stream's failure was said when it happened and is in the summary: here only which.
    std::string streams;
    for (const auto& name : s.failed_streams) streams += (streams.empty() ? "" : ", ") + name;
    log->error("exit {}: the run did not complete{}", int(s.code),
               streams.empty() ? ": see the messages above" : fmt::format(" (failed: {})", streams));
  }
  if (!s.abandoned.empty()) {
    // A source thread is still inside GStreamer (and the CUDA driver): running the static destructors under it made
    // such processes exit 255 with nothing said. The outputs are finalized already; end here, with the run's code.
    spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
    std::fflush(nullptr);
    _exit(int(s.code));
  }
  return int(s.code);
}

int print_config(const CommandLine& cl, std::ostream& out) {
  if (!cl.list_keys) {
    // The settings in force — the model file's card merged in, as a run would — each with where it came from.
    config::Config effective = cl.config;
    std::map<std::string, std::string> origins = cl.config.explicit_keys;
    try {
      const auto model = inference::model_settings(cl.config);
      effective.model = model.model;
      effective.model.weights = cl.config.model.weights;  // "" stays "the bundled model"
      for (const auto& [key, from] : model.from_card) origins[key] = from;
    } catch (const Error& e) {
      vc::log::get("app")->warn("the model file's own settings are not shown: {}", e.what());
    }
    out << config::to_yaml(effective, &origins);
    return 0;
  }
  for (const auto& k : config::describe_keys()) {
    fmt::print(out, "{:<30} {:<44} {}\n", k.path, k.default_value, k.description);
  }
  fmt::print(out, "\nSeveral streams: `inputs:` is a list of input sections (each takes the input.* keys above; the\n"
                  "`input:` section gives their defaults); on the command line, repeat --input.\n");
  return 0;
}

}  // namespace vc::app
