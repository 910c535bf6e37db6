// The application's configuration: typed, documented, with a default for every key.
// load_config() maps a YAML file onto it (rejecting unknown keys, wrong types and out-of-range values with
// file:line:column and the key path); apply_override() applies a command-line `key.path=value`.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vc::config {

using Rgb = std::array<int, 3>;  // 0..255 each, in R, G, B order

struct Input {
  std::string kind = "test";              // webcam | file | uri | image | test
  std::string device = "/dev/video0";     // webcam: V4L2 device path
  std::string path;                       // file: video path; image: image file, directory or glob
  std::string uri;                        // uri: rtsp://, http(s)://, file://
  std::string pattern = "smpte";          // test: videotestsrc pattern name
  int width = 0;                          // requested width; 0 = the source's own
  int height = 0;                         // requested height; 0 = the source's own
  double fps = 0;                         // requested frame rate; 0 = the source's own
  bool loop = false;                      // file/image: start again at the end
  std::string drop = "auto";              // auto (live sources drop, files block) | drop | block
  int64_t max_frames = 0;                 // stop after this many frames; 0 = until the end
};

struct Output {
  std::string kind = "none";              // file | display | rtsp | none
  std::string path = "out/labelled.mp4";  // file: .mp4 or .mkv
  std::string codec = "auto";             // auto (nvh264enc if present, else x264enc) | x264 | nvh264
  int bitrate_kbps = 4000;                // encoder bitrate
  std::string rtsp_address = "0.0.0.0";   // rtsp: address the server listens on (0.0.0.0 = all interfaces)
  int rtsp_port = 8554;                   // rtsp: server port
  std::string rtsp_path = "/classify";    // rtsp: mount point
  std::string results;                    // JSON-lines results file; "" = none, "-" = stdout
};

struct Model {
  std::string weights = "assets/models/resnet18-fashion-mnist.safetensors";
  std::string labels = "assets/labels/fashion-mnist.txt";
  std::string architecture = "auto";      // auto | resnet18 | resnet34 | resnet50 | resnet101 | resnet152 |
                                          // resnext50_32x4d | resnext101_32x8d | wide_resnet50_2 | wide_resnet101_2
  int input_size = 224;                   // square model input, pixels
  std::string resize = "crop";            // stretch | crop (resize shorter side + centre crop) | letterbox
  double crop_ratio = 0.875;              // crop: resize shorter side to input_size / crop_ratio (224/256)
  std::array<double, 3> mean{0.485, 0.456, 0.406};  // per channel (RGB), in 0..1 units
  std::array<double, 3> std{0.229, 0.224, 0.225};   // per channel (RGB), in 0..1 units
  int top_k = 5;                          // labels reported per frame
  double bn_eps = 1e-5;                   // BatchNorm epsilon used when folding
};

struct Inference {
  std::string device = "auto";            // auto (cuda when a GPU is usable, else cpu) | cuda | cpu
  int gpu_id = 0;                         // CUDA device ordinal
  int batch_size = 1;                     // frames per forward pass (up to this many when frames queue up)
  std::string precision = "strict";       // strict (FP32 first/last layers) | tf32_stem (TF32 allowed in stem)
  bool autotune = true;                   // time algorithms on the real shapes at start-up
  std::string autotune_cache = "~/.cache/video-classifier/algorithms.json";  // "" = no cache
  int workspace_mb = 256;                 // cuDNN workspace limit
  bool deterministic = false;             // only deterministic algorithms
  bool cuda_graph = true;                 // capture the forward pass once and replay it
  std::map<std::string, int> algorithms;  // per-layer algorithm override: layer name -> cuDNN algo number
  int cpu_threads = 0;                    // CPU engine threads; 0 = all cores
};

struct Overlay {
  bool enabled = true;
  double font_scale = 0.6;
  std::string position = "top-left";      // top-left | top-right | bottom-left | bottom-right
  Rgb text_color{255, 255, 255};
  Rgb bar_color{0, 200, 80};
  Rgb background_color{0, 0, 0};
  double background_alpha = 0.55;         // 0 = no panel, 1 = opaque
  bool show_fps = true;
  bool show_latency = true;
};

struct Smoothing {
  int window = 5;                         // EMA window in frames (alpha = 2/(window+1)); 1 = no smoothing
  double threshold = 0.3;                 // smoothed confidence below this is reported as "uncertain"
};

struct Logging {
  std::string level = "info";             // trace | debug | info | warn | error | critical | off
  std::string file;                       // also log to this file; "" = stderr only
};

struct Config {
  Input input;
  Output output;
  Model model;
  Inference inference;
  Overlay overlay;
  Smoothing smoothing;
  Logging logging;
};

// Parses YAML text; `origin` names it in errors (a file path, or "<string>"). Throws vc::ConfigError.
Config parse_config(const std::string& yaml_text, const std::string& origin = "<string>");

// Reads and parses a YAML file. Throws vc::NoInputError if it can't be read, vc::ConfigError if invalid.
Config load_config(const std::string& path);

// Applies "key.path=value" (value in YAML syntax: 3, true, [1,2,3], text). Throws vc::ConfigError.
void apply_override(Config& config, const std::string& assignment);

// Checks what single keys can't: a file input needs input.path, and so on. Call after all overrides.
// Throws vc::ConfigError naming the keys.
void validate(const Config& config);

// The command line's shorthands. --input: /dev/videoN -> webcam; scheme:// -> uri; "test" or "test:PATTERN"
// -> test; a directory, glob or image file (.jpg/.jpeg/.png/.bmp) -> image; anything else -> file.
void set_input(Config& config, const std::string& spec);
// --output: "none", "display", rtsp://HOST:PORT/PATH -> rtsp server; anything else -> file path.
void set_output(Config& config, const std::string& spec);

// Every key as (path, default value as YAML, description); for `video-classifier config --keys`, README and tests.
struct KeyDoc {
  std::string path;
  std::string default_value;
  std::string description;
};
std::vector<KeyDoc> describe_keys();

// The whole configuration as YAML (what `video-classifier config` prints).
std::string to_yaml(const Config& config);

// "~/x" -> "$HOME/x"; other paths unchanged.
std::string expand_home(const std::string& path);

}  // namespace vc::config
