#include "config/utc_time.hpp"

#include <ctime>

#include <fmt/format.h>

namespace vc {

std::string utc_text(std::chrono::system_clock::time_point t, UtcForm form) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, form == UtcForm::kCompact ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%S", &tm);
  if (form == UtcForm::kCompact) return text;
  if (form == UtcForm::kSeconds) return std::string(text) + "Z";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  return fmt::format("{}.{:03}Z", text, ms);
}

}  // namespace vc
