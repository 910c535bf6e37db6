#include "pipeline/results/mqtt_sink.hpp"

#include <mosquitto.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/redact.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;

constexpr auto kDropWarningInterval = 10s;

void init_library() {
  static std::once_flag once;
  std::call_once(once, [] { mosquitto_lib_init(); });
}

std::string read_password(const config::Mqtt& m) {
  if (!m.password_file.empty()) {
    std::ifstream in(m.password_file);
    if (!in) throw ConfigError(fmt::format("mqtt.password_file: cannot read '{}'", m.password_file));
    std::string password;
    std::getline(in, password);
    return password;
  }
  const char* env = std::getenv("VC_MQTT_PASSWORD");
  return env ? env : "";
}

std::string default_client_id() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return fmt::format("video-classifier-{}-{}", host, getpid());
}

// Applies credentials and TLS to a client. Throws vc::ConfigError naming what libmosquitto refused.
void configure(mosquitto* m, const config::Mqtt& s) {
  if (!s.username.empty()) {
    const auto password = read_password(s);
    if (mosquitto_username_pw_set(m, s.username.c_str(), password.empty() ? nullptr : password.c_str()) != MOSQ_ERR_SUCCESS) {
      throw ConfigError("mqtt.username: rejected by libmosquitto");
    }
  }
  if (!s.tls_ca_file.empty()) {
    const int rc = mosquitto_tls_set(m, s.tls_ca_file.c_str(), nullptr, s.tls_cert_file.empty() ? nullptr : s.tls_cert_file.c_str(),
                                     s.tls_key_file.empty() ? nullptr : s.tls_key_file.c_str(), nullptr);
    if (rc != MOSQ_ERR_SUCCESS) {
      throw ConfigError(fmt::format("mqtt.tls_ca_file / tls_cert_file / tls_key_file: {}", mosquitto_strerror(rc)));
    }
    if (s.tls_insecure) mosquitto_tls_insecure_set(m, true);
  }
}

// Errors of mosquitto_publish that no retry can mend: the message itself is unusable.
bool permanent_refusal(int rc) {
  return rc == MOSQ_ERR_INVAL || rc == MOSQ_ERR_PAYLOAD_SIZE || rc == MOSQ_ERR_MALFORMED_UTF8 ||
         rc == MOSQ_ERR_QOS_NOT_SUPPORTED || rc == MOSQ_ERR_OVERSIZE_PACKET || rc == MOSQ_ERR_NOT_SUPPORTED;
}

}  // namespace

MqttSink::MqttSink(const config::Mqtt& s, const std::vector<std::string>& streams) : settings_(s) {
  (void)streams;
  init_library();
  client_id_ = s.client_id.empty() ? default_client_id() : s.client_id;
  mosq_ = mosquitto_new(client_id_.c_str(), true, this);
  if (!mosq_) throw UnavailableError("mqtt: cannot create a client (out of memory?)");
  try {
    configure(mosq_, s);
  } catch (...) {
    mosquitto_destroy(mosq_);
    throw;
  }
  const auto status = topic("", "status");
  if (const int rc = mosquitto_will_set(mosq_, status.c_str(), 7, "offline", 1, true); rc != MOSQ_ERR_SUCCESS) {
    mosquitto_destroy(mosq_);
    throw ConfigError(fmt::format("mqtt.topic_prefix: the broker cannot be told our last will on '{}': {}", status,
                                  mosquitto_strerror(rc)));
  }
  mosquitto_reconnect_delay_set(mosq_, 1, 30, true);
  mosquitto_connect_callback_set(mosq_, [](mosquitto*, void* self, int rc) { static_cast<MqttSink*>(self)->on_connect(rc); });
  mosquitto_disconnect_callback_set(mosq_, [](mosquitto*, void* self, int rc) { static_cast<MqttSink*>(self)->on_disconnect(rc); });
  mosquitto_publish_callback_set(mosq_, [](mosquitto*, void* self, int mid) { static_cast<MqttSink*>(self)->on_publish(mid); });
  // Connecting may fail now (broker down): the loop keeps trying with backoff, messages wait meanwhile.
  const int rc = mosquitto_connect_async(mosq_, s.host.c_str(), s.port, s.keepalive_s);
  if (rc != MOSQ_ERR_SUCCESS) {
    vc::log::get("mqtt")->warn("broker {}:{} not reachable yet ({}): results wait in a buffer of {} messages", s.host, s.port,
                               rc == MOSQ_ERR_ERRNO ? std::strerror(errno) : mosquitto_strerror(rc), s.buffer_messages);
  }
  if (mosquitto_loop_start(mosq_) != MOSQ_ERR_SUCCESS) {
    mosquitto_destroy(mosq_);
    throw UnavailableError("mqtt: cannot start the network thread");
  }
  publisher_ = std::thread([this] {
    std::unique_lock lock(wake_mutex_);
    while (!stop_) {
      wake_.wait_for(lock, 200ms);
      lock.unlock();
      flush();
      lock.lock();
    }
  });
  vc::log::get("mqtt")->info("publishing to mqtt://{}:{} under {}/ (QoS {}, client {})", s.host, s.port, s.topic_prefix,
                             s.qos, client_id_);
}

MqttSink::~MqttSink() {
  try {
    close();
  } catch (...) {
  }
  {
    std::lock_guard lock(wake_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (publisher_.joinable()) publisher_.join();
  if (mosq_) {
    mosquitto_loop_stop(mosq_, true);
    mosquitto_destroy(mosq_);
  }
}

std::string MqttSink::name() const { return fmt::format("mqtt://{}:{}", settings_.host, settings_.port); }

std::string MqttSink::topic(const std::string& stream, const char* leaf) const {
  return stream.empty() ? fmt::format("{}/{}", settings_.topic_prefix, leaf)
                        : fmt::format("{}/{}/{}", settings_.topic_prefix, stream, leaf);
}

void MqttSink::enqueue(Message m) {
  m.payload = config::redact_credentials(m.payload);  // (a reason quoting a camera's URI: never its password)
  {
    std::lock_guard lock(mutex_);
    if (waiting_.size() + in_flight_.size() >= size_t(settings_.buffer_messages)) {
      // Full (the broker is away or slow): the oldest waiting message goes, counted; the video never waits. Said as
      // it happens, at most every kDropWarningInterval, not only at the end.
      if (!waiting_.empty()) waiting_.pop_front();
      const int64_t dropped = ++dropped_;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_drop_warning_ >= kDropWarningInterval) {
        last_drop_warning_ = now;
        vc::log::get("mqtt")->warn("{} is {}: its buffer of {} messages is full, {} message(s) dropped so far", name(),
                                   connected_ ? "too slow" : "away", settings_.buffer_messages, dropped);
      }
      if (waiting_.empty()) return;
    }
    waiting_.push_back(std::move(m));
  }
  wake();
}

void MqttSink::wake() {
  std::lock_guard lock(wake_mutex_);
  wake_.notify_one();
}

void MqttSink::flush() {
  while (connected_) {
    Message m;
    {
      std::lock_guard lock(mutex_);
      if (waiting_.empty()) return;
      m = std::move(waiting_.front());
      waiting_.pop_front();
    }
    int mid = 0;
    const int rc = mosquitto_publish(mosq_, &mid, m.topic.c_str(), int(m.payload.size()), m.payload.data(), m.qos, m.retain);
    std::lock_guard lock(mutex_);
    if (rc != MOSQ_ERR_SUCCESS) {
      if (permanent_refusal(rc)) {
        // The broker would never take it (a topic or payload it cannot carry): sending it again would only hold up
        // everything behind it. Dropped, counted and said.
        ++dropped_;
        if (refusals_++ < 3) {
          vc::log::get("mqtt")->error("message to '{}' refused, dropped: {}{}", m.topic, mosquitto_strerror(rc),
                                      refusals_ == 3 ? " (further refusals are only counted)" : "");
        }
        continue;
      }
      if (send_failures_++ == 0) {
        vc::log::get("mqtt")->warn("publishing to {} failed ({}): messages wait for the connection", name(),
                                   rc == MOSQ_ERR_ERRNO ? std::strerror(errno) : mosquitto_strerror(rc));
      }
      waiting_.push_front(std::move(m));  // not sent: it waits for the next connection
      return;
    }
    send_failures_ = 0;
    // libmosquitto calls on_publish for QoS 0 messages too (once written) and may do so before publish() returns
    // the id: an id seen there first is an early acknowledgement of this very message, whatever its QoS.
    const bool acknowledged = early_acks_.erase(mid) > 0;
    if (m.qos == 0) {
      ++acked_;
      if (!acknowledged) sent_qos0_.insert(mid);  // its on_publish is still to come: not an ack of a later message
    } else if (acknowledged) {
      ++acked_;
    } else {
      in_flight_[mid] = std::move(m);
    }
  }
}

void MqttSink::on_connect(int rc) {
  if (rc != 0) {
    vc::log::get("mqtt")->warn("broker refused the connection: {}", mosquitto_connack_string(rc));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    // What was in flight when the last connection dropped is sent again, first (QoS 1: at least once).
    for (auto it = in_flight_.rbegin(); it != in_flight_.rend(); ++it) waiting_.push_front(std::move(it->second));
    in_flight_.clear();
    early_acks_.clear();
    sent_qos0_.clear();
    waiting_.push_front({topic("", "status"), "online", 1, true});
  }
  if (connects_++ > 0) vc::log::get("mqtt")->info("reconnected to {}", name());
  connected_ = true;
  wake();
}

void MqttSink::on_disconnect(int rc) {
  connected_ = false;
  if (rc != 0 && !closed_) vc::log::get("mqtt")->warn("lost the broker ({}): reconnecting with backoff", mosquitto_strerror(rc));
}

void MqttSink::on_publish(int mid) {
  std::lock_guard lock(mutex_);
  if (in_flight_.erase(mid)) {
    ++acked_;
  } else if (!sent_qos0_.erase(mid)) {
    early_acks_.insert(mid);  // publish() has not returned this id yet
  }
}

void MqttSink::frame(const FrameResult& r) {
  if (closed_) return;
  if (settings_.result_interval_s > 0) {
    const auto now = std::chrono::steady_clock::now();
    auto& last = last_result_[{r.stream, r.region}];
    if (last != std::chrono::steady_clock::time_point{} &&
        now - last < std::chrono::duration<double>(settings_.result_interval_s)) {
      return;  // rate-limited by design, not a loss
    }
    last = now;
  }
  // A region's under its own topic: PREFIX/STREAM/REGION/result.
  enqueue({topic(r.region.empty() ? r.stream_name : r.stream_name + "/" + r.region, "result"), to_json(r, false),
           settings_.qos, false});
}

void MqttSink::event(const StreamEvent& e) {
  if (closed_) return;
  enqueue({topic(e.stream_name, "event"), to_json(e), settings_.qos, false});
  if (e.kind == StreamEvent::Kind::LabelChange && !e.region.empty()) {  // a region's state: PREFIX/STREAM/REGION/state
    const nlohmann::json state = {{"stream", e.stream_name}, {"region", e.region}, {"label", e.to}};
    enqueue({topic(e.stream_name + "/" + e.region, "state"),
             state.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 1, true});
    return;
  }
  nlohmann::json state = {{"stream", e.stream_name}, {"source", e.source}};
  switch (e.kind) {
    case StreamEvent::Kind::LabelChange:
      state["state"] = "running";
      state["label"] = e.to;
      break;
    case StreamEvent::Kind::StreamUp: state["state"] = "running"; break;
    case StreamEvent::Kind::StreamDown:
      state["state"] = "down";
      state["reason"] = e.reason;
      break;
    case StreamEvent::Kind::StreamEnd:
      state["state"] = "ended";
      state["reason"] = e.reason;
      break;
    case StreamEvent::Kind::Rule: return;  // the stream's state is unchanged: the event went to PREFIX/STREAM/event
  }
  enqueue({topic(e.stream_name, "state"), state.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 1, true});
}

void MqttSink::close() {
  if (closed_.exchange(true)) return;
  {
    std::lock_guard lock(mutex_);
    waiting_.push_back({topic("", "status"), "offline", 1, true});
  }
  // Give the broker a moment to take what is pending; what it has not acknowledged by then is counted as dropped.
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until) {
    flush();
    {
      std::lock_guard lock(mutex_);
      if (waiting_.empty() && in_flight_.empty()) break;
    }
    std::this_thread::sleep_for(20ms);
  }
  {
    std::lock_guard lock(mutex_);
    const auto lost = int64_t(waiting_.size() + in_flight_.size());
    if (lost > 0) {
      dropped_ += lost;
      vc::log::get("mqtt")->warn("{} message(s) not delivered to {} before shutdown", lost, name());
    }
  }
  mosquitto_disconnect(mosq_);
}

bool MqttSink::probe(const config::Mqtt& s, std::chrono::milliseconds timeout, std::string& error) {
  init_library();
  mosquitto* m = mosquitto_new(nullptr, true, nullptr);
  if (!m) {
    error = "cannot create a client";
    return false;
  }
  bool ok = false;
  try {
    configure(m, s);
    static std::atomic<int> result;
    result = -1;
    mosquitto_connect_callback_set(m, [](mosquitto*, void*, int rc) { result = rc; });
    int rc = mosquitto_connect_async(m, s.host.c_str(), s.port, 5);
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (rc == MOSQ_ERR_SUCCESS && result < 0 && std::chrono::steady_clock::now() < until) rc = mosquitto_loop(m, 50, 1);
    ok = result == 0;
    error = ok ? "" : result > 0 ? mosquitto_connack_string(result)
                     : rc == MOSQ_ERR_ERRNO ? std::strerror(errno) : rc != MOSQ_ERR_SUCCESS ? mosquitto_strerror(rc) : "no answer";
    if (ok) mosquitto_disconnect(m);
  } catch (const Error& e) {
    error = e.what();
  }
  mosquitto_destroy(m);
  return ok;
}

}  // namespace vc::pipeline
