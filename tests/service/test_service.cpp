// The run as a service: MQTT results and events against a real mosquitto broker on loopback (delivery, ordering
// per stream, QoS 1 across a broker restart, an absent broker that leaves the video unaffected and is counted),
// and /metrics, /healthz, /readyz scraped with curl, the text parsed by prometheus_client's own parser.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "service/service_helpers.hpp"
#include "service/metrics.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("service");

namespace {

std::string free_port() { return vc::test::free_port(41000); }

std::string mqtt_args(const Broker& b) {
  return "--set mqtt.enabled=true --set mqtt.host=127.0.0.1 --set mqtt.port=" + b.port +
         " --set mqtt.topic_prefix=vc --set mqtt.result_interval_s=0 --set mqtt.qos=1 ";
}

}  // namespace

TEST_CASE("MQTT: every result and event reaches a subscriber, in order per stream, with state and status") {
  Broker b;
  const auto got = path("mqtt-" + b.port + ".txt");
  const auto r = run_command(b.start() + "; " + b.subscribe(got) + "; " +
                             app(mqtt_args(b) + "--input test --input test:ball --set input.fps=30 --set input.max_frames=30 --output none") +
                             "; rc=$?; sleep 1; " + b.stop_subscriber() + "; kill " + b.pid() + "; exit $rc");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  std::map<std::string, std::vector<int64_t>> frames;
  std::set<std::string> topics;
  std::vector<std::string> status;
  for (const auto& m : read_messages(got)) {
    topics.insert(m.topic);
    if (m.topic == "vc/status") status.push_back(m.payload.is_string() ? m.payload.get<std::string>() : m.payload.dump());
    if (m.topic.size() > 7 && m.topic.substr(m.topic.size() - 7) == "/result") frames[m.payload["stream"]].push_back(m.payload["frame"]);
  }
  for (const char* s : {"stream0", "stream1"}) {
    CAPTURE(s);
    const auto& f = frames[s];
    CHECK(f.size() == 30);
    CHECK(std::is_sorted(f.begin(), f.end()));  // in order per stream
    CHECK(topics.count(std::string("vc/") + s + "/event"));
    CHECK(topics.count(std::string("vc/") + s + "/state"));
  }
  REQUIRE(!status.empty());
  CHECK(status.front() == "online");
  CHECK(status.back() == "offline");
}

TEST_CASE("MQTT QoS 0: every result is delivered and counted once, none taken for another's acknowledgement") {
  Broker b;
  const auto got = path("mqtt-qos0-" + b.port + ".txt");
  const auto r = run_command(b.start() + "; " + b.subscribe(got) + "; " +
                             app(mqtt_args(b) + "--set mqtt.qos=0 --input test --set input.fps=60 --set input.max_frames=200 "
                                 "--output none") +
                             "; rc=$?; sleep 1; " + b.stop_subscriber() + "; kill " + b.pid() + "; exit $rc");
  REQUIRE_MESSAGE(r.code == 0, r.output);  // nothing dropped, nothing left unacknowledged
  std::set<int64_t> frames;
  for (const auto& m : read_messages(got)) {
    if (m.topic == "vc/stream0/result") frames.insert(m.payload["frame"].get<int64_t>());
  }
  CHECK(frames.size() == 200);
}

TEST_CASE("MQTT: a topic prefix no message can be published to is refused before anything runs (78)") {
  for (const char* prefix : {"vc/+", "a#", "''"}) {
    CAPTURE(prefix);
    const auto r = run_command(app(std::string("--set mqtt.enabled=true --set mqtt.topic_prefix=") + prefix +
                                   " --input test --set input.max_frames=5 --output none"));
    CHECK(r.code == 78);
    CHECK(r.output.find("mqtt.topic_prefix") != std::string::npos);
  }
}

TEST_CASE("MQTT QoS 1: results published while the broker restarts are delivered after it is back") {
  Broker b;
  const auto got = path("mqtt-restart-" + b.port + ".txt"), jsonl = path("mqtt-restart-" + b.port + ".jsonl");
  // 6 s of a 20 fps stream; the broker goes away at 2 s for 2 s (SIGTERM: it saves the subscriber's session).
  const auto r = run_command(b.start() + "; " + b.subscribe(got) + "; (" +
                             app(mqtt_args(b) + "--input test --set input.fps=20 --set input.max_frames=120 --output none "
                                 "--set output.results='" + jsonl + "'") +
                             ") & a=$!; sleep 2; kill " + b.pid() + "; sleep 2; " + b.start() + "; wait $a; rc=$?; sleep 3; " +
                             b.stop_subscriber() + "; kill " + b.pid() + "; exit $rc");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  std::set<int64_t> delivered;
  for (const auto& m : read_messages(got)) {
    if (m.topic == "vc/stream0/result") delivered.insert(m.payload["frame"].get<int64_t>());
  }
  std::set<int64_t> classified;
  for (const auto& j : read_jsonl(jsonl)) {
    if (j.contains("top")) classified.insert(j["frame"].get<int64_t>());
  }
  CHECK(classified.size() == 120);
  CHECK(delivered == classified);  // at least once: every result, none missing
}

TEST_CASE("MQTT: with no broker the video runs at full rate, and every message it could not keep is counted") {
  Broker b;  // never started
  const auto started = std::chrono::steady_clock::now();
  // input.drop=block: a busy machine's slow engine never drops a frame of the pattern (drops would say nothing of MQTT).
  const auto r = run_command(app(mqtt_args(b) + "--set mqtt.buffer_messages=20 --input test --set input.fps=60 --set input.max_frames=120 "
                                 "--set input.drop=block --output none --log-level info"));
  const double seconds = seconds_since(started);
  CHECK(r.code == 74);  // results were lost: never exit 0
  CHECK(std::regex_search(r.output, std::regex(R"(mqtt://127\.0\.0\.1:\d+: \d+ message\(s\) dropped)")));
  CHECK(std::regex_search(r.output, std::regex(R"(stream0\s+120\s+0\s)")));  // every frame classified, none dropped
  CHECK(seconds < 10);  // 120 frames at 60 fps: ~2 s plus start-up; a blocked video would take far longer
}

TEST_CASE("/metrics, /healthz and /readyz: real HTTP, values that move, text that Prometheus parses") {
  const auto port = free_port();
  const auto python = fs::path(source_dir()) / "build" / "test-venv" / "bin" / "python";
  REQUIRE_MESSAGE(fs::exists(python), "no test venv with prometheus_client: scripts/test.sh makes build/test-venv");
  const auto m1 = path("metrics1-" + port + ".txt"), m2 = path("metrics2-" + port + ".txt");
  const std::string base = "http://127.0.0.1:" + port;
  const auto r = run_command("(" + app("--input test --set input.fps=30 --set input.max_frames=150 --output none "
                                       "--set metrics.enabled=true --set metrics.port=" + port) +
                             ") & a=$!; sleep 2; curl -sf " + base + "/metrics >'" + m1 + "' && sleep 1 && curl -sf " + base +
                             "/metrics >'" + m2 + "' && curl -sf " + base + "/healthz && curl -sf " + base +
                             "/readyz && curl -sf " + base + "/; rc=$?; wait $a; exit $rc");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("\"status\":\"ok\"") != std::string::npos);
  CHECK(r.output.find("ready") != std::string::npos);
  CHECK(r.output.find("/metrics   Prometheus metrics") != std::string::npos);  // GET / says what there is
  CHECK(slurp(m2).find("vc_stream_received_total{stream=\"stream0\"}") != std::string::npos);
  const auto value = [](const std::string& text, const std::string& sample) {
    std::smatch m;
    const std::regex re(std::regex_replace(sample, std::regex(R"([{}\"\.])"), "\\$&") + R"( ([0-9.e+-]+))");
    return std::regex_search(text, m, re) ? std::stod(m[1]) : -1.0;
  };
  const auto a = slurp(m1), b2 = slurp(m2);
  const double f1 = value(a, "vc_stream_frames_total{stream=\"stream0\"}"), f2 = value(b2, "vc_stream_frames_total{stream=\"stream0\"}");
  CHECK(f1 > 0);
  CHECK(f2 > f1);  // the counters move with the run
  CHECK(value(b2, "vc_stream_latency_seconds_count{stream=\"stream0\"}") == doctest::Approx(f2));
  CHECK(value(b2, "vc_ready") == 1);
  CHECK(value(b2, "vc_model_tuned{model=\"default\"}") == 1);  // (the CPU engine: tuned from the start)
  CHECK(value(b2, "vc_model_tuned_after_seconds{model=\"default\"}") == 0);
  CHECK(b2.find("vc_batch_size_bucket") != std::string::npos);
  // Prometheus' own parser (prometheus_client) reads every family.
  const auto parse = run_command("'" + python.string() + "' -c \"import sys; from prometheus_client.parser import "
                                 "text_string_to_metric_families as p; fams = list(p(open(sys.argv[1]).read())); "
                                 "print(len(fams), 'families')\" '" + m2 + "'");
  CHECK_MESSAGE(parse.code == 0, parse.output);
  CHECK(parse.output.find(" families") != std::string::npos);
}

TEST_CASE("/healthz turns unhealthy (503) when a running stream stalls") {
  const auto port = free_port(), rtsp_port = free_port();
  const std::string base = "http://127.0.0.1:" + port;
  const auto pidfile = path("stall-server-" + rtsp_port + ".pid");
  const auto r = run_command(
      app_direct("--input test --set input.fps=15 --set input.width=160 --set input.height=120 --output rtsp://127.0.0.1:" + rtsp_port + "/x") +
      " >/dev/null 2>&1 & echo $! >'" + pidfile + "'; sleep 2; (" +
      app("--input rtsp://127.0.0.1:" + rtsp_port + "/x --output none --set metrics.enabled=true --set metrics.port=" + port +
          " --set metrics.stall_s=2 --set input.stall_timeout_s=30") +
      ") & a=$!; sleep 4; echo \"before=$(curl -s -o /dev/null -w '%{http_code}' " + base + "/healthz)\"; kill -STOP $(cat '" +
      pidfile + "'); sleep 4; echo \"after=$(curl -s -o /dev/null -w '%{http_code}' " + base + "/healthz)\"; kill -INT $a; "
      "kill -CONT $(cat '" + pidfile + "'); kill -INT $(cat '" + pidfile + "'); wait $a");
  CHECK(r.output.find("before=200") != std::string::npos);
  CHECK(r.output.find("after=503") != std::string::npos);
}

namespace {

// A run as the service sees it, with one stream that has not started.
struct IdleRun final : pipeline::RunControl {
  std::shared_ptr<pipeline::StreamStats> stream = std::make_shared<pipeline::StreamStats>();
  pipeline::EngineStats stats;
  std::vector<std::shared_ptr<const pipeline::StreamStats>> streams() const override { return {stream}; }
  const pipeline::EngineStats& engine() const override { return stats; }
  std::vector<pipeline::SinkStatus> sinks() const override { return {}; }
  const pipeline::EventStats* events() const override { return nullptr; }
  std::string engine_name() const override { return "CPU reference"; }
  int cuda_device() const override { return -1; }
  // (steering is tested against a real run: tests/service/test_api.cpp)
  config::Config cfg;
  const config::Config& config() const override { return cfg; }
  std::vector<config::Input> inputs() const override { return {}; }
  void add_stream(const config::Input&, std::shared_ptr<const pipeline::OpenedInput>) override {
    throw pipeline::RequestError(503, "idle");
  }
  bool remove_stream(const std::string&, std::chrono::milliseconds) override { throw pipeline::RequestError(404, "idle"); }
  std::optional<pipeline::Snapshot> snapshot(const std::string&, int, std::chrono::milliseconds, bool,
                                             const config::PixelBox*) override {
    return {};
  }
  std::vector<pipeline::RecentEvent> recent_events(const std::string&, const std::string&, uint64_t, size_t) const override {
    return {};
  }
  pipeline::RecentEvent last_event(const std::string&) const override { return {}; }
};

}  // namespace

TEST_CASE("the metrics text for a stream that has not started is valid and empty of samples' surprises") {
  IdleRun src;
  src.stream->name = "cam";
  const auto text = service::render_metrics(src);
  CHECK(text.find("vc_stream_frames_total{stream=\"cam\"} 0") != std::string::npos);
  CHECK(text.find("vc_stream_last_frame_age_seconds{stream=\"cam\"} -1") != std::string::npos);
  CHECK(text.find("vc_ready 0") != std::string::npos);
  const auto [ok, body] = service::render_health(src, 5, pipeline::Clock::now());
  CHECK(ok);  // no frame yet, but within stall_s of the start
  CHECK(body.find("\"stream\":\"cam\"") != std::string::npos);
}

TEST_CASE("/healthz: frames that arrive with no result for stall_s (a stuck engine or output) are unhealthy") {
  IdleRun run;
  run.stream->name = "cam";
  run.stream->state = pipeline::StreamState::Running;
  const auto now = pipeline::Clock::now();
  run.stream->first_frame_ns = pipeline::steady_ns(now - std::chrono::seconds(60));
  run.stream->last_frame_ns = pipeline::steady_ns(now);  // the source is fine…
  run.stream->last_result_ns = pipeline::steady_ns(now - std::chrono::seconds(20));  // …but results stopped
  auto [ok, body] = service::render_health(run, 5, now - std::chrono::seconds(60));
  CHECK(!ok);
  CHECK(body.find("no result") != std::string::npos);
  run.stream->last_result_ns = pipeline::steady_ns(now);  // results flow again
  std::tie(ok, body) = service::render_health(run, 5, now - std::chrono::seconds(60));
  CHECK(ok);
  // Before the first result: counted from the first frame.
  run.stream->last_result_ns = 0;
  std::tie(ok, body) = service::render_health(run, 5, now - std::chrono::seconds(60));
  CHECK(!ok);
}

TEST_SUITE_END();
