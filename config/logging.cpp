#include "config/logging.hpp"

#include <mutex>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "config/errors.hpp"
#include "config/redact.hpp"

namespace vc::log {
namespace {

// Every message goes out with the credentials of any URI in it replaced (config/redact.hpp): a camera's password
// never reaches a log, whoever wrote the message (a GStreamer error quoting its URI included).
class RedactingSink final : public spdlog::sinks::sink {
 public:
  explicit RedactingSink(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    if (payload.find("://") == std::string_view::npos) return inner_->log(msg);
    const std::string clean = config::redact_credentials(payload);
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(clean.data(), clean.size());
    inner_->log(copy);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override { inner_->set_formatter(std::move(formatter)); }

 private:
  spdlog::sink_ptr inner_;
};

struct Registry {
  std::mutex mutex;
  std::vector<spdlog::sink_ptr> sinks{
      std::make_shared<RedactingSink>(std::make_shared<spdlog::sinks::stderr_color_sink_mt>())};
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
    sink = std::make_shared<RedactingSink>(std::make_shared<spdlog::sinks::basic_file_sink_mt>(path));
  } catch (const spdlog::spdlog_ex& e) {
    throw NoInputError("cannot open log file '" + path + "': " + e.what());
  }
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.sinks.push_back(sink);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->sinks().push_back(sink); });
}

}  // namespace vc::log
