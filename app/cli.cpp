#include "app/cli.hpp"

#include <iostream>

#include <CLI/CLI.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/version.hpp"

namespace vc::app {

std::variant<CommandLine, int> parse_command_line(int argc, char** argv) {
  CLI::App app{"video-classifier: classify live video in real time with a ResNet on cuDNN"};
  app.set_version_flag("--version", std::string("video-classifier ") + kVersion);
  app.footer(
      "Exit codes: 0 ok, 64 usage, 65 bad data, 66 missing input, 69 unavailable (no GPU, element, camera),\n"
      "70 internal/GPU fault, 72 broken install, 78 invalid configuration. See README.md.");

  std::string config_path, input, output, model, log_level;
  std::vector<std::string> assignments;
  app.add_option("-c,--config", config_path, "YAML configuration file (default: built-in defaults)");
  app.add_option("-i,--input", input, "input: /dev/videoN, a video file, an image/dir/glob, rtsp://…, test[:PATTERN]");
  app.add_option("-o,--output", output, "output: FILE.mp4|.mkv, display, rtsp://host:PORT/PATH, none");
  app.add_option("-m,--model", model, "model weights (.safetensors)");
  app.add_option("-s,--set", assignments, "override a config key: --set model.top_k=3 (repeatable)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off");

  auto* run = app.add_subcommand("run", "classify the configured input (the default command)")->fallthrough();
  auto* doctor = app.add_subcommand("doctor", "check the driver, CUDA, cuDNN, GPUs, GStreamer and OpenCV");
  auto* show = app.add_subcommand("config", "print the effective configuration")->fallthrough();
  CommandLine cl;
  show->add_flag("--keys", cl.list_keys, "list every key with its default and meaning instead");
  auto* evaluate = app.add_subcommand("evaluate", "score a results file against ground truth")->fallthrough();
  evaluate->add_option("--results", cl.results_path, "JSON-lines results written by run")->required();
  evaluate->add_option("--ground-truth", cl.ground_truth, "ground-truth file: one 'frame label' per line")->required();
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "video-classifier: " << e.what() << "\nRun with --help for usage.\n";
    return static_cast<int>(ExitCode::kUsage);
  }
  (void)run;
  if (doctor->parsed()) cl.command = "doctor";
  if (show->parsed()) cl.command = "config";
  if (evaluate->parsed()) cl.command = "evaluate";

  if (!config_path.empty()) cl.config = config::load_config(config_path);
  if (!input.empty()) config::set_input(cl.config, input);
  if (!output.empty()) config::set_output(cl.config, output);
  if (!model.empty()) cl.config.model.weights = model;
  for (const auto& a : assignments) config::apply_override(cl.config, a);
  if (!log_level.empty()) cl.config.logging.level = log_level;
  config::validate(cl.config);
  log::set_level(cl.config.logging.level);
  if (!cl.config.logging.file.empty()) log::add_file_sink(cl.config.logging.file);
  return cl;
}

}  // namespace vc::app
