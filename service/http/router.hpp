// The server's routes: method and path pattern -> who may call it (open, read, change), where it runs (on the
// server's own thread when it never waits, else on a worker pool), how large a body it takes, and its handler.
// Matched and admitted from the request's header alone, so that a body is read only for a route that takes one and
// only from a client allowed to send it.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "service/http/http_message.hpp"

namespace vc::service::http {

enum class Access {
  Open,    // anyone who reaches the server (health, metrics, the page)
  Read,    // the API's reads: the token too with api.protect_reads
  Change,  // the API's changes: the token always
};

enum class Lane {
  Inline,   // answered on the server's thread: quick, never waits (health, readiness)
  Reads,    // a worker of the read pool (may wait a little: a snapshot waits for the next frame)
  Changes,  // the change worker: one change at a time, in order (adding a stream, removing one)
};

using Handler = std::function<Response(Request&)>;

struct Route {
  std::string method;
  std::vector<std::string> segments;  // "api", "v1", "streams", "{}" (one segment), "{*}" (the rest, last only)
  Access access = Access::Read;
  Lane lane = Lane::Reads;
  size_t max_body = 0;  // 0: a request with a body is refused (413)
  Handler handle;
};

class Router {
 public:
  // What may be asked before a route's body is read: the token, the client's rate. An answer refuses the request.
  using Gate = std::function<std::optional<Response>(const Request& head, Access access)>;

  // `pattern`: "/api/v1/streams/{}/snapshot.jpg"; "{}" matches one segment, "{*}" the rest of the path.
  void add(std::string method, std::string_view pattern, Access access, Lane lane, size_t max_body, Handler handle);
  void set_gate(Gate gate) { gate_ = std::move(gate); }

  struct Match {
    const Route* route = nullptr;  // null: see `status` (404 no such path, 405 not with this method)
    int status = 404;
    std::string allow;  // the methods the path takes (405)
  };
  // Finds the route and fills request.params.
  Match match(Request& request) const;
  // The gate's answer for a matched request (none: it may go on).
  [[nodiscard]] std::optional<Response> admit(const Request& head, const Route& route) const;

 private:
  std::vector<Route> routes_;
  Gate gate_;
};

// {"error": message}, with `status`.
Response error_response(int status, const std::string& message);

}  // namespace vc::service::http
