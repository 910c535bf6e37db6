#include "config/logging.hpp"

#include <mutex>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "config/errors.hpp"

namespace vc::log {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<spdlog::sink_ptr> sinks{std::make_shared<spdlog::sinks::stderr_color_sink_mt>()};
  spdlog::level::level_enum level = spdlog::level::info;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::shared_ptr<spdlog::logger> get(std::string_view module) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  const std::string name(module);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, r.sinks.begin(), r.sinks.end());
  logger->set_level(r.level);
  logger->set_pattern("%H:%M:%S.%e %^%-5l%$ [%n] %v");
  spdlog::register_logger(logger);
  return logger;
}

void set_level(const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  // from_str maps unknown names to "off"; only accept "off" when it was asked for.
  if (parsed == spdlog::level::off && level != "off") {
    throw ConfigError("unknown log level '" + level + "' (trace, debug, info, warn, error, critical, off)");
  }
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.level = parsed;
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->set_level(parsed); });
}

void add_file_sink(const std::string& path) {
  spdlog::sink_ptr sink;
  try {
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
  } catch (const spdlog::spdlog_ex& e) {
    throw NoInputError("cannot open log file '" + path + "': " + e.what());
  }
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.sinks.push_back(sink);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->sinks().push_back(sink); });
}

}  // namespace vc::log
