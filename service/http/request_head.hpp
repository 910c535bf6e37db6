// What every request's header must be before it is routed: the bounds the server keeps (Limits), and the header read
// into a Request — fields counted, the target in origin form, the Host one this server answers to, no encoded body.
// Separate from the server's sockets so that the fuzz target (fuzz/fuzz_http.cpp) runs exactly this.
#pragma once
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <boost/beast/http/message.hpp>

#include "service/http/http_message.hpp"

namespace vc::service::http {

struct Limits {
  std::string address = "127.0.0.1";
  int port = 0;
  size_t header_bytes = 16 * 1024;  // the request line and every field (beyond: 431)
  size_t header_fields = 100;       // (beyond: 431)
  std::chrono::seconds header_time{10};  // for a whole header, from the connection's start or its last answer
  std::chrono::seconds body_time{30};    // for a whole body
  std::chrono::seconds write_time{30};   // for each piece of an answer the client must take
  int max_connections = 512;        // open at once, every client together (beyond: the one that has waited longest
                                    // for a header makes room; with none waiting, the newcomer is closed at once)
  int max_per_client = 32;          // open at once from one address (beyond: closed at once)
  int read_workers = 8;             // the read pool's threads
  size_t max_waiting = 256;         // requests waiting for a worker (beyond: 503)
  // Host names a request may name besides localhost and IP addresses ("*": any) — what stops a web page elsewhere
  // from reaching this server through a DNS name it rebinds to this host.
  std::vector<std::string> allowed_hosts;
};


// Whether `host` (a Host header: "name", "name:port", "[v6]:port") is one this server answers to: localhost, an IP
// address (a page can only name one for its own origin: no rebinding), or a name in `allowed` ("*": any).
bool host_allowed(const std::string& host, const std::vector<std::string>& allowed);

// The header as a Request (method, path, query, headers in lower case, client), or the answer that refuses it:
// 431 too many fields, 400 no Host or a target not in origin form, 403 a Host not served here, 415 an encoded body.
std::optional<Response> take_head(const boost::beast::http::request_header<>& head, const Limits& limits,
                                  const std::string& client, Request& out);

}  // namespace vc::service::http
