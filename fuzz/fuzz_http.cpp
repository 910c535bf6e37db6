// libFuzzer target: any bytes as an HTTP/1.1 request, read by Beast's parser with the server's bounds, then the
// service's own steps on it (service/http/): take_head, the router's match and gate, and the route's handler.
// The sockets (http_server.cpp) are not part of it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "fuzz/fuzz_check.hpp"
#include "service/http/http_message.hpp"
#include "service/http/request_head.hpp"
#include "service/http/router.hpp"

namespace {

namespace bhttp = boost::beast::http;
namespace http = vc::service::http;
using vc::fuzz::finding;

constexpr size_t kMaxBody = 64 * 1024;

// What a real route sends back, reduced to what the request carried (the params may be any bytes: replaced, as the
// API's own answers do, rather than a json exception).
http::Response echo(http::Request& request) {
  const nlohmann::json answer{{"method", request.method}, {"path", request.path}, {"params", request.params},
                              {"query", request.query}, {"body_bytes", request.body.size()}};
  return {200, answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

// The API's shape (service/api.cpp): the same patterns, accesses and bodies, with the token gate of api_access.cpp
// reduced to its one rule that matters here — a change needs the token.
const http::Router& router() {
  static const http::Router routes = [] {
    using http::Access;
    using http::Lane;
    http::Router r;
    r.add("GET", "/", Access::Open, Lane::Inline, 0, echo);
    r.add("GET", "/healthz", Access::Open, Lane::Inline, 0, echo);
    r.add("GET", "/api/v1/streams", Access::Read, Lane::Reads, 0, echo);
    r.add("GET", "/api/v1/streams/{}", Access::Read, Lane::Reads, 0, echo);
    r.add("POST", "/api/v1/streams", Access::Change, Lane::Changes, kMaxBody, echo);
    r.add("DELETE", "/api/v1/streams/{}", Access::Change, Lane::Changes, 0, echo);
    r.add("GET", "/api/v1/streams/{}/snapshot.jpg", Access::Read, Lane::Reads, 0, echo);
    r.add("GET", "/api/v1/event-files/{*}", Access::Read, Lane::Reads, 0, echo);
    r.set_gate([](const http::Request& head, Access access) -> std::optional<http::Response> {
      if (access == Access::Change && head.header("authorization") != "Bearer t") {
        return http::error_response(401, "this needs the API token");
      }
      return std::nullopt;
    });
    return r;
  }();
  return routes;
}

const http::Limits& limits() {
  static const http::Limits l = [] {
    http::Limits limits;
    limits.allowed_hosts = {"cam.example"};
    return limits;
  }();
  return l;
}

// Decoding only ever shortens ("%41" -> "A"): a longer result would mean bytes made up from nothing.
void check_decoding(std::string_view text) {
  for (const bool plus_is_space : {false, true}) {
    if (http::percent_decoded(text, plus_is_space).size() > text.size()) {
      finding("percent_decoded() made a longer string of '" + std::string(text) + "'");
    }
  }
}

void check_split(std::string_view target) {
  std::string path;
  std::map<std::string, std::string> query;
  http::split_target(target, path, query);
  if (path.find('?') != std::string::npos) finding("split_target() left a '?' in the path '" + path + "'");
  if (!target.starts_with(path)) finding("split_target()'s path '" + path + "' is not where the target starts");
}

// A matched route's params are what its handler may use as a name or a file path without checking them again.
void check_params(const http::Route& route, const std::vector<std::string>& params) {
  const auto wildcards = std::count_if(route.segments.begin(), route.segments.end(),
                                       [](const std::string& s) { return s == "{}" || s == "{*}"; });
  if (params.size() != size_t(wildcards)) {
    finding(std::to_string(params.size()) + " params for a route with " + std::to_string(wildcards) + " wildcards");
  }
  for (const auto& p : params) {
    if (p.empty()) finding("an empty param");
    if (p.find('\0') != std::string::npos) finding("a param with a NUL: '" + p + "'");
  }
  size_t k = 0;
  for (const auto& s : route.segments) {
    if (s == "{}") {
      if (params[k].find('/') != std::string::npos) finding("a {} param with a '/': '" + params[k] + "'");
    } else if (s == "{*}") {
      std::string_view rest = params[k];
      for (;;) {  // each '/'-separated segment: never empty, ".", ".." (what would leave the folder it names)
        const size_t slash = std::min(rest.find('/'), rest.size());
        const auto seg = rest.substr(0, slash);
        if (seg.empty() || seg == "." || seg == "..") finding("a {*} param with a bad segment: '" + params[k] + "'");
        if (slash == rest.size()) break;
        rest.remove_prefix(slash + 1);
      }
    }
    if (s == "{}" || s == "{*}") ++k;
  }
}

void check_match(const http::Request& request, const http::Router::Match& match) {
  if (match.route) {
    if (match.status != 200) finding("a matched route with status " + std::to_string(match.status));
    if (match.route->method != request.method) {
      finding("a route for " + match.route->method + " matched " + request.method);
    }
    check_params(*match.route, request.params);
  } else if (match.status == 405) {
    if (match.allow.empty()) finding("405 with no Allow list for " + request.method + " " + request.path);
  } else if (match.status != 404) {
    finding("no route and status " + std::to_string(match.status));
  } else if (!match.allow.empty()) {
    finding("404 with an Allow list '" + match.allow + "'");
  }
}

// The server's steps once the header is read (Session::on_header), and the handler once the body is.
void route(const bhttp::request_parser<bhttp::string_body>& parser) {
  http::Request request;
  if (auto refusal = http::take_head(parser.get().base(), limits(), "127.0.0.1", request)) {
    if (refusal->status != 400 && refusal->status != 403 && refusal->status != 415 && refusal->status != 431) {
      finding("take_head() refused with status " + std::to_string(refusal->status));
    }
    if (!nlohmann::json::accept(refusal->body)) finding("take_head()'s refusal is not JSON: " + refusal->body);
    return;
  }
  if (request.path.empty() || request.path.front() != '/' || request.path.find('?') != std::string::npos) {
    finding("take_head() admitted the path '" + request.path + "'");
  }
  check_decoding(request.path);
  (void)http::host_allowed(request.header("host"), {"cam.example", "*"});

  const auto match = router().match(request);
  check_match(request, match);
  if (!match.route) return;
  if (auto refusal = router().admit(request, *match.route)) {
    if (refusal->status != 401) finding("the gate refused with status " + std::to_string(refusal->status));
    return;
  }
  if (!parser.is_done()) return;  // a body cut short or malformed: the server answers 400 without the route
  request.body = parser.get().body();
  if (request.body.size() > match.route->max_body) return;  // the server answers 413 without the route
  const auto answer = match.route->handle(request);
  if (answer.status != 200) finding("the handler answered " + std::to_string(answer.status));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    // Cheap and direct, on the raw bytes: what the header path below reaches only through Beast's filters.
    check_decoding(bytes);
    check_split(bytes);
    const std::string host(bytes);
    if (http::host_allowed(host, {"cam.example"}) && !http::host_allowed(host, {"cam.example", "*"})) {
      finding("host_allowed(): adding \"*\" refused '" + host + "'");
    }

    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(kMaxBody);
    parser.eager(true);
    boost::beast::error_code ec;
    std::string_view rest = bytes;
    while (!parser.is_done()) {
      if (rest.empty()) {  // the client has sent everything: a message without its end is an error now
        parser.put_eof(ec);
        break;
      }
      const size_t used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
      rest.remove_prefix(used);
      if (ec == bhttp::error::need_more) ec = {};
      if (ec) break;  // a malformed request: the server answers 400 (or 431, 413), a normal outcome
      if (used == 0) {  // it needs more than is left
        parser.put_eof(ec);
        break;
      }
    }
    if (parser.is_header_done()) route(parser);
  } catch (const vc::Error&) {  // the one kind of exception the code under test may throw
  }
  return 0;
}
