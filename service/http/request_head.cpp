#include "service/http/request_head.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

#include "service/http/router.hpp"

namespace vc::service::http {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return text;
}

}  // namespace

bool host_allowed(const std::string& header, const std::vector<std::string>& allowed) {
  std::string host = header;
  if (host.find('\0') != std::string::npos) return false;
  const auto port_ok = [](const std::string& port) {
    return !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  if (!host.empty() && host.front() == '[') {  // [v6] or [v6]:port
    const auto close = host.find(']');
    if (close == std::string::npos) return false;
    const auto rest = host.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !port_ok(rest.substr(1)))) return false;
    in6_addr a6{};
    return inet_pton(AF_INET6, host.substr(1, close - 1).c_str(), &a6) == 1;
  }
  if (const auto colon = host.rfind(':'); colon != std::string::npos) {
    if (!port_ok(host.substr(colon + 1))) return false;
    host.resize(colon);
  }
  host = lower(host);
  if (!host.empty() && host.back() == '.') host.pop_back();  // "localhost." is localhost
  if (host.empty()) return false;
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return true;
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& name) { return name == "*" || lower(name) == host; });
}

std::optional<Response> take_head(const boost::beast::http::request_header<>& head, const Limits& limits,
                                  const std::string& client, Request& out) {
  out = Request{};
  size_t fields = 0;
  for (const auto& f : head) {
    if (++fields > limits.header_fields) {
      return error_response(431, "too many header fields (at most " + std::to_string(limits.header_fields) + ")");
    }
    out.headers.emplace_back(lower(std::string(f.name_string())), std::string(f.value()));
  }
  out.method = std::string(head.method_string());
  out.client = client;
  const auto target = head.target();
  if (target.empty() || target.front() != '/') return error_response(400, "the request target must be a path (/…)");
  split_target({target.data(), target.size()}, out.path, out.query);
  const auto host = out.header("host");
  if (host.empty()) {
    if (head.version() >= 11) return error_response(400, "an HTTP/1.1 request needs a Host header");
  } else if (!host_allowed(host, limits.allowed_hosts)) {
    return error_response(403, "this server does not answer to the host '" + host.substr(0, 200) +
                                   "' (add it to api.allowed_hosts)");
  }
  const auto encoding = lower(out.header("content-encoding"));
  if (!encoding.empty() && encoding != "identity") {
    return error_response(415, "bodies must not be encoded (Content-Encoding: " + encoding.substr(0, 40) + ")");
  }
  return std::nullopt;
}

}  // namespace vc::service::http
