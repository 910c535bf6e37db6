#include "service/train_job.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/utc_time.hpp"
#include "config/version.hpp"
#include "pipeline/core/control.hpp"
#include "service/api_views.hpp"

extern char** environ;

namespace vc::service {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A file's last `n` lines.
std::vector<std::string> tail(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line.size() > 500 ? line.substr(0, 500) + "…" : line);
    if (lines.size() > n) lines.pop_front();
  }
  return {lines.begin(), lines.end()};
}

std::string beside(const std::string& out, const std::string& suffix) {
  auto p = fs::path(out);
  return (p.parent_path() / (p.stem().string() + suffix)).string();
}

}  // namespace

std::string trainer_python(const config::Teach& s) {
  if (!s.python.empty()) return s.python;
  std::vector<fs::path> venvs;
  if (const char* env = std::getenv("VC_TOOLS_VENV"); env && *env) venvs.emplace_back(env);
  if (const char* home = std::getenv("HOME"); home && *home) venvs.push_back(fs::path(home) / ".cache/video-classifier/tools-venv");
  for (const auto& v : venvs) {
    std::error_code ec;
    if (fs::exists(v / "bin/python", ec)) return (v / "bin/python").string();
  }
  return "python3";  // (looked up in PATH by the spawn; Debian's python3-torch where the tools environment is it)
}

std::string trainer_script(const config::Teach& s) {
  if (!s.trainer.empty()) return s.trainer;
  std::vector<fs::path> roots;
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    roots.push_back(exe.parent_path() / "../share/video-classifier/tools");
    roots.push_back(exe.parent_path() / "../../tools");  // build/app/video-classifier in a source checkout
  }
  roots.push_back(fs::path(kSourceDir) / "tools");
  for (const auto& root : roots) {
    const auto candidate = (root / "train.py").lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  throw NoInputError("tools/train.py not found beside the app: set teach.trainer to it");
}

TrainJob::TrainJob(const config::Teach& settings) : settings_(settings) {}

TrainJob::~TrainJob() {
  {
    std::unique_lock lock(mutex_);
    if (pid_ > 0) {
      cancelling_ = true;
      ::kill(pid_, SIGTERM);  // (train.py alone: see cancel())
      if (!ended_.wait_for(lock, std::chrono::seconds(20), [&] { return pid_ < 0; })) ::kill(-pid_, SIGKILL);
    }
  }
  if (watcher_.joinable()) watcher_.join();
}

bool TrainJob::running() const {
  std::lock_guard lock(mutex_);
  return pid_ > 0;
}

void TrainJob::start(const Request& r) {
  std::lock_guard lock(mutex_);
  if (pid_ > 0) {
    throw pipeline::RequestError(409, fmt::format("a training job (model {}) is running: one at a time (cancel it with "
                                                  "DELETE /api/v1/models/{}/train)", request_.model, request_.model));
  }
  if (watcher_.joinable()) watcher_.join();  // (the last job's, ended)
  const auto python = trainer_python(settings_);
  const auto script = trainer_script(settings_);
  std::error_code ec;
  fs::create_directories(fs::path(r.out).parent_path(), ec);
  if (ec) throw CantCreateError(fmt::format("teach.models_dir: cannot create {}: {}", fs::path(r.out).parent_path().string(), ec.message()));
  const auto progress = beside(r.out, ".progress.jsonl");
  const auto log = beside(r.out, ".log");
  fs::remove(progress, ec);
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<std::string> args{"nice", "-n", "10", python, script, "--data", r.dataset, "--out", r.out,
                                "--progress", progress, "--epochs", std::to_string(r.epochs),
                                "--min-per-class", std::to_string(r.min_per_class),
                                // (half the cores on the CPU at most: the live streams keep the rest)
                                "--threads", std::to_string(std::max(1L, cores / 2)), "--workers", "1",
                                // (it stops, as cancelled, if the app is gone: no orphan training for hours)
                                "--parent-pid", std::to_string(::getpid())};
  if (!r.compare.empty()) args.push_back("--compare=" + r.compare);  // (one argument: a path may start with '-')
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text{"PYTHONUNBUFFERED=1"};
  for (char** e = environ; *e; ++e) {
    if (std::string_view(*e).rfind("PYTHONUNBUFFERED=", 0) != 0) env_text.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&files);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  // Nothing else of the app's: not its listening socket or its clients' (a trainer outliving a crashed app would
  // hold the port), not its files.
  posix_spawn_file_actions_addclosefrom_np(&files, 3);
  // Its own process group (none of its data loaders outlives it: watch() kills the group), no signal blocked (the
  // app's threads block the ones it waits for), the default handlers.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, argv[0], &files, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (err != 0) throw UnavailableError(fmt::format("cannot start the training job ({}): {}", python, std::strerror(err)));
  pid_ = pid;
  cancelling_ = false;
  request_ = r;
  state_ = "running";
  started_ = utc_now(UtcForm::kSeconds);
  ended_at_.clear();
  exit_code_ = 0;
  vc::log::get("service")->info("training job for model {} started (pid {}): {} {} --data {} --out {}", r.model, pid,
                                python, script, r.dataset, r.out);
  watcher_ = std::thread([this, pid] { watch(pid); });
}

void TrainJob::watch(pid_t pid) {
  // Waited for without reaping first: while it is a zombie its process group id cannot be taken by another, so the
  // group (a data loader its parent left behind) is killed safely; then reaped.
  siginfo_t info{};
  int waited;
  while ((waited = ::waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT)) < 0 && errno == EINTR) {
  }
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::lock_guard lock(mutex_);
  exit_code_ = waited < 0 ? 70 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  state_ = exit_code_ == 0 ? "done" : cancelling_ ? "cancelled" : "failed";
  ended_at_ = utc_now(UtcForm::kSeconds);
  pid_ = -1;
  if (state_ != "done") {  // nothing half-written stays (train.py removes its own; a SIGKILL leaves .part files)
    std::error_code ec;
    for (const auto& f : {request_.out + ".part", beside(request_.out, ".json") + ".part"}) fs::remove(f, ec);
    // A cancelled job leaves no candidate; a failed one no card without its model (killed between the two moves).
    if (state_ == "cancelled") fs::remove(request_.out, ec);
    if (state_ == "cancelled" || !fs::exists(request_.out, ec)) fs::remove(beside(request_.out, ".json"), ec);
  }
  vc::log::get("service")->log(state_ == "failed" ? spdlog::level::err : spdlog::level::info,
                               "training job for model {} {} (exit {})", request_.model, state_, exit_code_);
  ended_.notify_all();
}

void TrainJob::cancel(const std::string& model) {
  std::unique_lock lock(mutex_);
  if (pid_ < 0 || request_.model != model) {
    throw pipeline::RequestError(404, fmt::format("no training job of model {} is running", model));
  }
  cancelling_ = true;
  // SIGTERM to train.py alone: it stops at the next batch and shuts its data loaders down itself. (PyTorch's loader
  // workers die of a SIGTERM that is not their parent's, and train.py would then end with a RuntimeError instead of
  // "cancelled".) The whole group gets the SIGKILL, should it not end.
  ::kill(pid_, SIGTERM);
  if (!ended_.wait_for(lock, std::chrono::seconds(20), [&] { return pid_ < 0; })) {
    ::kill(-pid_, SIGKILL);
    ended_.wait(lock, [&] { return pid_ < 0; });
  }
}

json TrainJob::view(const std::string& model) const {
  std::lock_guard lock(mutex_);
  if (state_.empty() || request_.model != model) return nullptr;
  json v{{"model", request_.model},
         {"state", state_},
         {"dataset", request_.dataset},
         {"candidate", request_.out},
         {"started", started_},
         {"epochs_max", request_.epochs}};
  if (!ended_at_.empty()) {
    v["ended"] = ended_at_;
    v["exit_code"] = exit_code_;
  }
  json epochs = json::array();
  std::ifstream in(beside(request_.out, ".progress.jsonl"));
  for (std::string text; std::getline(in, text);) {
    const auto line = json::parse(text, nullptr, false);
    if (!line.is_object()) continue;
    const auto event = text_of(line, "event", "");
    if (event == "start") v["setup"] = line;
    else if (event == "batch" || event == "epoch") v["progress"] = line;
    if (event == "epoch") epochs.push_back(line);
    if (event == "done") v["result"] = line;
    if (event == "error") v["error"] = text_of(line, "message", "train.py failed");
  }
  v["epochs"] = epochs;
  if (state_ == "failed") {
    v["log_tail"] = tail(beside(request_.out, ".log"), 15);
    if (!v.contains("error")) v["error"] = fmt::format("train.py ended with exit status {}", exit_code_);
  }
  return v;
}

}  // namespace vc::service
