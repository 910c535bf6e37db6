// The application's configuration: typed, documented, with a default for every key.
// load_config() maps a YAML file onto it (rejecting unknown keys, wrong types and out-of-range values with
// file:line:column and the key path); apply_override() applies a command-line `key.path=value`. Every choice
// is an enum here, parsed once by the schema (config.cpp), so the rest of the code never compares strings.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace vc::config {

using Rgb = std::array<int, 3>;  // 0..255 each, in R, G, B order

enum class InputKind { Webcam, File, Uri, Image, Test };
enum class DropPolicy { Auto, Drop, Block };  // auto: live sources drop the stalest frame, files block
enum class Decoder { Auto, Gpu, Cpu };        // which decoders may decode a compressed stream
enum class Live { Auto, Yes, No };
enum class OnDamage { Fail, Warn };           // a damaged file: exit 65, or classify what decodes and say so            // auto: by the source (cameras, rtsp/udp/srt/rtmp live; files, http finite)
enum class OutputKind { File, Images, Display, Rtsp, None };
enum class Codec { Auto, X264, Nvh264 };
enum class Resize { Stretch, Crop, Letterbox };
enum class Device { Auto, Cuda, Cpu };
enum class Precision { Strict, Tf32Stem };
enum class Corner { TopLeft, TopRight, BottomLeft, BottomRight };
enum class Headline { Smoothed, Top1 };

// The names the configuration uses for each choice ("webcam", "letterbox", …).
const char* name(InputKind v);
const char* name(DropPolicy v);
const char* name(Decoder v);
const char* name(Live v);
const char* name(OnDamage v);
const char* name(OutputKind v);
const char* name(Codec v);
const char* name(Resize v);
const char* name(Device v);
const char* name(Precision v);
const char* name(Corner v);
const char* name(Headline v);

struct Reconnect {
  int attempts = 10;                      // restarts after a live source fails or stalls; 0 = without limit
  double delay_s = 1;                     // first wait before a restart; doubles each time
  double max_delay_s = 30;                // longest wait between restarts
};

// A part of a stream's picture classified on its own, by a model of its own (a gate, a doormat, a parking space).
struct Region {
  std::string name;                       // names its results, events, topics and metrics
  std::array<double, 4> box{0, 0, 0, 0};  // x, y, width, height: pixels of the picture as shown, or all four 0-1: fractions
  std::string model = "default";          // a name of `models:` ("default" = `model:`)
  int every = 1;                          // classify every Nth frame

  // Whether the box is given as fractions of the picture (every value within 0..1) rather than pixels.
  [[nodiscard]] bool fractions() const {
    return std::all_of(box.begin(), box.end(), [](double v) { return v >= 0 && v <= 1; });
  }
  bool operator==(const Region&) const = default;
};

// One stream. `inputs:` is a list of these; `input:` is the one-stream form and the defaults of every entry.
struct Input {
  std::string name;                       // "" = stream0, stream1, … (by position)
  InputKind kind = InputKind::Test;
  std::string device = "/dev/video0";     // webcam: V4L2 device path
  std::string path;                       // file: video path; image: image file, directory or glob
  std::string uri;                        // uri: rtsp://, http(s)://, file://
  std::string pattern = "smpte";          // test: videotestsrc pattern name
  int width = 0;                          // requested width; 0 = the source's own
  int height = 0;                         // requested height; 0 = the source's own
  double fps = 0;                         // requested frame rate; 0 = the source's own
  bool loop = false;                      // file/image: start again at the end
  bool realtime = false;                  // file: deliver frames at the file's frame rate, as a camera would
  Live live = Live::Auto;                 // live sources drop stale frames and restart; finite ones end and never drop
  OnDamage on_damage = OnDamage::Fail;    // a file with frames lost or decoded from damaged data
  DropPolicy drop = DropPolicy::Auto;
  Decoder decoder = Decoder::Auto;
  int64_t max_frames = 0;                 // stop after this many frames; 0 = until the end
  double stall_timeout_s = 10;            // no frame for this long: a live source restarts, a file fails; 0 = off
  double start_timeout_s = 20;            // from a (re)start to the first frame, the stall allowance; 0 = stall_timeout_s
  Reconnect reconnect;
  std::vector<Region> regions;            // parts classified on their own; none: the whole picture
  bool whole = false;                     // with regions: classify the whole picture too (by `model:`)
};

struct Output {
  OutputKind kind = OutputKind::None;
  std::string path = "out/labelled.mp4";  // file: .mp4/.mkv/.mov, may hold {stream}; images: a directory
  bool tiled = false;                     // all streams in one mosaic (file, display, rtsp)
  int width = 0, height = 0;              // output size; 0 = the frame's own (a mosaic: 1920x1080)
  Codec codec = Codec::Auto;
  int bitrate_kbps = 4000;
  double fragment_s = 0;                  // MP4: write a fragment every this many seconds (crash-safe); 0 = off
  std::string rtsp_address = "0.0.0.0";   // rtsp: address the server listens on (0.0.0.0 = all interfaces)
  int rtsp_port = 8554;
  std::string rtsp_path = "/classify";
  std::string results;                    // JSON-lines results file (may hold {stream}); "" = none, "-" = stdout
  bool results_timing = false;            // results lines carry the per-stage latency breakdown
  // Frames the model is unsure about, kept for review (the next training set): DIR/LABEL/*.jpg and collect.jsonl.
  std::string collect_dir;                // "" = off
  double collect_below = 0.5;             // a frame whose top-1 confidence is below this
  double collect_per_minute = 6;          // at most this many per stream per minute of stream time
  int collect_max_frames = 2000;          // frames waiting for review at most: beyond, the oldest are dropped (counted)
};

struct Model {
  std::string weights;                    // "" = the bundled default model
  std::string labels;                     // "" = the labels stored in the model file (else "class N")
  std::string architecture = "auto";
  int input_size = 224;                   // square model input, pixels
  Resize resize = Resize::Crop;
  double crop_ratio = 0.875;              // crop: resize shorter side to input_size / crop_ratio (224/256)
  std::array<double, 3> mean{0.485, 0.456, 0.406};  // per channel (RGB), in 0..1 units
  std::array<double, 3> std{0.229, 0.224, 0.225};   // per channel (RGB), in 0..1 units
  int top_k = 5;
  double bn_eps = 1e-5;
};

struct Inference {
  Device device = Device::Auto;
  int gpu_id = 0;
  // Several engines, one per entry, each on its GPU (a GPU may be named twice); empty = the one GPU of gpu_id.
  std::vector<int> gpus;
  bool all_gpus = false;                  // inference.gpus: all — one engine per GPU of the machine
  int batch_size = 1;                     // most frames per forward pass, from any streams
  double batch_timeout_ms = 10;           // longest wait to fill a batch once its first frame is there
  Precision precision = Precision::Strict;
  bool autotune = true;
  bool tune_in_background = true;         // autotune: classify at once, switch to the tuned engine once built
  std::string autotune_cache = "~/.cache/video-classifier/algorithms.json";  // "" = no cache
  int workspace_mb = 256;
  bool deterministic = false;
  bool cuda_graph = true;
  std::map<std::string, int> algorithms;  // per-layer algorithm override: layer name -> cuDNN algo number
  int cpu_threads = 0;                    // CPU engine threads; 0 = all cores
};

struct Overlay {
  bool enabled = true;
  Headline headline = Headline::Top1;
  double font_scale = 0.6;
  Corner position = Corner::TopLeft;
  Rgb text_color{255, 255, 255};
  Rgb bar_color{0, 200, 80};
  Rgb background_color{0, 0, 0};
  double background_alpha = 0.7;          // 0 = no panel, 1 = opaque (a backing that keeps text legible on busy pictures)
  bool show_fps = true;
  bool show_latency = true;
};

struct Smoothing {
  int window = 5;                         // EMA window in frames (alpha = 2/(window+1)); 1 = no smoothing
  double threshold = 0.3;                 // smoothed confidence below this is reported as "uncertain"
};

struct Logging {
  std::string level = "info";
  std::string file;                       // also log to this file; "" = stderr only
  double perf_interval_s = 5;             // live runs: a one-line performance report this often; 0 = off
  double progress_interval_s = 10;        // files, when stderr is not a terminal: a progress line this often; 0 = off
};

struct Mqtt {
  bool enabled = false;
  std::string host = "127.0.0.1";
  int port = 1883;
  std::string topic_prefix = "video-classifier";
  std::string client_id;                  // "" = video-classifier-<host>-<pid>
  int qos = 1;                            // 0 or 1
  double result_interval_s = 1;           // per-stream result messages at most this often; 0 = every frame
  std::string username, password_file;    // password read from a file, never from the config itself
  std::string tls_ca_file, tls_cert_file, tls_key_file;  // TLS when tls_ca_file is set
  bool tls_insecure = false;              // skip the server host name check (testing only)
  int keepalive_s = 30;
  int buffer_messages = 10000;            // messages held while the broker is away; the oldest are dropped beyond
};

struct Metrics {
  bool enabled = false;                   // HTTP /metrics (Prometheus), /healthz, /readyz
  std::string address = "127.0.0.1";
  int port = 9464;
  double stall_s = 30;                    // /healthz fails when a running stream's last frame is older than this
};

// The REST API and web page (service/), on the metrics server's address and port.
struct Api {
  bool enabled = false;
  std::string token_file;                 // the bearer token for changes (else VC_API_TOKEN; neither: no changes)
  bool protect_reads = false;             // reads need the token too
  std::vector<std::string> allowed_dirs;  // where file and image inputs added over the API may read
  std::string state_file;                 // the streams as changed at runtime; a restart starts them
  int max_streams = 64;                   // streams at once, added ones included (removed ones free their place)
  int max_body_kb = 64;
  double rate_per_s = 10;                 // changes per second per client
  int mjpeg_clients = 8;
  int live_clients = 64;                  // live video viewers (live.mp4) and result streams at once, in all
  int live_clients_per_stream = 16;       // and of one stream
  double snapshot_interval_s = 0.5;
  // The HTTP server's bounds (with or without the API): Host names it answers to besides localhost and IP addresses,
  // connections at once in all and from one client address.
  std::vector<std::string> allowed_hosts;
  int max_connections = 512;
  int max_connections_per_client = 32;
};

// A rule that turns what a stream shows into events a person can act on (pipeline/events/).
struct EventRule {
  std::string name;
  std::vector<std::string> labels;        // any of these, as the smoothed label ("*": any label)
  std::vector<std::string> streams;       // empty = every stream
  std::vector<std::string> regions;       // empty = the whole picture; else these regions (by name) only
  double min_confidence = 0.5;            // the smoothed score it must have
  double min_duration_s = 1;              // how long it must hold before an event opens
  double cooldown_s = 10;                 // after an event ends, no new one of this rule on that stream for this long
  double max_duration_s = 600;            // an event open this long is ended (a new one may open after the cooldown)
};

struct Events {
  std::string dir = "events";             // clips, snapshots, events.jsonl and the retention index (per stream folders)
  std::vector<EventRule> rules;
  double pre_s = 5;                       // seconds before an event's start that its clip holds
  double post_s = 5;                      // seconds after its end
  double release_s = 1;                   // hysteresis: an event ends only after its rule has not held for this long
  double update_s = 10;                   // an "update" message while an event is open, this often
  bool clips = true;                      // a clip per event: the stream's own packets, remuxed
  int buffer_mb = 64;                     // per stream: the packets kept for pre_s
  bool snapshots = true;                  // a JPEG of the peak frame and a thumbnail
  bool snapshots_clean = false;           // the snapshot without the overlay
  int thumbnail_px = 320;                 // the thumbnail's width
  double retain_days = 0;                 // delete clips and snapshots older than this; 0 = keep
  double retain_gib = 0;                  // keep the folder under this size, oldest first; 0 = no limit
};

// Teaching a model from the page (service/api_datasets.cpp, service/train_job.hpp): where the labelled frames and the
// trained candidates go — the app's own folders, never an input's.
struct Teach {
  std::string datasets_dir = "datasets";  // DIR/MODEL/{train,val}/LABEL/*.jpg, labels.txt, manifest.jsonl
  std::string models_dir = "models";      // DIR/MODEL/candidate-UTC.safetensors and its card (.json)
  std::string split = "train=0.8,val=0.2";
  double block_s = 10;                    // seconds of stream time that go to one split together
  int epochs = 15;                        // a training job's most epochs (early stopping may end it sooner)
  std::string python;                     // the tools' Python ("" = $VC_TOOLS_VENV, ~/.cache/…/tools-venv, python3)
  std::string trainer;                    // tools/train.py ("" = looked up beside the app, as the assets are)
};

struct Config {
  Input input;                            // the `input:` section: the one stream, or the defaults of `inputs:`
  std::vector<Input> inputs{Input{}};     // the streams (never empty); without `inputs:` it is {input}
  Output output;
  Model model;                            // the `default` model
  std::map<std::string, Model> models;    // the other models, by name (`models:`; its `default` entry is `model:`)
  Inference inference;
  Overlay overlay;
  Smoothing smoothing;
  Logging logging;
  Mqtt mqtt;
  Metrics metrics;
  Api api;
  Events events;
  Teach teach;
  // The models whose weights api.state_file's deployed_models put in place at the start: the weights the config named
  // (what a later save compares with, and what SIGHUP compares the config file read again with).
  std::map<std::string, std::string> configured_weights;
  // The key paths a file, flag or --set gave (e.g. "model.input_size"), each with where it came from ("config.yaml",
  // "--set", "--input"); a key set on one stream ("inputs.2.fps") is recorded as "input.fps" too.
  std::map<std::string, std::string> explicit_keys;

  [[nodiscard]] bool is_set(const std::string& key_path) const { return explicit_keys.count(key_path) > 0; }
};

// Parses YAML text; `origin` names it in errors (a file path, or "<string>"); relative paths in it resolve
// against `base_dir` ("" = leave them relative to the working directory). Throws vc::ConfigError.
Config parse_config(const std::string& yaml_text, const std::string& origin = "<string>", const std::string& base_dir = "");

// Reads and parses a YAML file; relative paths in it are relative to the file's directory.
// Throws vc::NoInputError if it can't be read, vc::ConfigError if invalid.
Config load_config(const std::string& path);

// Applies "key.path=value". A string key takes the text as it is (quote it to have YAML unquote it); other keys
// take YAML (3, true, [1,2,3], {a: 1}). `input.KEY` sets KEY on every stream, `inputs.N.KEY` on stream N.
// Throws vc::ConfigError (an unknown key names the closest known ones).
void apply_override(Config& config, const std::string& assignment);

// Checks what single keys can't (a file input needs input.path, …) and names the streams. Call after all
// overrides. Throws vc::ConfigError naming the keys.
void validate(Config& config);

// The command line's shorthands. --input: /dev/videoN -> webcam; scheme:// -> uri; "test" or "test:PATTERN"
// -> test; a directory, glob or image file (.jpg/.jpeg/.png/.bmp) -> image; anything else -> file.
void set_input(Input& input, const std::string& spec);
// --output: "none", "display", rtsp://HOST:PORT/PATH -> rtsp server; DIR/ or a name with %s or an image
// extension -> images; a .mp4/.mkv/.mov path -> file. Throws vc::UsageError for anything else.
void set_output(Config& config, const std::string& spec);

// Every key as (path, default value as YAML, description); for `video-classifier config --keys`, README and tests.
struct KeyDoc {
  std::string path;
  std::string default_value;
  std::string description;
};
std::vector<KeyDoc> describe_keys();

// The whole configuration as YAML (what `video-classifier config` prints). With `origins` (key path -> where its value
// came from), each key is followed by a comment saying so ("# default" for the others).
std::string to_yaml(const Config& config, const std::map<std::string, std::string>* origins = nullptr);

// "~/x" -> "$HOME/x"; other paths unchanged.
std::string expand_home(const std::string& path);

// Whether an images output path names one file ("labelled.jpg": one image in, one file out) rather than a folder
// or a %s pattern.
bool single_image_output(const std::string& path);

// A stream's name put into a path or topic template: "out/{stream}.mp4" -> "out/cam1.mp4".
std::string for_stream(const std::string& path_template, const std::string& stream_name);

// The configuration as `name`'s model sees it: `model` is that model's section, and its explicitly set keys are
// recorded as "model.KEY" (what the model file's card may not override). "default": the configuration as it is.
// Throws vc::ConfigError for a name `models:` does not have.
Config for_model(const Config& config, const std::string& name);
// The models the streams use ("default" first when any stream or the API classifies whole pictures), each once.
std::vector<std::string> models_in_use(const Config& config);
// A region's box in whole pixels of a picture `width` x `height` as shown; nullopt when it is not inside it.
struct PixelBox {
  int x = 0, y = 0, width = 0, height = 0;
};
std::optional<PixelBox> region_pixels(const Region& region, int width, int height);
// "region 'gate': box [10, 10, 700, 50] is not inside the 640x480 picture": why region_pixels gave nothing.
std::string region_outside(const Region& region, int width, int height);
// region_outside() of the first of `regions` not inside the picture, or nullopt.
std::optional<std::string> regions_outside(const std::vector<Region>& regions, int width, int height);
// Checks a stream's regions (names, boxes, every) against the models `config` has; `key` names the stream's section.
void validate_regions(const Config& config, const Input& input, const std::string& key);

// A name that goes into file names, MQTT topics and URLs (streams, rules, regions, models): 1-64 letters, digits,
// '_', '-' or '.', not only dots.
bool valid_stream_name(const std::string& name);

// The position of the first byte of `text` that is not part of well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or npos. (Text that goes into JSON, MQTT and YAML must be UTF-8.)
size_t invalid_utf8_at(std::string_view text);

// One stream's own checks (what validate() does for each entry of inputs:), its name required. Throws vc::ConfigError.
void validate_stream(const Input& input, const std::string& key);
// One stream from a mapping of input keys (YAML or JSON text, e.g. a request's body), on `base`'s `input:` defaults,
// checked as an entry of `inputs:` is (the same errors); its name is required. Throws vc::ConfigError.
Input parse_input(const Config& base, const std::string& text, const std::string& origin);
// `input` with its regions and `whole` replaced by those of a mapping {regions: [...], whole: …} (YAML or JSON text; a
// key left out keeps its value), checked as validate_regions does. Throws vc::ConfigError.
Input with_regions(const Config& base, const Input& input, const std::string& text, const std::string& origin);
// A stream as the mapping of its keys (flow YAML; parse_input reads it back on `base`): its name, its kind and the
// keys whose values differ from `base`'s (the config's `input:` defaults).
std::string input_yaml(const Input& input, const Input& base = Input{});
// The streams file (api.state_file): `inputs:` as a YAML list, and `added_over_api:` the names of those added over
// the API (SIGHUP leaves them be). save: written whole or not at all (a temporary file renamed), readable by its
// owner only (a camera's URI may hold its password). load: replaces config.inputs, each stream checked as in a
// config file. Throws vc::IoError / vc::ConfigError.
// `deployed_models:` the weights deployed over the API (PUT /api/v1/models/NAME), each with the weights the config
// named when it was deployed (`over`): load puts them in the model's place while the config still names `over` (an
// edited model.weights wins), and only while the file is there (else said, and the config's weights are used).
struct DeployedModel {
  std::string name, weights, over;
};
void save_inputs(const std::vector<Input>& inputs, const std::string& path, const Input& base = Input{},
                 const std::vector<std::string>& added_over_api = {}, const std::vector<DeployedModel>& deployed = {});
void load_inputs(Config& config, const std::string& path);
std::vector<std::string> load_added_over_api(const std::string& path);

}  // namespace vc::config

namespace vc::config {

// The bundled file `relative` ("models/resnet18-fashion-mnist.safetensors") of the assets/ folder, looked up in
// $VC_ASSETS_DIR, next to the installed binary (../share/video-classifier/assets), in the build tree's source and
// in the working directory. Throws vc::NoInputError listing where it looked.
std::string bundled_asset(const std::string& relative);

}  // namespace vc::config
