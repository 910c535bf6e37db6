// The REST API and the web page of a running service (api.enabled), on the metrics server (one server, one port):
//   GET    /api/v1/streams                    every stream: state, source, decoder, fps, latency, label, last event
//   GET    /api/v1/streams/NAME               one of them
//   POST   /api/v1/streams                    add one: the body is an `inputs:` entry as JSON, checked as the config is
//   DELETE /api/v1/streams/NAME               stop it: its frames in flight go through, its outputs are finalized
//   GET    /api/v1/streams/NAME/snapshot.jpg  its latest labelled frame (?width=N), made at most every
//                                             api.snapshot_interval_s
//   GET    /api/v1/streams/NAME/live.mjpeg    the same as a multipart MJPEG stream (api.mjpeg_clients viewers at once)
//   GET    /api/v1/events?stream=&type=&since=&limit=   the latest events (since: a seq the last answer gave)
//   GET    /api/v1/config                     the effective configuration
//   GET    /api/v1/status                     engine, GPU, streams, capacity, whether changes are allowed
//   GET    /                                  the web page (service/web/index.html, compiled in)
// Changes need `Authorization: Bearer TOKEN` (api.token_file or VC_API_TOKEN; without a token they are refused),
// reads too with api.protect_reads. Bodies above api.max_body_kb get 413, more than api.rate_per_s changes per
// second from one client 429, a file or image input outside api.allowed_dirs 403, an invalid entry 422 with the
// config's own message and the key at fault. No CORS headers: the page is served from the same origin.
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/control.hpp"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace vc::service {

// What reconcile() did.
struct Reconciled {
  std::vector<std::string> added, removed, changed, failed;  // failed: "NAME: why"
};

class Api {
 public:
  // Reads the token (api.token_file, else VC_API_TOKEN). Throws vc::ConfigError for an unreadable token file.
  Api(const config::Api& settings, pipeline::RunControl& run);

  void install(httplib::Server& server);

  // Makes the run's streams what `wanted` says (SIGHUP: the config file read again): removes the streams it does
  // not name, adds the new ones, and replaces the ones whose settings changed; the others are not touched (nor is a
  // stream that has ended by itself, a file played to its end: it is not started again). Then saves the state file.
  Reconciled reconcile(const std::vector<config::Input>& wanted);

  // The run's streams into api.state_file (when set). Throws vc::IoError.
  void save_state();

 private:
  enum class Access { Read, Change };
  bool allowed(const httplib::Request& req, httplib::Response& res, Access access);
  bool within_rate(const httplib::Request& req, httplib::Response& res);
  void check_paths(const config::Input& input) const;
  void add(const httplib::Request& req, httplib::Response& res);
  void remove(const std::string& name, httplib::Response& res);
  void snapshot(const httplib::Request& req, httplib::Response& res, const std::string& name);
  void mjpeg(const httplib::Request& req, httplib::Response& res, const std::string& name);
  void state_saved(std::string& warning);

  config::Api settings_;
  pipeline::RunControl& run_;
  std::string token_;
  std::vector<std::string> allowed_dirs_;  // canonical
  std::mutex change_mutex_;                // one change (and its state file) at a time
  std::mutex rate_mutex_;
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, Bucket> buckets_;  // by client address
  std::atomic<int> mjpeg_clients_{0};
  pipeline::Clock::time_point started_ = pipeline::Clock::now();
};

// The web page (service/web/index.html), compiled in.
const char* web_page();

}  // namespace vc::service
