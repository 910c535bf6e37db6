// What every fuzz target shares: the one rule (only vc::Error may escape the code under test) is enforced by
// libFuzzer itself (an escaping exception terminates, which it reports as a crash); this adds the checks that a
// crash alone would not show.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/config.hpp"
#include "config/errors.hpp"

namespace vc::fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::abort();
}

// A valid configuration printed by `video-classifier config` must read back as the same configuration.
inline void check_round_trip(const config::Config& config) {
  const auto printed = config::to_yaml(config);
  std::string reprinted;
  try {
    reprinted = config::to_yaml(config::parse_config(printed, "<to_yaml>"));
  } catch (const Error& e) {
    finding(std::string("to_yaml() printed a configuration that does not read back: ") + e.what() + "\n" + printed);
  }
  if (reprinted != printed) finding("to_yaml() does not round-trip:\n" + printed + "---\n" + reprinted);
}

}  // namespace vc::fuzz
