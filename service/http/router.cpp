#include "service/http/router.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "config/redact.hpp"

namespace vc::service::http {
namespace {

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < path.size()) {
    if (path[at] == '/') {
      ++at;
      continue;
    }
    const size_t end = std::min(path.find('/', at), path.size());
    out.push_back(path.substr(at, end - at));
    at = end;
  }
  return out;
}

}  // namespace

void Router::add(std::string method, std::string_view pattern, Access access, Lane lane, size_t max_body, Handler handle) {
  Route r;
  r.method = std::move(method);
  for (auto s : split_path(pattern)) r.segments.emplace_back(s);
  r.access = access;
  r.lane = lane;
  r.max_body = max_body;
  r.handle = std::move(handle);
  routes_.push_back(std::move(r));
}

Router::Match Router::match(Request& request) const {
  const auto parts = split_path(request.path);
  Match out;
  for (const auto& route : routes_) {
    std::vector<std::string> params;
    bool fits = true;
    size_t i = 0;
    for (; i < route.segments.size() && fits; ++i) {
      const auto& want = route.segments[i];
      if (want == "{*}") {  // the rest: decoded segment by segment, "." and ".." never part of it
        std::string rest;
        for (size_t k = i; k < parts.size() && fits; ++k) {
          const auto seg = percent_decoded(parts[k], false);
          fits = !seg.empty() && seg != "." && seg != ".." && seg.find('/') == std::string::npos &&
                 seg.find('\0') == std::string::npos;
          rest += (rest.empty() ? "" : "/") + seg;
        }
        fits = fits && !rest.empty();
        params.push_back(std::move(rest));
        i = parts.size();
        break;
      }
      if (i >= parts.size()) {
        fits = false;
      } else if (want == "{}") {
        auto seg = percent_decoded(parts[i], false);
        fits = !seg.empty() && seg.find('/') == std::string::npos && seg.find('\0') == std::string::npos;
        params.push_back(std::move(seg));
      } else {
        fits = parts[i] == want;
      }
    }
    if (!fits || (route.segments.empty() ? !parts.empty() : (route.segments.back() != "{*}" && i != parts.size()))) {
      continue;
    }
    if (route.method != request.method) {
      out.status = 405;
      if (out.allow.find(route.method) == std::string::npos) out.allow += (out.allow.empty() ? "" : ", ") + route.method;
      continue;
    }
    request.params = std::move(params);
    out.route = &route;
    out.status = 200;
    out.allow.clear();
    return out;
  }
  return out;
}

std::optional<Response> Router::admit(const Request& head, const Route& route) const {
  if (!gate_) return std::nullopt;
  return gate_(head, route.access);
}

Response error_response(int status, const std::string& message) {
  // (a handler's exception may quote a URI: no answer carries its credentials)
  return {status, nlohmann::json{{"error", config::redact_credentials(message)}}.dump(-1, ' ', false,
                                                                                     nlohmann::json::error_handler_t::replace)};
}

}  // namespace vc::service::http
