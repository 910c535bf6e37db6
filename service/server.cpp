#include "service/server.hpp"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "service/metrics.hpp"

namespace vc::service {

Server::Server(const config::Config& config, pipeline::RunControl& run)
    : settings_(config.metrics), run_(run), server_(std::make_unique<httplib::Server>()) {
  if (config.api.enabled) {
    api_ = std::make_unique<Api>(config.api, run);
    api_->install(*server_);  // (the web page at /)
  } else {
    server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("video-classifier\n\n/metrics   Prometheus metrics\n/healthz   200 while every stream delivers "
                      "frames and results\n/readyz    200 once the engine is built and every stream started\n(the REST "
                      "API and the web page: api.enabled)\n",
                      "text/plain; charset=utf-8");
    });
  }
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(run_), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    const auto [ok, body] = render_health(run_, settings_.stall_s, started_);
    res.status = ok ? 200 : 503;
    res.set_content(body, "application/json");
  });
  server_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = run_.engine().ready;
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "starting\n", "text/plain");
  });
  if (!server_->bind_to_port(settings_.address.c_str(), settings_.port)) {
    throw UnavailableError(fmt::format("metrics: cannot listen on {}:{} (port in use, or not an address of this host?)",
                                       settings_.address, settings_.port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  vc::log::get("service")->info("metrics and health: {}/metrics, /healthz, /readyz{}", url(),
                                api_ ? fmt::format("; web page {}/, API {}/api/v1/", url(), url()) : "");
}

Server::~Server() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
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
