// Shared by the service's tests: the app as a service in the background (a config file, curl against its HTTP
// server, signals), and a mosquitto broker on loopback with a subscriber that records every message.
#pragma once
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "pipeline_helpers.hpp"

namespace vc::test {

using json = nlohmann::json;

constexpr const char* kToken = "test-token-0123";

struct Reply {
  int status = 0;
  std::string body;
  [[nodiscard]] json parsed() const { return json::parse(body, nullptr, false); }
};

// The app as a service in the background: started with a config file, waited for (/readyz), stopped with SIGINT.
class Service {
 public:
  explicit Service(const std::string& name) : dir_(path("api-" + name)), port_(free_port(43000)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/media");
    std::ofstream(dir_ + "/token") << kToken << "\n";
  }
  ~Service() {
    if (running_) (void)stop();
  }
  const std::string& dir() const { return dir_; }
  std::string url(const std::string& p) const { return "http://127.0.0.1:" + port_ + p; }

  // `yaml`: the config's own sections; the api and metrics sections are added.
  void write_config(const std::string& yaml, const std::string& api_extra = "", bool token = true) const {
    std::ofstream(dir_ + "/service.yaml") << "api:\n  enabled: true\n" << (token ? "  token_file: token\n" : "")
                                          << "  allowed_dirs: [media]\n  state_file: state.yaml\n" << api_extra
                                          << "metrics:\n  port: " << port_ << "\n" << yaml;
  }
  void start(const std::string& args = "--set logging.level=info") {
    const auto r = run_command("(" + app_direct("--config '" + dir_ + "/service.yaml' " + args) + " >>'" + dir_ +
                               "/app.log' 2>&1; echo $? >'" + dir_ + "/rc') & echo $! >'" + dir_ + "/pid'");
    REQUIRE(r.code == 0);
    fs::remove(dir_ + "/rc");
    running_ = true;
    // Ready: the engine is built and the configured streams started.
    for (int i = 0; i < 600 && get("/readyz").status != 200; ++i) {
      REQUIRE_MESSAGE(!fs::exists(dir_ + "/rc"), log());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    REQUIRE_MESSAGE(get("/readyz").status == 200, log());
  }
  // The app's process id (the subshell's child).
  std::string pid() const { return "$(pgrep -P $(cat '" + dir_ + "/pid'))"; }
  void signal(const std::string& sig) const { REQUIRE(run_command("kill -" + sig + " " + pid()).code == 0); }
  int stop() {
    running_ = false;
    (void)run_command("kill -INT " + pid());
    for (int i = 0; i < 600 && !fs::exists(dir_ + "/rc"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(dir_ + "/rc");
    int rc = -1;
    in >> rc;
    return rc;
  }
  std::string log() const {
    std::ifstream in(dir_ + "/app.log");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  Reply request(const std::string& method, const std::string& p, const std::string& body = "", const std::string& token = kToken,
                const std::string& extra = "") const {
    const auto body_file = dir_ + "/body.out";
    std::string cmd = "curl -s -o '" + body_file + "' -w '%{http_code}' -X " + method + " " + extra + " ";
    if (!token.empty()) cmd += "-H 'Authorization: Bearer " + token + "' ";
    if (!body.empty()) {
      std::ofstream(dir_ + "/body.in") << body;
      cmd += "-H 'Content-Type: application/json' --data-binary @'" + dir_ + "/body.in' ";
    }
    const auto r = run_command(cmd + "'" + url(p) + "'");
    Reply out;
    out.status = std::atoi(r.output.c_str());
    std::ifstream in(body_file);
    out.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return out;
  }
  Reply get(const std::string& p, const std::string& token = "") const { return request("GET", p, "", token); }
  Reply add(const json& input, const std::string& token = kToken) const {
    return request("POST", "/api/v1/streams", input.dump(), token);
  }
  Reply remove(const std::string& name, const std::string& token = kToken) const {
    return request("DELETE", "/api/v1/streams/" + name, "", token);
  }
  json stream(const std::string& name) const { return get("/api/v1/streams/" + name).parsed(); }
  int64_t frames(const std::string& name) const {
    const auto s = stream(name);
    return s.is_object() && s.contains("frames") ? s["frames"].get<int64_t>() : -1;
  }
  // "a,b": the streams the service shows, in order.
  std::string names() const {
    std::string out;
    const auto list = get("/api/v1/streams", kToken).parsed();  // (kept: a range over a temporary's member dangles)
    for (const auto& s : list["streams"]) {
      if (!out.empty()) out += ',';
      out += s["name"].get<std::string>();
    }
    return out;
  }
  // Waits (up to 60 s) until `stream` has classified more than `than` frames; returns its count.
  int64_t wait_frames(const std::string& name, int64_t than) const {
    int64_t n = -1;
    for (int i = 0; i < 600 && (n = frames(name)) <= than; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return n;
  }
  std::string file(const std::string& name) const {
    std::ifstream in(dir_ + "/" + name);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  std::string dir_, port_;
  bool running_ = false;
};

inline json last_line(const std::string& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return json::parse(last, nullptr, false);
}

// A mosquitto broker on 127.0.0.1 (with persistence, so that a restart keeps a persistent subscriber's session).
struct Broker {
  std::string port = vc::test::free_port(41000);
  std::string dir = path("broker-" + port);
  std::string conf() const { return dir + "/mosquitto.conf"; }
  std::string pid() const { return "$(cat '" + dir + "/broker.pid')"; }
  Broker() {
    fs::create_directories(dir);
    std::ofstream(conf()) << "listener " << port << " 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location "
                          << dir << "/\nautosave_interval 1\n";
  }
  std::string start() const { return "mosquitto -c '" + conf() + "' >>'" + dir + "/broker.log' 2>&1 & echo $! >'" + dir + "/broker.pid'; sleep 0.5"; }
  // A subscriber with a persistent session (-c, fixed id) that prints every message as "topic payload".
  std::string subscribe(const std::string& file) const {
    return "mosquitto_sub -h 127.0.0.1 -p " + port + " -t 'vc/#' -v -q 1 -c -i sub-" + port + " >'" + file + "' 2>&1 & echo $! >'" +
           dir + "/sub.pid'; sleep 0.5";
  }
  std::string stop_subscriber() const { return "kill $(cat '" + dir + "/sub.pid')"; }
};

struct Message {
  std::string topic;
  nlohmann::json payload;
};

inline std::vector<Message> read_messages(const std::string& file) {
  std::vector<Message> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    Message m{line.substr(0, space), {}};
    m.payload = nlohmann::json::parse(line.substr(space + 1), nullptr, false);
    if (m.payload.is_discarded()) m.payload = line.substr(space + 1);
    out.push_back(m);
  }
  return out;
}

}  // namespace vc::test
