// bench_pipeline: the whole application on many streams, measured side by side with what bounds it. It makes its
// own 1080p H.264 High 4:2:0 test file with GStreamer, then for each stream count N:
//   - one process, N file streams (the multi-stream pipeline, --output none): aggregate and per-stream fps,
//     p50/p99 capture-to-result latency, drops, CPU cores used, GPU memory;
//   - the decode-only ceiling: N decoders in one process (NVDEC, each also as its stateless variant and with
//     output in CUDA memory; the CPU decoder where there is no NVDEC), frames to a fakesink;
//   - N separate single-stream processes of the app (the way to run N streams before this pipeline existed).
// and the largest number of live 1080p30 streams (the file paced in real time, looped) held with no drops and
// p99 latency under 100 ms. With --events, each live count runs a second time with an event rule firing on every
// stream every few seconds (clips of the streams' own packets, snapshots): what recording costs in CPU and latency.
// With --churn, each live count runs again as a service (api.enabled) while one more stream is added and removed
// through the run's control interface (what the REST API calls) over and over: the N streams must drop nothing.
// Prints a table and writes JSON. Random ResNet weights (timing does not depend on them).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gst/gst.h>
#include <nlohmann/json.hpp>

#include "bench/churn.hpp"
#include "bench/nvml_sampler.hpp"
#include "bench/start_split.hpp"
#include "bench/steady_window.hpp"
#include "config/config.hpp"
#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/model/model_card.hpp"
#include "inference/model/resnet.hpp"
#include "pipeline/runner.hpp"
#include "pipeline/sources/decoders.hpp"
#include "pipeline/sources/gst_cuda.hpp"
#include "pipeline/sources/gst_probe.hpp"
#include "pipeline/sources/gst_util.hpp"

using json = nlohmann::json;
namespace config = vc::config;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(std::stoi(item));
  }
  return out;
}

int run_shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// CPU seconds this process has used (user + system, all threads).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// N decoders in one process, each `filesrc ! parsebin ! DECODER [! caps] ! fakesink`: frames per second in all.
// The descriptions hold only our own file name and element names (no user text).
// `shared`: every pipeline uses one CUDA context (the app's way); without it each NVDEC element makes its own.
double decode_only_fps(const std::string& file, int n, const std::string& decoder, bool cuda_memory, int64_t frames_per_file,
                       GstContext* shared = nullptr) {
  std::vector<GstElement*> pipelines;
  for (int i = 0; i < n; ++i) {
    const auto description = fmt::format("filesrc location=\"{}\" ! parsebin ! {} ! {}fakesink sync=false", file, decoder,
                                         cuda_memory ? "video/x-raw(memory:CUDAMemory) ! " : "video/x-raw ! ");
    GError* error = nullptr;
    GstElement* p = gst_parse_launch(description.c_str(), &error);
    if (error) {
      g_error_free(error);
      if (p) gst_object_unref(p);
      for (auto* q : pipelines) gst_object_unref(q);
      return -1;
    }
    if (shared) gst_element_set_context(p, shared);
    pipelines.push_back(p);
  }
  const auto start = Clock::now();
  for (auto* p : pipelines) gst_element_set_state(p, GST_STATE_PLAYING);
  bool ok = true;
  for (auto* p : pipelines) {
    GstBus* bus = gst_element_get_bus(p);
    GstMessage* m = gst_bus_timed_pop_filtered(bus, 600 * GST_SECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    ok &= m && GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS;
    if (m) gst_message_unref(m);
    gst_object_unref(bus);
  }
  const double seconds = since(start);
  for (auto* p : pipelines) {
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(p);
  }
  return ok ? double(n) * double(frames_per_file) / seconds : -1;
}

struct Options {
  std::string app;           // the video-classifier binary (for the separate-process runs)
  std::string model;
  std::string media;
  std::string live_media;    // long enough that no live run reaches its end (cameras do not loop)
  int64_t frames = 300;
  int batch = 32;
  std::string decoder = "auto";
  bool cpu = false;  // the CPU engine (to try the benchmark on a machine without a GPU)
  std::string log_dir;  // the separate processes' logs (stderr), kept for the failures
  std::string events_dir;  // non-empty: the live runs are repeated with event rules, recording here
  std::string region_model;  // non-empty: the live runs are repeated with 4 regions per stream, 2 on this model
  std::vector<int> gpus;   // inference.gpus (empty: one GPU)
  bool all_gpus = false;
};

config::Config base_config(const Options& o) {
  config::Config c;
  c.model.weights = o.model;
  c.inference.device = o.cpu ? config::Device::Cpu : config::Device::Cuda;
  c.inference.batch_size = o.batch;
  c.inference.batch_timeout_ms = 5;
  c.inference.gpus = o.gpus;
  c.inference.all_gpus = o.all_gpus;
  c.output.kind = config::OutputKind::None;
  c.logging.perf_interval_s = 0;
  c.logging.level = "warn";
  config::Input in;
  in.kind = config::InputKind::File;
  in.path = o.media;
  in.decoder = o.decoder == "gpu" ? config::Decoder::Gpu : o.decoder == "cpu" ? config::Decoder::Cpu : config::Decoder::Auto;
  c.input = in;
  return c;
}

// Where the limit was: each GPU's NVDEC and SM utilisation over the run, and with several engines what each did.
void print_utilisation(const json& row) {
  vc::bench::print_steady(row["steady"]);
  for (const auto& u : row["utilisation"]) {
    if (u["samples"].get<int>() == 0) continue;
    fmt::print("       GPU {}: NVDEC {:.0f} % (max {:.0f} %), SM {:.0f} % (max {:.0f} %)\n", u["gpu"].get<int>(),
               u["nvdec_mean_pct"].get<double>(), u["nvdec_max_pct"].get<double>(), u["sm_mean_pct"].get<double>(),
               u["sm_max_pct"].get<double>());
  }
  if (row["engines"].size() < 2) return;
  for (const auto& e : row["engines"]) {
    fmt::print("       engine {} (GPU {}): {} streams, {:.1f} fps{}\n", e["engine"].get<int>(), e["gpu"].get<int>(),
               e["streams"].get<int64_t>(), e["fps"].get<double>(), e["failed"].get<bool>() ? ", FAILED" : "");
  }
}

json run_in_process(const Options& o, int n, bool live, double live_seconds, bool events = false, bool churning = false,
                    bool regions = false) {
  auto c = base_config(o);
  if (live) c.input.path = o.live_media;
  if (regions) {
    // Four regions per stream, none the whole picture: two by the model, two by a second (smaller) model.
    c.models["state"].weights = o.region_model;
    const std::array<std::array<double, 4>, 4> boxes{{{0.05, 0.05, 0.3, 0.3}, {0.6, 0.05, 0.3, 0.3},
                                                     {0.05, 0.6, 0.3, 0.3}, {0.6, 0.6, 0.3, 0.3}}};
    for (size_t r = 0; r < boxes.size(); ++r) {
      c.input.regions.push_back({fmt::format("r{}", r), boxes[r], r < 2 ? "default" : "state", 1});
    }
  }
  if (events) {
    // Any label for 0.2 s opens an event that lasts 3 s; 1 s later the next: on every stream, an event every ~4 s,
    // each with a clip from 2 s before to 2 s after it and a snapshot.
    fs::remove_all(o.events_dir);
    c.events.dir = o.events_dir;
    c.events.pre_s = 2;
    c.events.post_s = 2;
    c.events.retain_gib = 2;
    c.smoothing.threshold = 0;
    config::EventRule rule;
    rule.name = "bench";
    rule.labels = {"*"};
    rule.min_confidence = 0;
    rule.min_duration_s = 0.2;
    rule.max_duration_s = 3;
    rule.cooldown_s = 1;
    c.events.rules = {rule};
  }
  c.inputs.clear();
  for (int i = 0; i < n; ++i) {
    auto in = c.input;
    in.name = fmt::format("s{}", i);
    in.realtime = live;
    in.loop = live;
    c.inputs.push_back(in);
  }
  if (churning) {
    c.api.enabled = true;
    c.api.max_streams = n + 4;
  }
  config::validate(c);
  std::atomic<int> stop{0};
  std::thread timer, churner;
  vc::bench::Churn churned;
  vc::bench::GpuMemorySampler gpu;
  vc::bench::NvmlSampler utilisation;
  const double cpu0 = cpu_seconds();
  vc::pipeline::Runner runner(c);
  // Live: live_seconds from the engine's build; the steady window from 2 s after the last stream's first frame to then.
  std::unique_ptr<vc::bench::SteadyWindow> steady;
  double tuned_after_s = 0;  // (-1: still untuned at the end)
  if (live) {
    steady = std::make_unique<vc::bench::SteadyWindow>(runner.control(), n, 2.0);
    timer = std::thread([&] {
      const auto until = Clock::now() + std::chrono::duration<double>(live_seconds);
      while (Clock::now() < until && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      steady->close();
      // When the tuned engine took over (it is built beside the streams' start): read before the run ends.
      for (const auto& m : runner.control().models()) {
        if (m.name == "default") tuned_after_s = m.tuned ? m.tuned_after_s : -1;
      }
      stop = 1;
    });
  }
  if (churning) churner = std::thread([&] { vc::bench::churn(runner.control(), c.inputs.front(), stop, churned); });
  const auto s = runner.run(stop);
  const double cpu = cpu_seconds() - cpu0;
  const double gpu_mib = gpu.stop_mib();
  json per_gpu = json::array();
  for (const auto& u : utilisation.stop()) {
    per_gpu.push_back({{"gpu", u.gpu}, {"samples", u.samples}, {"nvdec_mean_pct", u.decoder_mean}, {"nvdec_max_pct", u.decoder_max},
                       {"sm_mean_pct", u.sm_mean}, {"sm_max_pct", u.sm_max}});
  }
  json engines = json::array();
  for (const auto& e : s.engines) {
    engines.push_back({{"engine", e.engine}, {"gpu", e.gpu}, {"streams", e.streams}, {"frames", e.frames},
                       {"fps", s.seconds > 0 ? double(e.frames) / s.seconds : 0}, {"failed", !e.failure.empty()}});
  }
  stop = 1;
  if (timer.joinable()) timer.join();
  if (churner.joinable()) churner.join();
  double per_stream = 0, slowest = s.streams.empty() ? 0 : 1e9;
  // When every stream was running at once: from the last stream's first frame to the first stream's last result.
  // Streams start one after another (each opens its own decoder): a live count is only held if they also ran together.
  bool all_ran = !s.streams.empty();  // every stream got a frame and a result
  double last_start = 0, first_start = 1e300, first_end = 1e300;
  std::string decoder;
  int64_t base_dropped = 0;  // the N streams' own (not the added and removed ones')
  json dropped_by = json::object();  // which of them dropped, how many
  int counted = 0;
  for (const auto& r : s.streams) {
    if (r.name.rfind("churn", 0) == 0) continue;
    ++counted;
    base_dropped += r.dropped + r.output_dropped;
    if (r.dropped + r.output_dropped > 0) dropped_by[r.name] = r.dropped + r.output_dropped;
    per_stream += r.fps;
    slowest = std::min(slowest, r.fps);
    decoder = r.decoder + (r.gpu_frames ? " (GPU frames)" : "");
    all_ran = all_ran && r.first_frame_s >= 0 && r.last_result_s >= 0;
    last_start = std::max(last_start, r.first_frame_s);
    first_start = std::min(first_start, r.first_frame_s);
    first_end = std::min(first_end, r.last_result_s);
  }
  const double together = all_ran ? std::max(0.0, first_end - last_start) : 0;
  return {{"streams", n},
          {"frames", s.frames},
          {"seconds", s.seconds},
          {"fps", s.seconds > 0 ? double(s.frames) / s.seconds : 0},
          {"per_stream_fps", counted == 0 ? 0 : per_stream / double(counted)},
          {"slowest_stream_fps", slowest},
          {"all_running_s", together},
          {"start_spread_s", all_ran ? last_start - first_start : -1},
          {"all_started_s", all_ran ? last_start : -1},  // from the run's start (engine built) to the last first frame
          {"start", vc::bench::start_split(s.streams)},
          {"tuned_after_s", tuned_after_s},  // the tuned engine took over (0: started tuned; -1: never)
          {"p50_ms", s.latency_p50_ms},
          {"p99_ms", s.latency_p99_ms},
          {"dropped", base_dropped},
          {"dropped_by_stream", dropped_by},
          {"churn", churning ? json{{"added", churned.added}, {"removed", churned.removed}, {"failed", churned.failed},
                                    {"ended_early", churned.ended_early},
                                    {"others_dropped_while", {{"adding", churned.drops_adding}, {"running", churned.drops_running},
                                                              {"removing", churned.drops_removing}}},
                                    {"engine_batch_max_ms", {{"before", churned.batch_max_ms_before}, {"during", churned.batch_max_ms}}},
                                    {"first_result_p50_ms", vc::bench::percentile(churned.first_frame_ms, 0.5)},
                                    {"first_result_max_ms", vc::bench::percentile(churned.first_frame_ms, 1.0)},
                                    {"remove_p50_ms", vc::bench::percentile(churned.remove_ms, 0.5)},
                                    {"remove_max_ms", vc::bench::percentile(churned.remove_ms, 1.0)}}
                             : json()},
          {"cpu_cores", s.seconds > 0 ? cpu / s.seconds : 0},
          {"gpu_mib", gpu_mib},
          {"utilisation", per_gpu},
          {"engines", engines},
          {"decoder", decoder},
          {"events", s.event_count},
          {"event_clips", s.event_clips},
          {"event_clip_mib", double(s.event_clip_bytes) / 1048576.0},
          {"event_failures", s.event_failures},
          {"steady", steady ? steady->report() : json()},
          {"ok", s.code == vc::ExitCode::kOk}};
}

// The last lines of a child's log: why it failed.
std::string tail_of(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += all[i] + "\n";
  return out;
}

json run_separate(const Options& o, int n) {
  const auto start = Clock::now();
  std::vector<pid_t> children;
  std::vector<std::string> logs;
  for (int i = 0; i < n; ++i) {
    logs.push_back(fmt::format("{}/separate-{}-{}.log", o.log_dir, n, i));
    const pid_t pid = fork();
    if (pid == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      const int log = ::open(logs.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(null, STDOUT_FILENO);
      dup2(log >= 0 ? log : null, STDERR_FILENO);
      execl(o.app.c_str(), o.app.c_str(), "--model", o.model.c_str(), "--input", o.media.c_str(), "--output", "none",
            "--set", o.cpu ? "inference.device=cpu" : "inference.device=cuda", "--set", ("input.decoder=" + o.decoder).c_str(),
            // N processes creating their CUDA contexts, engines and NVDEC decoders at once took over the default 10 s
            // to a first frame (2026-12-03: 11 of 16 "stalled" before it): this measures throughput, not start-up.
            "--set", "input.stall_timeout_s=120", "--log-level", "info",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    children.push_back(pid);
  }
  int failures = 0;
  json failed = json::array();
  for (std::size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    waitpid(children[i], &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    ++failures;
    const std::string how = WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
                                              : fmt::format("signal {}", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    const std::string why = tail_of(logs[i], 3);
    fmt::print(stderr, "bench_pipeline: separate process {}/{}: {}: {}", i, n, how, why.empty() ? "(no output)\n" : why);
    failed.push_back({{"process", i}, {"status", how}, {"log_tail", why}});
  }
  const double seconds = since(start);
  // Only the processes that finished count: a failed one's frames are not known to be classified.
  return {{"streams", n}, {"seconds", seconds}, {"fps", double(n - failures) * double(o.frames) / seconds}, {"failures", failures},
          {"failed", failed}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"bench_pipeline: many streams through the whole application, beside the decode-only ceiling"};
  Options o;
  std::string streams = "1,4,16,64", live = "16,32,48,64,80", json_path, arch = "resnet50", dir = "/tmp/vc-bench-pipeline";
  int separate_max = 16, width = 1920, height = 1080;
  double live_seconds = 10;
  cli.add_option("--app", o.app, "video-classifier binary (for the separate-process runs)")->required();
  cli.add_option("--arch", arch, "ResNet with random weights: resnet18 … resnet152");
  cli.add_option("--streams", streams, "stream counts, e.g. 1,4,16,64");
  cli.add_option("--live", live, "live stream counts to try (1080p30 paced), e.g. 8,16,32; empty = none");
  cli.add_option("--live-seconds", live_seconds, "how long each live run lasts");
  cli.add_option("--separate-max", separate_max, "largest N for N separate processes (0 = none)");
  cli.add_option("--frames", o.frames, "frames in the test file (30 fps)");
  int64_t live_frames = 0;
  cli.add_option("--live-frames", live_frames,
                 "frames in the live runs' file (default: 10 s more than --live-seconds, so no stream loops; "
                 "a shorter file measures looping, which reopens the file)");
  std::string log_dir;
  std::string live_media;
  cli.add_option("--live-media", live_media, "the video the live runs loop instead of the generated 1080p H.264 (an HEVC file)")
      ->check(CLI::ExistingFile);
  cli.add_option("--log-dir", log_dir, "where the separate processes' logs go (default: --dir)");
  cli.add_option("--batch", o.batch, "inference.batch_size");
  cli.add_option("--decoder", o.decoder, "input.decoder: auto, gpu or cpu");
  cli.add_option("--size", width, "test file width (height = width * 9 / 16)");
  cli.add_option("--dir", dir, "where the test media and model go");
  cli.add_option("--json", json_path, "write results here");
  bool events = false, regions = false, churning = false;
  cli.add_flag("--regions", regions, "repeat each live run with 4 regions per stream (2 models), the whole picture not classified");
  cli.add_flag("--events", events, "repeat each live run with an event rule firing on every stream every few seconds");
  cli.add_flag("--churn", churning, "repeat each live run as a service, a stream added and removed over and over beside them");
  std::string gpus;
  cli.add_option("--gpus", gpus, "inference.gpus for the in-process runs: e.g. 0,1 or all (default: one GPU)");
  cli.add_flag("--cpu", o.cpu, "use the CPU engine (a smoke test without a GPU; the numbers mean little)");
  CLI11_PARSE(cli, argc, argv);
  height = width * 9 / 16 / 2 * 2;
  if (gpus == "all") o.all_gpus = true;
  else if (!gpus.empty()) o.gpus = parse_ints(gpus);
  vc::log::set_level("warn");
  try {
    fs::create_directories(dir);
    o.log_dir = log_dir.empty() ? dir : log_dir;
    if (events) o.events_dir = dir + "/events";
    fs::create_directories(o.log_dir);
    // The model: random weights of a standard ResNet, with a card (224, crop, ImageNet normalization); the regions'
    // second model: ResNet-18 with 4 classes, 128x128 stretched (a state classifier).
    const auto random_model = [&](const std::string& name, int classes, int size, const char* resize) {
      const auto file = fmt::format("{}/{}-random-{}.safetensors", dir, name, size);
      vc::inference::ModelCard card;
      card.input_size = size;
      card.resize = resize;
      if (fs::exists(file)) return file;
      vc::inference::write_safetensors(file, vc::inference::random_resnet_tensors(vc::inference::named_resnet(name, classes), 1),
                                       vc::inference::model_card_metadata(card));
      return file;
    };
    o.model = random_model(arch, 1000, 224, "crop");
    if (regions) o.region_model = random_model("resnet18", 4, 128, "stretch");
    // The media: 1080p H.264 High 4:2:0 at 30 fps, 8 Mbit/s (the caps pin 4:2:0: without them x264 may pick 4:4:4).
    const auto make_media = [&](int64_t frames) {
      const auto file = fmt::format("{}/h264-{}x{}-{}.mp4", dir, width, height, frames);
      if (fs::exists(file)) return file;
      const auto make = fmt::format(
          "gst-launch-1.0 -q videotestsrc num-buffers={} pattern=ball ! video/x-raw,width={},height={},framerate=30/1,format=I420 ! "
          "x264enc bitrate=8000 speed-preset=superfast key-int-max=60 ! video/x-h264,profile=high ! h264parse ! mp4mux ! "
          "filesink location=\"{}.part\"", frames, width, height, file);
      if (run_shell(make) != 0) throw vc::UnavailableError("could not make the test media with gst-launch-1.0 (x264enc)");
      fs::rename(file + ".part", file);
      return file;
    };
    o.media = make_media(o.frames);
    if (live_frames <= 0) live_frames = int64_t(30 * (live_seconds + 10));
    o.live_media = live.empty() ? o.media : !live_media.empty() ? live_media : make_media(live_frames);
    vc::pipeline::ensure_gstreamer();
    bool nvdec = false;
    for (const auto& c : vc::pipeline::probe_decoders()) {
      if (c.codec == "H.264") {
        for (const auto& d : c.choice.usable) nvdec |= d.gpu;
      }
    }
    fmt::print("bench_pipeline: {} ({}x{} H.264 High, {} frames), {} with random weights, batch {}, NVDEC {}\n", o.media,
               width, height, o.frames, arch, o.batch, nvdec ? "yes" : "no");

    // Warm the algorithm cache once, so no run below pays for autotuning.
    (void)run_in_process(o, 1, false, 0);
    GstContext* shared_context = nullptr;
    if (nvdec) shared_context = vc::pipeline::make_shared_cuda_context(0);

    json out = {{"media", o.media}, {"arch", arch}, {"batch", o.batch}, {"frames_per_stream", o.frames}, {"nvdec", nvdec}};
    fmt::print("\n{:>7} {:>10} {:>10} {:>8} {:>8} {:>7} {:>6} {:>8} | {:>10} {:>10} {:>10} {:>10} {:>10} | {:>10}\n", "streams", "fps",
               "per-strm", "p50 ms", "p99 ms", "drops", "CPU", "GPU MiB", "dec ceil", "1 context", "sl ceil", "sys-mem", "CPU dec",
               "separate");
    for (int n : parse_ints(streams)) {
      json row = run_in_process(o, n, false, 0);
      const double nv = nvdec ? decode_only_fps(o.media, n, "nvh264dec", true, o.frames) : -1;
      const double nv_shared = nvdec ? decode_only_fps(o.media, n, "nvh264dec", true, o.frames, shared_context) : -1;
      const double sl = nvdec && n <= 16 ? decode_only_fps(o.media, n, "nvh264sldec", true, o.frames) : -1;
      const double sys = nvdec && n <= 16 ? decode_only_fps(o.media, n, "nvh264dec", false, o.frames) : -1;
      const double cpu_dec = n <= 16 ? decode_only_fps(o.media, n, vc::pipeline::has_element("avdec_h264") ? "avdec_h264" : "openh264dec",
                                                       false, o.frames)
                                     : -1;
      row["decode_only"] = {{"nvh264dec_cuda", nv},        {"nvh264dec_cuda_one_context", nv_shared},
                            {"nvh264sldec_cuda", sl},      {"nvh264dec_system", sys}, {"cpu", cpu_dec}};
      json separate;
      if (n <= separate_max) separate = run_separate(o, n);
      row["separate_processes"] = separate;
      const double ceiling = std::max({nv, nv_shared, sl, sys, cpu_dec});
      row["share_of_ceiling"] = ceiling > 0 ? row["fps"].get<double>() / ceiling : 0;
      std::string separate_fps = "-";
      if (!separate.is_null()) {
        separate_fps = fmt::format("{:.1f}", separate["fps"].get<double>());
        if (const int failed = separate["failures"].get<int>()) separate_fps += fmt::format(" ({} failed)", failed);
      }
      fmt::print("{:>7} {:>10.1f} {:>10.1f} {:>8.1f} {:>8.1f} {:>7} {:>6.1f} {:>8.0f} | {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} | {:>10}\n",
                 n, row["fps"].get<double>(), row["per_stream_fps"].get<double>(), row["p50_ms"].get<double>(),
                 row["p99_ms"].get<double>(), row["dropped"].get<int64_t>(), row["cpu_cores"].get<double>(),
                 row["gpu_mib"].get<double>(), nv, nv_shared, sl, sys, cpu_dec,
                 separate_fps);
      out["runs"].push_back(row);
    }
    int best_live = 0;
    out["live_media_frames"] = live_media.empty() ? live_frames : -1;
    out["live_media"] = fs::path(o.live_media).filename().string();
    if (!live.empty() && !live_media.empty())
      fmt::print("\nlive streams of {} (looped, paced in real time, {:.0f} s each):\n", o.live_media, live_seconds);
    else if (!live.empty())
      fmt::print("\nlive {}p30 streams (a {}-frame file paced in real time, {:.0f} s each{}):\n", height, live_frames, live_seconds,
                 double(live_frames) / 30 < live_seconds ? ", looping" : "");
    for (int n : parse_ints(live)) {
      json row = run_in_process(o, n, true, live_seconds);
      // Which test failed says which stage limits: drops = the engine fell behind (frames waited in the batcher
      // until the next one replaced them); under 29 fps per stream = decoding fell behind the clock (latency is
      // measured from the decoder's output, so it cannot show that); p99 = somewhere in between.
      std::vector<std::string> why;
      if (row["dropped"].get<int64_t>() > 0) why.push_back(fmt::format("{} frames dropped", row["dropped"].get<int64_t>()));
      if (row["p99_ms"].get<double>() > 100) why.push_back(fmt::format("p99 {:.1f} ms > 100", row["p99_ms"].get<double>()));
      if (row["per_stream_fps"].get<double>() < 29.0)
        why.push_back(fmt::format("{:.1f} fps per stream < 29 (slowest {:.1f})", row["per_stream_fps"].get<double>(),
                                  row["slowest_stream_fps"].get<double>()));
      if (row["all_running_s"].get<double>() < live_seconds / 2)
        why.push_back(fmt::format("all {} ran together for only {:.1f} s of {:.0f}", n, row["all_running_s"].get<double>(),
                                  live_seconds));
      if (!row["ok"].get<bool>()) why.push_back("the run did not end cleanly");
      const bool held = why.empty();
      row["held"] = held;
      row["not_held_because"] = why;
      if (held) best_live = std::max(best_live, n);
      fmt::print("  {:>3} streams: {:>7.1f} fps over the run, {:>5.1f} per stream, all running together {:.1f} s (every "
                 "stream's first frame within {:.1f} s of the start), p99 {:>6.1f} ms, {} dropped, CPU {:.1f} cores -> {}\n",
                 n, row["fps"].get<double>(), row["per_stream_fps"].get<double>(), row["all_running_s"].get<double>(),
                 row["all_started_s"].get<double>(), row["p99_ms"].get<double>(), row["dropped"].get<int64_t>(),
                 row["cpu_cores"].get<double>(),
                 held ? std::string("held") : "NOT held: " + fmt::format("{}", fmt::join(why, "; ")));
      print_utilisation(row);
      vc::bench::print_start_split(row["start"]);
      const double tuned_s = row["tuned_after_s"].get<double>();
      if (tuned_s != 0)
        fmt::print("       the tuned engine took over {}\n",
                   tuned_s < 0 ? std::string("never (untuned to the end)") : fmt::format("{:.2f} s after the run was set up", tuned_s));
      if (events) {
        json rec = run_in_process(o, n, true, live_seconds, true);
        fmt::print("       with events: {} events, {} clips ({:.0f} MiB), {} lost, p99 {:>6.1f} ms ({:+.1f}), {} dropped, CPU {:.1f} "
                   "cores ({:+.2f} for recording)\n",
                   rec["events"].get<int64_t>(), rec["event_clips"].get<int64_t>(), rec["event_clip_mib"].get<double>(),
                   rec["event_failures"].get<int64_t>(), rec["p99_ms"].get<double>(),
                   rec["p99_ms"].get<double>() - row["p99_ms"].get<double>(), rec["dropped"].get<int64_t>(),
                   rec["cpu_cores"].get<double>(), rec["cpu_cores"].get<double>() - row["cpu_cores"].get<double>());
        row["with_events"] = rec;
      }
      if (regions) {
        json rec = run_in_process(o, n, true, live_seconds, false, false, true);
        fmt::print("       with 4 regions each on 2 models ({} crops per frame period): {:.1f} fps per stream, p99 {:>6.1f} ms "
                   "({:.2f}x the whole pictures'), {} dropped, CPU {:.1f} cores -> {}\n", 4 * n,
                   rec["per_stream_fps"].get<double>(), rec["p99_ms"].get<double>(),
                   rec["p99_ms"].get<double>() / std::max(1e-9, row["p99_ms"].get<double>()), rec["dropped"].get<int64_t>(),
                   rec["cpu_cores"].get<double>(), rec["dropped"].get<int64_t>() == 0 && rec["ok"].get<bool>() ? "held" : "NOT held");
        print_utilisation(rec);
        row["with_regions"] = rec;
      }
      if (churning) {
        json rec = run_in_process(o, n, true, live_seconds, false, true);
        const auto& ch = rec["churn"];
        fmt::print("       with streams added and removed: {} added, {} removed, {} failed; first result p50 {:.0f} ms (max "
                   "{:.0f}), removal p50 {:.0f} ms (max {:.0f}); the {}: {} dropped, p99 {:>6.1f} ms, {:.1f} fps each -> {}\n",
                   ch["added"].get<int>(), ch["removed"].get<int>(), ch["failed"].get<int>(),
                   ch["first_result_p50_ms"].get<double>(), ch["first_result_max_ms"].get<double>(),
                   ch["remove_p50_ms"].get<double>(), ch["remove_max_ms"].get<double>(), n, rec["dropped"].get<int64_t>(),
                   rec["p99_ms"].get<double>(), rec["per_stream_fps"].get<double>(),
                   rec["dropped"].get<int64_t>() == 0 && ch["failed"].get<int>() == 0 && ch["ended_early"].empty()
                       ? "none lost"
                       : "FRAMES LOST");
        for (const auto& reason : ch["ended_early"]) fmt::print("       ended by itself: {}\n", reason.get<std::string>());
        if (!rec["dropped_by_stream"].empty()) fmt::print("       dropped by: {}\n", rec["dropped_by_stream"].dump());
        fmt::print("       the {}' drops while a stream was being added {}, while it ran {}, while it was removed {}; the "
                   "engine's slowest batch {:.1f} ms before the churn, {:.1f} ms during it\n", n,
                   ch["others_dropped_while"]["adding"].get<int64_t>(), ch["others_dropped_while"]["running"].get<int64_t>(),
                   ch["others_dropped_while"]["removing"].get<int64_t>(), ch["engine_batch_max_ms"]["before"].get<double>(),
                   ch["engine_batch_max_ms"]["during"].get<double>());
        row["with_churn"] = rec;
      }
      out["live"].push_back(row);
    }
    out["live_streams_held"] = best_live;
    if (shared_context) gst_context_unref(shared_context);
    if (!live.empty()) fmt::print("largest live count held in real time: {}\n", best_live);
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    // Seen on the H200 (2026-12-02): a crash in static destruction at exit, after this point, once the decode-only
    // pipelines had shared the engine's CUDA context. The results are written; leave without the teardown race.
    std::fflush(stdout);
    std::_Exit(0);
  } catch (const vc::Error& e) {
    fmt::print(stderr, "bench_pipeline: {}\n", e.what());
    return int(e.code());
  }
}
