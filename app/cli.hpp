// The command line (CLI11): which command to run and the configuration it runs with.
#pragma once
#include <string>
#include <variant>
#include <vector>

#include "config/config.hpp"

namespace vc::app {

struct CommandLine {
  std::string command = "run";  // run | doctor | config | evaluate | diagnose
  config::Config config;        // the file (or defaults) with every flag and --set applied, validated
  bool input_given = false;     // --input or --config named what to read (else config.inputs are the defaults)
  bool list_keys = false;       // config --keys
  std::string results_path;     // evaluate --results
  std::string ground_truth;     // evaluate --ground-truth
  bool smoothed = false;        // evaluate --smoothed: score the smoothed label instead of the top-1
  std::string frame_path;       // diagnose --image
  std::string images;           // evaluate --images: an image folder, DIR/LABEL/*.jpg
  struct Capture {              // capture
    std::string dataset, label;
    std::string split = "train=0.8,val=0.2";
    double from_s = 0, to_s = -1, fps = 0, block_s = 5;
    int64_t every = 1, max = 0;
    std::string region;         // only this region of the picture (a region of the input's, or --box's)
    std::vector<double> box;    // x, y, width, height: pixels or fractions
  } capture;
};

// Parses argv. Returns the exit code to leave with instead when parsing ends the program
// (--help/--version: 0; a usage error: 64 with the message on stderr). Throws vc::ConfigError/NoInputError/UsageError.
std::variant<CommandLine, int> parse_command_line(int argc, char** argv);

}  // namespace vc::app
