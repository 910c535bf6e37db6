// Module-tagged spdlog loggers ("[config]", "[inference]", …) that share one set of sinks.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace vc::log {

// The logger for a module; created on first use with the current level and sinks.
std::shared_ptr<spdlog::logger> get(std::string_view module);

// Sets the level of every logger ("trace", "debug", "info", "warn", "error", "critical", "off").
// Throws vc::ConfigError on an unknown name.
void set_level(const std::string& level);

// Also writes every logger's output to `path` (appended). Throws vc::NoInputError if it can't be opened.
void add_file_sink(const std::string& path);

}  // namespace vc::log
