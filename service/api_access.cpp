#include "service/api_access.hpp"

#include <arpa/inet.h>
#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"

namespace vc::service {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kCookie = "vc_session";
constexpr auto kSessionLife = std::chrono::hours(12);
constexpr size_t kMaxSessions = 256;
constexpr size_t kMaxClients = 10000;  // buckets remembered; beyond, the full ones are forgotten

bool same_text(const std::string& a, const std::string& b) {  // (without an early exit: no timing hint)
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The value of cookie `name` in a Cookie header ("a=1; vc_session=…"), "" when absent.
std::string cookie(const std::string& header, const std::string& name) {
  size_t at = 0;
  while (at < header.size()) {
    const size_t end = std::min(header.find(';', at), header.size());
    std::string pair = header.substr(at, end - at);
    const auto first = pair.find_first_not_of(' ');
    pair = first == std::string::npos ? "" : pair.substr(first);
    if (pair.rfind(name + "=", 0) == 0) return pair.substr(name.size() + 1);
    at = end + 1;
  }
  return {};
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    const auto n = getrandom(raw.data() + got, bytes - got, 0);
    if (n <= 0) throw InternalError("api: no random bytes for a session");
    got += size_t(n);
  }
  std::string out;
  for (unsigned char c : raw) out += fmt::format("{:02x}", c);
  return out;
}

// The bucket a client address draws from: an IPv4 address, or an IPv6 address's /64 (what one host usually holds).
std::string client_key(const std::string& address) {
  in6_addr a6{};
  if (address.find(':') == std::string::npos || inet_pton(AF_INET6, address.c_str(), &a6) != 1) return address;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) return fmt::format("{}.{}.{}.{}", a6.s6_addr[12], a6.s6_addr[13], a6.s6_addr[14], a6.s6_addr[15]);
  std::string out;
  for (int i = 0; i < 8; i += 2) out += fmt::format("{:02x}{:02x}:", a6.s6_addr[i], a6.s6_addr[i + 1]);
  return out + ":/64";
}

}  // namespace

ApiAccess::ApiAccess(const config::Api& settings) : settings_(settings) {
  if (!settings_.token_file.empty()) {
    std::ifstream in(settings_.token_file);
    if (!in) throw ConfigError(fmt::format("api.token_file: cannot read '{}'", settings_.token_file), "api.token_file");
    std::getline(in, token_);
  } else if (const char* env = std::getenv("VC_API_TOKEN")) {
    token_ = env;
  }
  while (!token_.empty() && std::isspace(static_cast<unsigned char>(token_.back()))) token_.pop_back();
  if (!settings_.token_file.empty() && token_.empty()) {
    throw ConfigError(fmt::format("api.token_file: '{}' is empty", settings_.token_file), "api.token_file");
  }
  if (token_.empty()) vc::log::get("service")->warn("api: no token (api.token_file, VC_API_TOKEN): the API is read-only");
}

bool ApiAccess::draw(std::map<std::string, Bucket>& buckets, const std::string& address, double burst, double rate,
                     bool take, int& retry_s) {
  const auto now = Clock::now();
  const auto client = client_key(address);
  auto it = buckets.find(client);
  if (it == buckets.end()) {
    if (buckets.size() >= kMaxClients) {  // many addresses: forget those with nothing drawn, never the others
      std::erase_if(buckets, [&](const auto& kv) {
        return kv.second.tokens + std::chrono::duration<double>(now - kv.second.at).count() * rate >= burst;
      });
    }
    if (buckets.size() >= kMaxClients) {  // a flood of addresses that all drew: newcomers wait (under attack)
      retry_s = int(std::ceil(1 / rate));
      return false;
    }
    it = buckets.emplace(client, Bucket{burst, now}).first;
  }
  Bucket& b = it->second;
  b.tokens = std::min(burst, b.tokens + std::chrono::duration<double>(now - b.at).count() * rate);
  b.at = now;
  if (b.tokens < 1) {
    retry_s = std::max(1, int(std::ceil((1 - b.tokens) / rate)));
    return false;
  }
  if (take) b.tokens -= 1;
  return true;
}

bool ApiAccess::session_valid(const http::Request& head) {
  const auto value = cookie(head.header("cookie"), kCookie);
  if (value.empty()) return false;
  const auto it = sessions_.find(value);
  if (it == sessions_.end()) return false;
  if (it->second < Clock::now()) {
    sessions_.erase(it);
    return false;
  }
  return true;
}

std::optional<http::Response> ApiAccess::check(const http::Request& head, http::Access access) {
  if (access == http::Access::Open) return std::nullopt;
  if (access == http::Access::Read && !settings_.protect_reads) return std::nullopt;
  std::lock_guard lock(mutex_);
  if (access == http::Access::Read && session_valid(head)) return std::nullopt;
  if (token_.empty()) {
    return http::error_response(403, access == http::Access::Change
                                         ? "changes are turned off: the service has no token (api.token_file or VC_API_TOKEN)"
                                         : "reads need a token (api.protect_reads), and the service has none");
  }
  int retry = 0;
  const auto too_many = [&] {
    return http::error_response(429, fmt::format("too many wrong tokens from {}: try again in {} s", head.client, retry))
        .header("Retry-After", std::to_string(retry));
  };
  // A client that has guessed wrong too often is not heard, even with the right token, until its bucket refills.
  if (!draw(guesses_, head.client, kGuessBurst, kGuessesPerSecond, false, retry)) return too_many();
  const auto header = head.header("authorization");
  if (header.rfind("Bearer ", 0) != 0) {
    return http::error_response(401, "a bearer token is needed (Authorization: Bearer TOKEN)").header("WWW-Authenticate", "Bearer");
  }
  if (!same_text(header.substr(7), token_)) {
    if (!draw(guesses_, head.client, kGuessBurst, kGuessesPerSecond, true, retry)) return too_many();
    vc::log::get("service")->warn("api: a wrong token from {}", head.client);
    return http::error_response(403, "the token is not the service's");
  }
  if (access == http::Access::Change && !draw(changes_, head.client, std::max(1.0, settings_.rate_per_s), settings_.rate_per_s, true, retry)) {
    return http::error_response(429, fmt::format("more than {} change(s) per second (api.rate_per_s)", settings_.rate_per_s))
        .header("Retry-After", std::to_string(retry));
  }
  return std::nullopt;
}

http::Response ApiAccess::open_session() {
  const auto value = random_hex(32);
  {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    std::erase_if(sessions_, [&](const auto& kv) { return kv.second < now; });
    while (sessions_.size() >= kMaxSessions) {  // the one closest to its end goes
      sessions_.erase(std::min_element(sessions_.begin(), sessions_.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; }));
    }
    sessions_.emplace(value, now + kSessionLife);
  }
  const auto life = std::chrono::duration_cast<std::chrono::seconds>(kSessionLife).count();
  return http::Response(200, fmt::format("{{\"session\":true,\"expires_s\":{}}}", life))
      .header("Set-Cookie", fmt::format("{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict", kCookie, value, life))
      .header("Cache-Control", "no-store");
}

}  // namespace vc::service
