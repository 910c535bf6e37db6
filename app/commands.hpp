// The app's commands other than doctor: classify (run), config, evaluate.
#pragma once
#include <functional>
#include <ostream>

#include "app/cli.hpp"

namespace vc::app {

// Runs the configured input through the engine to the configured outputs. Returns the exit code. `reload` reads the
// configuration again (the command line as given): with api.enabled, SIGHUP brings the streams in line with it.
int classify(const config::Config& config, std::function<config::Config()> reload = nullptr);

// Prints the effective configuration (or, with --keys, every key with its default and meaning).
int print_config(const CommandLine& cl, std::ostream& out);

// Runs the model layer by layer on the GPU beside the CPU reference on one frame and names the first bad layer.
// Returns 0 (every layer fine), 65 (a data fault: weights or input), 70 (an algorithm fault).
int diagnose(const CommandLine& cl, std::ostream& out);

// Scores a results file against ground truth — or, with --images, the model on an image folder (DIR/LABEL/*.jpg)
// through the app's own pipeline: frame accuracy, per-class accuracy, confusion matrix.
int evaluate(const CommandLine& cl, std::ostream& out);

// Saves frames of the input as JPEG into a dataset (DATASET/SPLIT/LABEL/), with labels.txt and manifest.jsonl.
int capture(const CommandLine& cl, std::ostream& out);

}  // namespace vc::app
