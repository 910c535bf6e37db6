// Wall-clock time as UTC text: what file names, results and answers carry.
#pragma once
#include <chrono>
#include <string>

namespace vc {

enum class UtcForm {
  kCompact,  // 20261206T211500Z: in file names
  kSeconds,  // 2026-12-06T21:15:00Z
  kMillis,   // 2026-12-06T21:15:00.123Z
};

std::string utc_text(std::chrono::system_clock::time_point t, UtcForm form);
inline std::string utc_now(UtcForm form) { return utc_text(std::chrono::system_clock::now(), form); }

}  // namespace vc
