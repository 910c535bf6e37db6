// video-classifier: parse the command line, then run the chosen command. Errors become sysexits codes.
#include <iostream>

#include "app/cli.hpp"
#include "app/commands.hpp"
#include "app/doctor.hpp"
#include "config/errors.hpp"
#include "config/logging.hpp"

int main(int argc, char** argv) {
  try {
    auto parsed = vc::app::parse_command_line(argc, argv);
    if (auto* code = std::get_if<int>(&parsed)) return *code;
    const auto& cl = std::get<vc::app::CommandLine>(parsed);
    if (cl.command == "doctor") return vc::app::run_doctor(cl.config, std::cout);
    if (cl.command == "config") return vc::app::print_config(cl, std::cout);
    if (cl.command == "evaluate") return vc::app::evaluate(cl, std::cout);
    if (cl.command == "diagnose") return vc::app::diagnose(cl, std::cout);
    return vc::app::classify(cl.config);
  } catch (const vc::Error& e) {
    vc::log::get("app")->error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    vc::log::get("app")->critical("internal error: {}", e.what());
    return static_cast<int>(vc::ExitCode::kInternal);
  }
}
