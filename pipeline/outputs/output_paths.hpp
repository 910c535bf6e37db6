// No input is ever written over: every file the run would write — video files (and their .partial names), results
// files, labelled images, per stream with {stream} expanded — is compared, by device and inode, with every file it
// reads (video files, file:// URIs, each image of an image input), and an images folder that is an input's folder is
// refused outright.
#pragma once
#include "config/config.hpp"

namespace vc::pipeline {

// Throws vc::UsageError naming the output, the key and the input it would destroy; vc::ConfigError when the video
// and the results would be one file.
void refuse_overwriting_inputs(const config::Config& config);

}  // namespace vc::pipeline
