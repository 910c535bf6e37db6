#include "pipeline/metrics_server.hpp"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/version.hpp"
#include "inference/cuda/gpu_info.hpp"

namespace vc::pipeline {
namespace {

// Label values are quoted; backslash, quote and newline escaped (Prometheus text format).
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Text {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, const std::string& labels, double value) {
    out_ += labels.empty() ? fmt::format("{} {}\n", name, value) : fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
  // A histogram in seconds from a latency histogram in milliseconds.
  void histogram(const char* name, const std::string& labels, const LatencyHistogram& h, const std::vector<double>& bounds_ms) {
    const std::string sep = labels.empty() ? "" : ",";
    for (double b : bounds_ms) sample(fmt::format("{}_bucket", name), fmt::format("{}{}le=\"{}\"", labels, sep, b / 1000), double(h.count_at_most(b)));
    sample(fmt::format("{}_bucket", name), fmt::format("{}{}le=\"+Inf\"", labels, sep), double(h.count()));
    sample(fmt::format("{}_sum", name), labels, h.sum_ms() / 1000);
    sample(fmt::format("{}_count", name), labels, double(h.count()));
  }
  std::string str() && { return std::move(out_); }

 private:
  std::string out_;
};

const std::vector<double> kLatencyBoundsMs = {1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000};

double age_seconds(int64_t steady) {
  return steady > 0 ? std::chrono::duration<double>(Clock::now() - from_steady_ns(steady)).count() : -1;
}

}  // namespace

std::string render_metrics(const MetricsSources& src) {
  Text t;
  t.family("vc_info", "gauge", "video-classifier build and engine");
  t.sample("vc_info", fmt::format("version=\"{}\",revision=\"{}\",engine=\"{}\"", kVersion, kGitRevision, label(src.engine_name)), 1);

  const auto per_stream = [&](const char* name, const char* type, const char* help, auto value) {
    t.family(name, type, help);
    for (const auto* s : src.streams) t.sample(name, fmt::format("stream=\"{}\"", label(s->name)), double(value(*s)));
  };
  per_stream("vc_stream_frames_total", "counter", "frames classified", [](const StreamStats& s) { return s.classified.load(); });
  per_stream("vc_stream_delivered_total", "counter", "frames the source delivered", [](const StreamStats& s) { return s.delivered.load(); });
  t.family("vc_stream_dropped_total", "counter", "frames dropped: stale before inference (queue) or not drawn (output)");
  for (const auto* s : src.streams) {
    t.sample("vc_stream_dropped_total", fmt::format("stream=\"{}\",stage=\"queue\"", label(s->name)), double(s->queue_dropped.load()));
    t.sample("vc_stream_dropped_total", fmt::format("stream=\"{}\",stage=\"output\"", label(s->name)), double(s->output_dropped.load()));
  }
  per_stream("vc_stream_fps", "gauge", "frames classified per second over the last seconds",
             [](const StreamStats& s) { return s.rate.per_second(Clock::now()); });
  per_stream("vc_stream_reconnects_total", "counter", "source restarts after a failure or stall",
             [](const StreamStats& s) { return s.reconnects.load(); });
  per_stream("vc_stream_non_finite_total", "counter", "frames whose logits held NaN/Inf", [](const StreamStats& s) { return s.non_finite.load(); });
  per_stream("vc_stream_up", "gauge", "1 while the stream runs, 0 while it reconnects, has ended or failed",
             [](const StreamStats& s) { return s.state == StreamState::Running ? 1 : 0; });
  per_stream("vc_stream_last_frame_age_seconds", "gauge", "seconds since the stream's last frame (-1: none yet)",
             [](const StreamStats& s) { return age_seconds(s.last_frame_ns); });
  t.family("vc_stream_decoder_info", "gauge", "the decoder a stream uses; gpu_frames: frames stay in GPU memory");
  for (const auto* s : src.streams) {
    t.sample("vc_stream_decoder_info", fmt::format("stream=\"{}\",decoder=\"{}\",gpu_frames=\"{}\"", label(s->name),
                                                   label(s->decoder_name()), s->gpu_frames ? "true" : "false"), 1);
  }
  t.family("vc_stream_latency_seconds", "histogram", "capture to result written");
  for (const auto* s : src.streams) t.histogram("vc_stream_latency_seconds", fmt::format("stream=\"{}\"", label(s->name)), s->latency, kLatencyBoundsMs);
  t.family("vc_stream_stage_seconds_total", "counter", "time frames spent in each stage, summed");
  for (const auto* s : src.streams) {
    for (const auto& [stage, h] : {std::pair<const char*, const LatencyHistogram*>{"queue", &s->queue_wait}, {"inference", &s->inference},
                                   {"post", &s->post}, {"output", &s->output}}) {
      t.sample("vc_stream_stage_seconds_total", fmt::format("stream=\"{}\",stage=\"{}\"", label(s->name), stage), h->sum_ms() / 1000);
    }
  }
  if (src.engine) {
    const auto& e = *src.engine;
    t.family("vc_batches_total", "counter", "inference batches");
    t.sample("vc_batches_total", "", double(e.batches.load()));
    t.family("vc_batch_size", "histogram", "frames per inference batch");
    int64_t cumulative = 0;
    for (int b = 0; b < EngineStats::kSizeBuckets; ++b) {
      cumulative += e.batch_sizes[size_t(b)];
      t.sample("vc_batch_size_bucket", fmt::format("le=\"{}\"", 1 << b), double(cumulative));
    }
    t.sample("vc_batch_size_bucket", "le=\"+Inf\"", double(e.batches.load()));
    t.sample("vc_batch_size_sum", "", double(e.frames.load()));
    t.sample("vc_batch_size_count", "", double(e.batches.load()));
    t.family("vc_engine_batch_seconds", "histogram", "a batch from submission to logits (preprocess + inference, two in flight)");
    t.histogram("vc_engine_batch_seconds", "", e.batch_ms, kLatencyBoundsMs);
    t.family("vc_ready", "gauge", "1 once the engine is built and every stream started");
    t.sample("vc_ready", "", e.ready ? 1 : 0);
  }
  size_t used = 0, total = 0;
  if (src.cuda_device >= 0 && inference::gpu_memory(src.cuda_device, used, total)) {
    t.family("vc_gpu_memory_used_bytes", "gauge", "GPU memory in use (all processes)");
    t.sample("vc_gpu_memory_used_bytes", fmt::format("gpu=\"{}\"", src.cuda_device), double(used));
    t.family("vc_gpu_memory_total_bytes", "gauge", "GPU memory");
    t.sample("vc_gpu_memory_total_bytes", fmt::format("gpu=\"{}\"", src.cuda_device), double(total));
  }
  if (src.sinks) {
    const auto sinks = src.sinks();
    t.family("vc_sink_dropped_total", "counter", "messages a result sink could not deliver");
    for (const auto& s : sinks) t.sample("vc_sink_dropped_total", fmt::format("sink=\"{}\"", label(s.name)), double(s.dropped));
    t.family("vc_sink_connected", "gauge", "1 while a result sink can deliver (an MQTT broker connection is up)");
    for (const auto& s : sinks) t.sample("vc_sink_connected", fmt::format("sink=\"{}\"", label(s.name)), s.healthy ? 1 : 0);
  }
  return std::move(t).str();
}

std::pair<bool, std::string> render_health(const MetricsSources& src, double stall_s, Clock::time_point started) {
  bool healthy = true;
  nlohmann::json streams = nlohmann::json::array();
  const double since_start = std::chrono::duration<double>(Clock::now() - started).count();
  for (const auto* s : src.streams) {
    const auto state = s->state.load();
    const double age = age_seconds(s->last_frame_ns);
    bool ok = true;
    if (state == StreamState::Failed) ok = false;
    if (state == StreamState::Running || state == StreamState::Reconnecting) {
      ok = age >= 0 ? age <= stall_s : since_start <= stall_s;  // no frame yet: allowed for stall_s after the start
    }
    healthy &= ok;
    streams.push_back({{"stream", s->name}, {"state", name(state)}, {"last_frame_age_s", age}, {"ok", ok}});
  }
  nlohmann::json body = {{"status", healthy ? "ok" : "unhealthy"}, {"stall_s", stall_s}, {"streams", streams}};
  return {healthy, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
}

MetricsServer::MetricsServer(const config::Metrics& settings, MetricsSources sources)
    : settings_(settings), sources_(std::move(sources)), server_(std::make_unique<httplib::Server>()) {
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(sources_), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    const auto [ok, body] = render_health(sources_, settings_.stall_s, started_);
    res.status = ok ? 200 : 503;
    res.set_content(body, "application/json");
  });
  server_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = sources_.engine && sources_.engine->ready;
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "starting\n", "text/plain");
  });
  if (!server_->bind_to_port(settings_.address.c_str(), settings_.port)) {
    throw UnavailableError(fmt::format("metrics: cannot listen on {}:{} (port in use, or not an address of this host?)",
                                       settings_.address, settings_.port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  vc::log::get("pipeline")->info("metrics and health: {}/metrics, /healthz, /readyz", url());
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string MetricsServer::url() const { return fmt::format("http://{}:{}", settings_.address, settings_.port); }

bool MetricsServer::port_free(const std::string& address, int port, std::string& error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return false;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    error = "not an IPv4 address";
    return false;
  }
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (!ok) error = std::strerror(errno);
  ::close(fd);
  return ok;
}

}  // namespace vc::pipeline
