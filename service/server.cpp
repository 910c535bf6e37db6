#include "service/server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "service/metrics.hpp"

namespace vc::service {

using http::Access;
using http::Lane;
using http::Response;

Server::Server(const config::Config& config, pipeline::RunControl& run) : settings_(config.metrics), run_(run) {
  if (config.api.enabled) {
    api_ = std::make_unique<Api>(config.api, run);
    api_->install(router_);  // (the web page at /)
  } else {
    router_.add("GET", "/", Access::Open, Lane::Inline, 0, [](http::Request&) {
      return Response(200,
                      "video-classifier\n\n/metrics   Prometheus metrics\n/healthz   200 while every stream delivers "
                      "frames and results\n/readyz    200 once the engine is built and every stream started\n(the REST "
                      "API and the web page: api.enabled)\n",
                      "text/plain; charset=utf-8");
    });
  }
  router_.add("GET", "/metrics", Access::Open, Lane::Reads, 0, [this](http::Request&) {
    auto text = render_metrics(run_);
    if (api_) text += render_live_metrics(api_->live_views().counts());
    return Response(200, std::move(text), "text/plain; version=0.0.4; charset=utf-8");
  });
  // Health and readiness never wait for a worker: a probe is answered whatever the API's clients are doing.
  router_.add("GET", "/healthz", Access::Open, Lane::Inline, 0, [this](http::Request&) {
    auto [ok, body] = render_health(run_, settings_.stall_s, started_);
    return Response(ok ? 200 : 503, std::move(body));
  });
  router_.add("GET", "/readyz", Access::Open, Lane::Inline, 0, [this](http::Request&) {
    const bool ready = run_.engine().ready;
    return Response(ready ? 200 : 503, ready ? "ready\n" : "starting\n", "text/plain");
  });
  http::Limits limits;
  limits.address = settings_.address;
  limits.port = settings_.port;
  limits.allowed_hosts = config.api.allowed_hosts;
  limits.max_connections = config.api.max_connections;
  limits.max_per_client = config.api.max_connections_per_client;
  http_ = std::make_unique<http::HttpServer>(limits, router_);
  vc::log::get("service")->info("metrics and health: {}/metrics, /healthz, /readyz{}", url(),
                                api_ ? fmt::format("; web page {}/, API {}/api/v1/", url(), url()) : "");
}

Server::~Server() {
  http_.reset();  // no request runs any more: the API can go
  if (api_) api_->stop();
}

std::string Server::url() const { return fmt::format("http://{}:{}", settings_.address, settings_.port); }

bool Server::port_free(const std::string& address, int port, std::string& error) {
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

}  // namespace vc::service
