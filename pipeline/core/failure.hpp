// Why a part of the run stopped (a source, an output, a result sink): the exit code it maps to and the message.
#pragma once
#include <string>

#include "config/errors.hpp"

namespace vc::pipeline {

struct Failure {
  ExitCode code = ExitCode::kData;
  std::string message;
};

}  // namespace vc::pipeline
