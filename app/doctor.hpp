// `video-classifier doctor`: checks and prints what the app needs from this machine.
#pragma once
#include <ostream>

#include "config/config.hpp"

namespace vc::app {

// Prints the report to `out`. Returns 0 when everything needed is there, 69 when the install is sound but no
// GPU is usable (the CPU engine still works), 72 when the install is broken (cuDNN, GStreamer elements).
// With MQTT or metrics enabled in `config`, also whether the broker answers and the port is free.
int run_doctor(const config::Config& config, std::ostream& out);

}  // namespace vc::app
