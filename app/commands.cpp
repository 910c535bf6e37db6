#include "app/commands.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/classifier.hpp"
#include "pipeline/runner.hpp"
#include "pipeline/sources/gst_probe.hpp"
#include "service/server.hpp"

namespace vc::app {

namespace {

std::atomic<int> stop_requests{0};
std::atomic<int> reload_requests{0};

// First Ctrl-C, SIGTERM or SIGHUP: stop reading, finish the outputs (the MP4 gets its index, the results file its
// last line). Second: leave at once — every results line is already whole (each is one write), only a plain MP4
// is left unfinished (under its .partial name).
void on_signal(int) {
  if (stop_requests.fetch_add(1) >= 1) _exit(130);
  const char msg[] = "\nstopping: finishing the outputs (Ctrl-C again to quit at once)\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
}

// A service's SIGHUP (api.enabled): read the configuration again and bring the streams in line with it.
void on_reload(int) { reload_requests.fetch_add(1); }

// The streams a service starts with: those it had when it stopped (api.state_file), else the configured ones.
config::Config with_saved_streams(const config::Config& config) {
  config::Config out = config;
  std::error_code ec;
  if (!config.api.enabled || config.api.state_file.empty() || !std::filesystem::exists(config.api.state_file, ec)) return out;
  config::load_inputs(out, config.api.state_file);
  vc::log::get("app")->info("{} stream(s) from {} (the streams as last changed over the API), not the configured {}",
                            out.inputs.size(), config.api.state_file, config.inputs.size());
  return out;
}

// Until the run ends: on each SIGHUP, the configuration read again and the streams reconciled with it (only
// added, removed or changed streams are touched), and each model whose weights file changed deployed (built beside
// the running one, switched between two batches). Other changed settings need a restart: said.
void reload_loop(const std::atomic<bool>& done, const std::function<config::Config()>& reload, service::Api& api,
                 const config::Config& started_with) {
  auto log = vc::log::get("app");
  int seen = 0;
  while (!done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int now = reload_requests.load();
    if (now == seen) continue;
    seen = now;
    log->info("SIGHUP: reading the configuration again");
    try {
      const auto fresh = reload();
      config::Config a = fresh, b = started_with;
      a.inputs.clear();
      b.inputs.clear();
      a.explicit_keys.clear();
      b.explicit_keys.clear();
      a.model.weights = b.model.weights;  // (a new weights file is deployed, below)
      for (auto& [name, m] : a.models) {
        if (const auto at = b.models.find(name); at != b.models.end()) m.weights = at->second.weights;
      }
      if (config::to_yaml(a) != config::to_yaml(b)) {
        log->warn("SIGHUP: only the streams (inputs:) change while the service runs; the other changed settings take "
                  "effect at the next start");
      }
      const auto r = api.reconcile(fresh.inputs);
      auto names = [](const std::vector<std::string>& v) {
        std::string out;
        for (const auto& n : v) out += (out.empty() ? "" : ", ") + n;
        return out.empty() ? std::string("none") : out;
      };
      log->info("SIGHUP: streams added: {}; removed: {}; changed: {}", names(r.added), names(r.removed), names(r.changed));
      if (!r.kept.empty()) log->info("SIGHUP: kept (added over the API): {}", names(r.kept));
      for (const auto& f : r.failed) log->error("SIGHUP: {}", f);
      for (const auto& line : api.redeploy(fresh)) log->info("SIGHUP: model {}", line);
    } catch (const std::exception& e) {
      log->error("SIGHUP: the configuration was not applied: {}", e.what());
    }
  }
}

}  // namespace

int classify(const config::Config& configured, std::function<config::Config()> reload) {
  stop_requests = 0;
  reload_requests = 0;
  const config::Config config = with_saved_streams(configured);
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;  // a stop request must not turn a blocked write (results into a full pipe) into an error
  sigemptyset(&action.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &action, nullptr);
  const bool reloads = config.api.enabled && reload;
  if (reloads) {  // a service reconciles its streams on SIGHUP instead of stopping
    struct sigaction hup {};
    hup.sa_handler = on_reload;
    hup.sa_flags = SA_RESTART;
    sigemptyset(&hup.sa_mask);
    sigaction(SIGHUP, &hup, nullptr);
  }
  // A closed pipe is an error on the write that hit it (results to `| head`), not a silent death: the run stops,
  // finalizes its outputs and exits 74.
  std::signal(SIGPIPE, SIG_IGN);
  // GStreamer's first start on a machine scans its plugins (NVDEC's probes every GPU): beside the engine's build
  // rather than after it, when the streams start.
  auto gstreamer = std::async(std::launch::async, pipeline::ensure_gstreamer);
  pipeline::Runner runner(config);
  // The service stands above the pipeline: it reads and steers the run through the runner's control interface.
  std::unique_ptr<service::Server> server;
  if (config.metrics.enabled || config.api.enabled) server = std::make_unique<service::Server>(config, runner.control());
  std::atomic<bool> done{false};
  std::thread reloader;
  if (reloads) reloader = std::thread([&] { reload_loop(done, reload, *server->api(), configured); });
  const auto s = runner.run(stop_requests);
  done = true;
  if (reloader.joinable()) reloader.join();
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
