// video-classifier: parse the command line, then run the chosen command. Errors become sysexits codes.
#include <malloc.h>

#include <cstdlib>
#include <iostream>

#include "app/cli.hpp"
#include "app/commands.hpp"
#include "app/crash_report.hpp"
#include "app/doctor.hpp"
#include "config/errors.hpp"
#include "config/logging.hpp"

namespace {

// glibc gives each new thread a malloc arena of its own, up to 8 per core, and an arena keeps what was freed in it.
// Every source restart (an RTSP reconnect, a stall) starts new streaming threads, so over hours the process's memory
// grows although its heap does not (measured: 104 -> 123 MiB over 20 RTSP restarts with 7.5 MiB of live heap at the
// peak; flat with 2 arenas — docs/RELIABILITY.md). A few arenas are plenty for a pipeline whose frames live in
// pooled buffers. MALLOC_ARENA_MAX, when set, still decides.
void limit_malloc_arenas() {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 4);
}

}  // namespace

int main(int argc, char** argv) {
  limit_malloc_arenas();
  vc::app::install_crash_report();
  try {
    auto parsed = vc::app::parse_command_line(argc, argv);
    if (auto* code = std::get_if<int>(&parsed)) return *code;
    const auto& cl = std::get<vc::app::CommandLine>(parsed);
    if (cl.command == "doctor") return vc::app::run_doctor(cl.config, std::cout);
    if (cl.command == "config") return vc::app::print_config(cl, std::cout);
    if (cl.command == "evaluate") return vc::app::evaluate(cl, std::cout);
    if (cl.command == "diagnose") return vc::app::diagnose(cl, std::cout);
    if (cl.command == "capture") return vc::app::capture(cl, std::cout);
    return vc::app::classify(cl.config, [argc, argv] {
      auto again = vc::app::parse_command_line(argc, argv);
      if (auto* c = std::get_if<vc::app::CommandLine>(&again)) return c->config;
      throw vc::ConfigError("the command line no longer parses");
    });
  } catch (const vc::Error& e) {
    vc::log::get("app")->error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    vc::log::get("app")->critical("internal error: {}", e.what());
    return static_cast<int>(vc::ExitCode::kInternal);
  }
}
