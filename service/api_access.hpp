// Who may do what over the API (api.hpp): the bearer token — for every change, and for reads with api.protect_reads —,
// sessions a token holder opens for the web page (a cookie that reads only, so that <img> and <video> can show what a
// protected service serves; a change always needs the token itself, so no other site can make one through the
// browser), and per-client bounds: changes per second (api.rate_per_s) and failed token guesses (a few a minute).
// Thread-safe.
#pragma once
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "service/http/router.hpp"

namespace vc::service {

class ApiAccess {
 public:
  // Reads the token (api.token_file, else VC_API_TOKEN). Throws vc::ConfigError for an unreadable or empty token file.
  explicit ApiAccess(const config::Api& settings);

  [[nodiscard]] bool changes_allowed() const { return !token_.empty(); }

  // The router's gate: none when `head` may go on to `access`'s routes, else the answer (401, 403, 429).
  [[nodiscard]] std::optional<http::Response> check(const http::Request& head, http::Access access);
  // POST /api/v1/session (a token holder, checked by the gate): a session cookie for reads.
  http::Response open_session();

  // Failed guesses a client may make in a burst, and how often one more is allowed after that.
  static constexpr double kGuessBurst = 10;
  static constexpr double kGuessesPerSecond = 1.0 / 6;

 private:
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point at;
  };
  // Takes one from `client`'s bucket (refilled at `rate` per second up to `burst`); false (and the wait in
  // `retry_s`) when it is empty. `take` false: only looks.
  bool draw(std::map<std::string, Bucket>& buckets, const std::string& client, double burst, double rate, bool take,
            int& retry_s);
  bool session_valid(const http::Request& head);

  config::Api settings_;
  std::string token_;
  std::mutex mutex_;
  std::map<std::string, Bucket> changes_, guesses_;  // by client address
  std::map<std::string, std::chrono::steady_clock::time_point> sessions_;  // cookie value -> expiry
};

}  // namespace vc::service
