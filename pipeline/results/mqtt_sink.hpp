// Results and events to an MQTT broker (libmosquitto), for the systems that act on them:
//   PREFIX/STREAM/result   a frame's result (every frame, or at most every mqtt.result_interval_s per stream)
//   PREFIX/STREAM/event    label changes, stream_down / stream_up / stream_end
//   PREFIX/STREAM/state    retained: the stream's current state and label
//   PREFIX/status          retained "online"; the broker publishes "offline" (our last will) if we vanish
// Never blocks the video: messages wait in a bounded buffer while the broker is away (the oldest are dropped beyond
// mqtt.buffer_messages, and counted); libmosquitto reconnects with exponential backoff; QoS 1 messages stay until
// the broker acknowledges them and are sent again after a reconnect (at least once).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "pipeline/results/results.hpp"

struct mosquitto;

namespace vc::pipeline {

class MqttSink final : public ResultSink {
 public:
  // Starts connecting in the background (a broker that is down is not an error: messages wait). Throws
  // vc::ConfigError for unusable settings (unreadable password or certificate file).
  MqttSink(const config::Mqtt& settings, const std::vector<std::string>& stream_names);
  ~MqttSink() override;
  MqttSink(const MqttSink&) = delete;
  MqttSink& operator=(const MqttSink&) = delete;

  void frame(const FrameResult& r) override;
  void event(const StreamEvent& e) override;
  // Publishes "offline", waits up to 2 s for what is in flight, disconnects.
  void close() override;
  std::string name() const override;
  int64_t dropped() const override { return dropped_; }
  bool healthy() const override { return connected_; }

  [[nodiscard]] bool connected() const { return connected_; }
  [[nodiscard]] int64_t published() const { return acked_; }  // acknowledged (QoS 1) or sent (QoS 0)
  [[nodiscard]] int64_t reconnects() const { return connects_ > 0 ? connects_ - 1 : 0; }

  // Whether a broker answers at host:port within `timeout` (for `doctor`); `error` says why not.
  static bool probe(const config::Mqtt& settings, std::chrono::milliseconds timeout, std::string& error);

 private:
  struct Message {
    std::string topic, payload;
    int qos = 0;
    bool retain = false;
  };
  void enqueue(Message m);
  void wake();                        // tells the publisher thread there is something to send
  void flush();                       // hands waiting messages to libmosquitto while connected
  void on_connect(int rc);
  void on_disconnect(int rc);
  void on_publish(int mid);
  std::string topic(const std::string& stream, const char* leaf) const;

  config::Mqtt settings_;
  std::string client_id_;
  mosquitto* mosq_ = nullptr;
  std::mutex mutex_;                  // guards the two containers below
  std::deque<Message> waiting_;       // not yet given to libmosquitto
  std::map<int, Message> in_flight_;  // QoS 1, given to libmosquitto, not yet acknowledged
  std::set<int> early_acks_;          // acknowledged before publish() returned its id
  std::set<int> sent_qos0_;           // QoS 0, given to libmosquitto, its on_publish still to come
  int64_t refusals_ = 0, send_failures_ = 0;  // for rate-limited messages (guarded by mutex_)
  std::chrono::steady_clock::time_point last_drop_warning_{};  // guarded by mutex_
  // per stream and region ("" = the whole picture), for result_interval_s
  std::map<std::pair<int, std::string>, std::chrono::steady_clock::time_point> last_result_;
  std::atomic<bool> connected_{false}, closed_{false};
  std::atomic<int64_t> dropped_{0}, acked_{0}, connects_{0};
  // The one thread that hands messages to libmosquitto, in order (callbacks only wake it).
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread publisher_;
};

}  // namespace vc::pipeline
