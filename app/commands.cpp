#include "app/commands.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "config/errors.hpp"

namespace vc::app {

int classify(const config::Config&) {
  throw UnavailableError(
      "classification is not available yet: the inference engine and the GStreamer pipeline have not landed "
      "(see the open issues). `video-classifier doctor` checks the install.");
}

int print_config(const CommandLine& cl, std::ostream& out) {
  if (!cl.list_keys) {
    out << config::to_yaml(cl.config);
    return 0;
  }
  for (const auto& k : config::describe_keys()) {
    fmt::print(out, "{:<28} {:<44} {}\n", k.path, k.default_value, k.description);
  }
  return 0;
}

int evaluate(const CommandLine&, std::ostream&) {
  throw UnavailableError("evaluate is not available yet");
}

}  // namespace vc::app
