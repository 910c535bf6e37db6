// The service's HTTP/1.1 server, on Boost.Beast (asio): one thread does all the network work asynchronously, so an
// idle, slow or trickling client costs a socket and a few KiB, never a thread; handlers that may wait run on worker
// pools that only complete requests reach. Everything a client sends is bounded before a handler sees it: the header
// (bytes, fields, time), the body (bytes whatever its framing, time; encoded bodies refused), connections per client
// and in all, the Host it names. Responses are buffered, a range of an opened file, or a live body (http_message.hpp).
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "service/http/request_head.hpp"
#include "service/http/router.hpp"

namespace vc::service::http {

// Counters of what the server turned away (read from any thread).
struct ServerCounts {
  int64_t refused_connections = 0;  // over max_connections or max_per_client
  int64_t bad_requests = 0;         // malformed, too large, too slow
  int64_t open_connections = 0;
  int64_t evicted = 0;              // idle connections closed at the cap to make room for a newer one
};

class HttpServer {
 public:
  // Listens at once and serves `router` (which must outlive the server) from its own thread. Throws
  // vc::UnavailableError when the address cannot be listened on.
  HttpServer(Limits limits, const Router& router);
  // Stops accepting, closes every connection (live bodies are closed: their producers see push() fail), waits for
  // the handlers that are running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  [[nodiscard]] int port() const;
  [[nodiscard]] ServerCounts counts() const;

  class Impl;  // (opaque: its connections reach it)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vc::service::http
