// The run as a service sees it, over HTTP (http/http_server.hpp: Boost.Beast, every request bounded), off by default
// (metrics.enabled, api.enabled), on 127.0.0.1 unless configured (metrics.address, metrics.port: one server, one port):
//   /metrics  the Prometheus text format (metrics.hpp)
//   /healthz  200 while every running stream delivers frames and gets results (within metrics.stall_s), else 503
//   /readyz   200 once the engine is built and every stream started, else 503
//   /api/v1/… and the web page at /, with api.enabled (api.hpp)
// It stands above the pipeline: app/ creates it with the run's control interface; nothing in pipeline/ knows it.
#pragma once
#include <memory>
#include <string>

#include "config/config.hpp"
#include "pipeline/core/control.hpp"
#include "service/api.hpp"
#include "service/http/http_server.hpp"
#include "service/http/router.hpp"

namespace vc::service {

class Server {
 public:
  // Listens at once. Throws vc::UnavailableError when the address/port cannot be bound (port in use), vc::ConfigError
  // for an unreadable api.token_file. `run` must outlive the server.
  Server(const config::Config& config, pipeline::RunControl& run);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  [[nodiscard]] std::string url() const;
  // The REST API (null without api.enabled).
  [[nodiscard]] Api* api() { return api_.get(); }

  // Whether `address:port` can be listened on now (for `doctor`).
  static bool port_free(const std::string& address, int port, std::string& error);

 private:
  config::Metrics settings_;
  pipeline::RunControl& run_;
  pipeline::Clock::time_point started_ = pipeline::Clock::now();
  // Declared in this order so that the server (its threads call the routes) stops before the routes and the API go.
  std::unique_ptr<Api> api_;
  http::Router router_;
  std::unique_ptr<http::HttpServer> http_;
};

}  // namespace vc::service
