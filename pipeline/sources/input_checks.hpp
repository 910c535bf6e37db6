// What kind of input a stream reads, asked before any pipeline is built: whether it is live, whether its file can be
// read at all.
#pragma once
#include <string>

#include "config/config.hpp"

namespace vc::pipeline {

// Whether an input is live (a camera, a network stream, a test pattern, a file paced in real time): live streams
// drop stale frames and restart when they fail.
bool is_live_input(const config::Input& input);

// Throws vc::NoInputError (missing, not a file, unreadable) or vc::DataError (empty) for a video file that cannot be
// read.
void check_readable_file(const std::string& path);

}  // namespace vc::pipeline
