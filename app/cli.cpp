#include "app/cli.hpp"

#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/version.hpp"
#include "inference/cuda/gpu_info.hpp"

namespace vc::app {

namespace {

// --shard INDEX/COUNT: keep the streams i with i % COUNT == INDEX.
void apply_shard(config::Config& c, const std::string& spec) {
  int index = -1, count = 0;
  char slash = 0;
  std::istringstream in(spec);
  if (!(in >> index >> slash >> count) || slash != '/' || !in.eof() || count < 1 || index < 0 || index >= count) {
    throw UsageError(fmt::format("--shard: '{}' is not INDEX/COUNT with 0 <= INDEX < COUNT", spec));
  }
  std::vector<config::Input> mine;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (int(i % size_t(count)) == index) mine.push_back(c.inputs[i]);
  }
  if (mine.empty() && !c.api.enabled) {  // (a service may start with none: its streams come over the API)
    throw UsageError(fmt::format("--shard {}: no stream of the {} falls to this shard", spec, c.inputs.size()));
  }
  c.inputs = std::move(mine);
}

}  // namespace

std::variant<CommandLine, int> parse_command_line(int argc, char** argv) {
  CLI::App app{"video-classifier: classify live video in real time with a ResNet on cuDNN"};
  app.set_version_flag("--version", fmt::format("video-classifier {} (git {}; {})", kVersion, kGitRevision,
                                                inference::build_versions()));
  app.footer(
      "Examples:\n"
      "  video-classifier --config assets/configs/default.yaml          the bundled model on the sample video\n"
      "  video-classifier --model m.safetensors --input movie.mp4 --output out.mp4\n"
      "  video-classifier --input cam1.mp4 --input rtsp://cam2/stream --output 'out/{stream}.mp4'\n"
      "Exit codes: 0 ok, 64 usage, 65 bad data, 66 missing input, 69 unavailable (no GPU, element, camera),\n"
      "70 internal/GPU fault, 72 broken install, 73 cannot create output, 74 results or video lost (I/O),\n"
      "78 invalid configuration. See README.md.");

  std::string config_path, output, model, log_level;
  std::vector<std::string> inputs, assignments;
  auto* config_opt = app.add_option("-c,--config", config_path, "YAML configuration file (default: built-in defaults)");
  auto* input_opt = app.add_option("-i,--input", inputs,
                                   "input (repeat for several streams): /dev/videoN, a video file, an image/dir/glob, "
                                   "rtsp://…, test[:PATTERN]; NAME=INPUT names its stream (door=rtsp://…)");
  auto* output_opt = app.add_option("-o,--output", output, "output: FILE.mp4|.mkv|.mov, DIR/ (images), display, rtsp://host:PORT/PATH, none");
  app.add_option("-m,--model", model, "model weights (.safetensors)");
  app.add_option("-s,--set", assignments, "override a config key: --set model.top_k=3 (repeatable)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off");
  std::string shard;
  app.add_option("--shard", shard, "INDEX/COUNT: run only the streams i with i % COUNT == INDEX (one replica's share)");

  auto* run = app.add_subcommand("run", "classify the configured input (the default command)")->fallthrough();
  auto* doctor = app.add_subcommand("doctor", "check the driver, CUDA, cuDNN, GPUs, GStreamer, decoders, display and sinks")->fallthrough();
  auto* show = app.add_subcommand("config", "print the effective configuration")->fallthrough();
  CommandLine cl;
  show->add_flag("--keys", cl.list_keys, "list every key with its default and meaning instead");
  auto* evaluate = app.add_subcommand("evaluate", "score a results file against ground truth, or the model on an image "
                                                  "folder")->fallthrough();
  auto* results_opt = evaluate->add_option("--results", cl.results_path, "JSON-lines results written by run");
  auto* truth_opt = evaluate->add_option("--ground-truth", cl.ground_truth, "ground-truth file: one 'frame label' per line");
  auto* images_opt = evaluate->add_option("--images", cl.images, "an image folder DIR/LABEL/*.jpg (a captured dataset's "
                                                                 "split): the model's accuracy on it, through the app's "
                                                                 "own preprocessing and engine");
  results_opt->needs(truth_opt);
  truth_opt->needs(results_opt);
  images_opt->excludes(results_opt)->excludes(truth_opt);
  auto* capture = app.add_subcommand("capture", "save frames of the input as JPEG into a dataset for training: "
                                                "DATASET/SPLIT/LABEL/")->fallthrough();
  capture->footer(
      "Needs --input (or --config). Examples:\n"
      "  video-classifier capture --input /dev/video0 --dataset mine --label mug --fps 5 --to 60\n"
      "  video-classifier capture --input clip.mp4 --dataset mine --label keys --from 12 --to 40\n"
      "  video-classifier capture --input rtsp://cam/stream --dataset gate --label open --fps 1 --max 200\n"
      "  video-classifier capture --config yard.yaml --region gate --dataset gate --label closed --fps 1 --to 600\n"
      "It says how many images it has written as it goes; Ctrl-C stops it (what is written stays).\n"
      "Then: $(scripts/tools-env.sh) tools/train.py --data mine --out models/mine.safetensors");
  capture->add_option("--dataset", cl.capture.dataset, "the dataset folder (created; added to)")->required();
  capture->add_option("--label", cl.capture.label, "the label of every frame taken")->required();
  capture->add_option("--from", cl.capture.from_s, "start at this stream time (s)");
  capture->add_option("--to", cl.capture.to_s, "stop at this stream time (s)");
  capture->add_option("--every", cl.capture.every, "take every Nth frame");
  capture->add_option("--fps", cl.capture.fps, "take frames at this rate instead (per second of stream time)");
  capture->add_option("--split", cl.capture.split, "splits and their shares, by blocks of stream time")
      ->capture_default_str();
  capture->add_option("--block", cl.capture.block_s, "seconds of stream time that go to one split together")
      ->capture_default_str();
  capture->add_option("--max", cl.capture.max, "stop after this many frames (0: no limit)");
  capture->add_option("--region", cl.capture.region,
                      "save only this region of the picture (one of the input's regions, or the one --box gives): what "
                      "its model classifies");
  capture->add_option("--box", cl.capture.box, "the region's box, X,Y,W,H in pixels of the picture as shown or 0-1 "
                                               "fractions (with --region: its name)")->delimiter(',')->expected(4);
  evaluate->add_flag("--smoothed", cl.smoothed, "score the smoothed label (over the last frames: what label changes and "
                                                "event rules use) instead of each frame's top-1 (the overlay's headline)");
  auto* diagnose = app.add_subcommand("diagnose", "run the model layer by layer on the GPU beside the CPU reference and "
                                                  "name the first layer that goes wrong (NaN troubleshooting)")->fallthrough();
  diagnose->add_option("--image", cl.frame_path, "the frame to use: an image file (default: the input's first frame)");
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
  if (doctor->parsed()) cl.command = "doctor";
  if (show->parsed()) cl.command = "config";
  if (evaluate->parsed()) cl.command = "evaluate";
  if (diagnose->parsed()) cl.command = "diagnose";
  if (capture->parsed()) cl.command = "capture";
  if (evaluate->parsed() && cl.images.empty() && cl.results_path.empty()) {
    std::cerr << "video-classifier evaluate: give --results with --ground-truth, or --images DIR\n";
    return static_cast<int>(ExitCode::kUsage);
  }
  const bool runs = cl.command == "run";
  if (runs && argc == 1 + (run->parsed() ? 1 : 0)) {
    std::cerr << "video-classifier: nothing to classify: give --input (a video file, /dev/video0, rtsp://…, test) "
                 "or --config FILE\n  e.g. video-classifier --config assets/configs/default.yaml\nRun with --help for usage.\n";
    return static_cast<int>(ExitCode::kUsage);
  }
  if (config_opt->count() && config_path.empty()) throw UsageError("--config: empty");
  if (output_opt->count() && output.empty()) throw UsageError("--output: empty (give FILE.mp4, DIR/, display, rtsp://HOST:PORT/PATH or none)");

  if (!config_path.empty()) cl.config = config::load_config(config_path);
  cl.input_given = input_opt->count() > 0 || !config_path.empty();
  if (input_opt->count()) {
    // Each --input is one stream, with the file's `input:` section as its defaults.
    std::vector<config::Input> streams;
    for (const auto& given : inputs) {
      config::Input in = cl.config.input;
      in.name.clear();
      // NAME=SOURCE names the stream (--input door=rtsp://cam/stream), unless the whole text is a file's path.
      std::string spec = given, name;
      static const std::regex named(R"(^([A-Za-z0-9_.\-]{1,64})=(.+)$)");
      std::smatch m;
      std::error_code ec;
      if (std::regex_match(given, m, named) && !std::filesystem::exists(given, ec)) {
        name = m[1].str();
        spec = m[2].str();
      }
      config::set_input(in, spec);
      if (!name.empty()) in.name = name;
      streams.push_back(in);
    }
    cl.config.inputs = std::move(streams);
    cl.config.explicit_keys["input.kind"] = "--input";
  }
  if (!output.empty()) config::set_output(cl.config, output);
  if (!model.empty()) {
    cl.config.model.weights = model;
    cl.config.explicit_keys["model.weights"] = "--model";
  }
  for (const auto& a : assignments) config::apply_override(cl.config, a);
  if (!log_level.empty()) config::apply_override(cl.config, "logging.level=" + log_level);
  config::validate(cl.config);  // names every stream by its place in the whole list, before sharding
  if (!shard.empty()) apply_shard(cl.config, shard);
  log::set_level(cl.config.logging.level);
  if (!cl.config.logging.file.empty()) log::add_file_sink(cl.config.logging.file);
  return cl;
}

}  // namespace vc::app
