#include "service/api.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/redact.hpp"
#include "config/thread_name.hpp"
#include "config/version.hpp"
#include "service/api_views.hpp"

namespace vc::service {

namespace fs = std::filesystem;
using json = nlohmann::json;
using http::Access;
using http::Lane;
using http::Request;
using http::Response;
using pipeline::RequestError;
using pipeline::StreamState;
using namespace std::chrono_literals;

namespace {

// How long DELETE waits for the stream's outputs to be finalized before it answers 202 (they still will be).
constexpr auto kRemoveWait = 20s;
// How long a snapshot request waits for the stream's next frame.
constexpr auto kSnapshotWait = 1s;
constexpr int kMaxSnapshotWidth = 4096;
// A live view's pictures waiting for a slow viewer; beyond, it skips pictures.
constexpr size_t kLiveQueueBytes = 4 << 20;

}  // namespace

Api::Api(const config::Api& settings, pipeline::RunControl& run)
    : settings_(settings), run_(run), access_(settings), allowed_dirs_(settings.allowed_dirs), live_(settings, run) {
  init_teaching();
  std::error_code ec;
  if (!settings_.state_file.empty() && fs::exists(settings_.state_file, ec)) {
    try {
      for (auto& name : config::load_added_over_api(settings_.state_file)) added_over_api_.insert(name);
    } catch (const Error& e) {
      vc::log::get("service")->warn("api: {}: which streams were added over the API is not known: {}",
                                    settings_.state_file, e.what());
    }
  }
}

Api::~Api() { stop(); }

void Api::stop() {
  stopping_ = true;
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> views;
  {
    std::lock_guard lock(views_mutex_);
    views.swap(views_);
  }
  for (auto& [thread, done] : views) thread.join();
}

void Api::state_saved(std::string& warning) {
  try {
    save_state();
  } catch (const Error& e) {
    warning = fmt::format("the change is made, but not kept for a restart: {}", e.what());
    vc::log::get("service")->error("api: {}", warning);
  }
}

bool Api::configured_weights(const std::string& model, std::string& weights) const {
  const auto& cfg = run_.config();
  if (const auto it = cfg.configured_weights.find(model); it != cfg.configured_weights.end()) {
    weights = it->second;
    return true;
  }
  try {
    weights = config::for_model(cfg, model).model.weights;
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

void Api::save_state() {
  if (settings_.state_file.empty()) return;
  const auto inputs = run_.inputs();
  std::vector<std::string> added;
  for (const auto& in : inputs) {
    if (added_over_api_.count(in.name)) added.push_back(in.name);
  }
  // The weights deployed over the API: a restart loads them (while the config names what it named then).
  std::vector<config::DeployedModel> deployed;
  for (const auto& m : run_.models()) {
    std::string configured;
    if (!configured_weights(m.name, configured)) continue;
    // (the bundled model, never deployed over: nothing to keep)
    if (m.current.weights == configured || (configured.empty() && m.history.empty())) continue;
    std::error_code ec;
    const auto absolute = fs::absolute(m.current.weights, ec);
    deployed.push_back({m.name, ec ? m.current.weights : absolute.lexically_normal().string(), configured});
  }
  config::save_inputs(inputs, settings_.state_file, run_.config().input, added, deployed);
}

Response Api::add(const Request& req) {
  config::Input input;
  try {
    // JSON is what the API speaks (a YAML mapping would do as well: the body is read as the config file is).
    const auto body = json::parse(req.body);
    if (!body.is_object()) return error_reply(422, "the body must be a JSON object: an `inputs:` entry");
    input = config::parse_input(run_.config(), body.dump(), "request");
  } catch (const json::parse_error& e) {
    return error_reply(400, "the body is not JSON: " + json_error_text(e));
  } catch (const ConfigError& e) {
    return error_reply(422, e.what(), key_of(e));
  }
  std::lock_guard change(change_mutex_);
  try {
    const auto opened = allowed_dirs_.open(input);  // the file it reads, checked and opened here
    run_.add_stream(input, opened);
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what(), e.status() == 403 ? source_key(input) : "");
  } catch (const ConfigError& e) {
    return error_reply(422, e.what(), key_of(e));
  } catch (const Error& e) {  // it cannot start: a file that is not there, a camera that is not plugged in
    return error_reply(422, e.what(), source_key(input));
  }
  added_over_api_.insert(input.name);
  json view = json::object();
  if (auto s = find_stream(run_, input.name)) view = stream_view(*s, run_);
  std::string warning;
  state_saved(warning);
  if (!warning.empty()) view["warning"] = warning;
  vc::log::get("service")->info("api: stream {} added by {}", input.name, req.client);
  return reply(201, view);
}

Response Api::regions(const std::string& name) {
  const auto now = run_.regions(name);
  json list = json::array();
  std::vector<pipeline::StreamStats::RegionStat> stats;
  if (const auto s = find_stream(run_, name)) stats = s->region_stats();
  for (const auto& r : now.input.regions) {
    json item{{"name", r.name}, {"box", r.box}, {"model", r.model}, {"every", r.every}};
    if (const auto px = now.width > 0 ? config::region_pixels(r, now.width, now.height) : std::nullopt) {
      item["pixels"] = {px->x, px->y, px->width, px->height};
    }
    const auto st = std::find_if(stats.begin(), stats.end(), [&](const auto& x) { return x.region == r.name; });
    item["label"] = st != stats.end() ? json(st->current.label) : json(nullptr);
    item["score"] = st != stats.end() ? json(rounded(st->current.score, 1e6)) : json(nullptr);
    list.push_back(item);
  }
  return reply(200, {{"stream", name}, {"whole", now.input.regions.empty() || now.input.whole}, {"regions", list},
                     {"width", now.width}, {"height", now.height}});
}

Response Api::set_regions(const Request& req, const std::string& name) {
  std::lock_guard change(change_mutex_);
  try {
    const auto body = json::parse(req.body);
    if (!body.is_object()) return error_reply(422, "the body must be a JSON object: {\"regions\": [...], \"whole\": …}");
    const auto now = run_.regions(name);
    run_.set_regions(name, config::with_regions(run_.config(), now.input, body.dump(), "request"));
  } catch (const json::parse_error& e) {
    return error_reply(400, "the body is not JSON: " + json_error_text(e));
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  } catch (const ConfigError& e) {
    return error_reply(422, e.what(), key_of(e));
  }
  std::string warning;
  state_saved(warning);
  vc::log::get("service")->info("api: stream {}'s regions set by {}", name, req.client);
  auto view = regions(name);
  return view;
}

Response Api::remove(const std::string& name) {
  std::lock_guard change(change_mutex_);
  bool finalized = false;
  try {
    finalized = run_.remove_stream(name, kRemoveWait);
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  }
  added_over_api_.erase(name);
  json body{{"removed", name}, {"finalized", finalized}};
  std::string warning;
  state_saved(warning);
  if (!warning.empty()) body["warning"] = warning;
  vc::log::get("service")->info("api: stream {} removed", name);
  return reply(finalized ? 200 : 202, body);
}

Response Api::status() {
  const auto streams = run_.streams();
  int64_t frames = 0;
  int running = 0;
  for (const auto& s : streams) {
    frames += s->classified;
    running += s->state == StreamState::Running || s->state == StreamState::Reconnecting ? 1 : 0;
  }
  json engines = json::array();
  int64_t batches = 0;
  for (const auto& e : run_.engines()) {
    batches += e.stats->batches.load();
    engines.push_back({{"engine", e.engine}, {"gpu", e.gpu}, {"name", e.name}, {"batches", e.stats->batches.load()},
                       {"frames", e.stats->frames.load()}, {"failed", !e.failure.empty()}, {"failure", e.failure}});
  }
  json models = json::array({"default"});  // what a region may name (models: beside model:)
  for (const auto& [name, m] : run_.config().models) models.push_back(name);
  json deployed = json::array();  // the run's models: the weights each has now and had (GET /api/v1/models)
  for (const auto& m : run_.models()) deployed.push_back(model_view(m));
  return reply(200, {{"version", vc::kVersion},
                     {"engine", run_.engine_name()},
                     {"gpu", run_.cuda_device()},
                     {"model", run_.config().model.architecture},
                     {"models", models},
                     {"model_versions", deployed},
                     {"ready", run_.engine().ready.load()},
                     {"uptime_s", std::chrono::duration<double>(pipeline::Clock::now() - started_).count()},
                     {"streams_running", running},
                     {"max_streams", settings_.max_streams},
                     {"frames", frames},
                     {"batches", batches},
                     {"engines", engines},
                     {"changes_allowed", access_.changes_allowed()},
                     {"token_for_reads", settings_.protect_reads},
                     {"snapshot_interval_s", settings_.snapshot_interval_s},
                     {"events", run_.events() != nullptr}});
}

Response Api::snapshot(const Request& req, const std::string& name) {
  int width = 0;
  if (req.has_param("width")) {
    try {
      width = std::stoi(req.param("width"));
    } catch (const std::exception&) {
      width = -1;
    }
    if (width < 1 || width > kMaxSnapshotWidth) return error_reply(422, fmt::format("width: 1 to {}", kMaxSnapshotWidth), "width");
  }
  try {
    auto shot = run_.snapshot(name, width, kSnapshotWait, req.param("overlay") == "0");
    if (!shot) return error_reply(503, fmt::format("stream {} has no frame yet", name));
    Response r(200, std::move(shot->jpeg), "image/jpeg");
    r.header("Cache-Control", "no-store");
    // What the picture shows, for a page that labels it (percent-encoded: a label may be any UTF-8 text).
    r.header("X-Label", url_encoded(shot->label));
    r.header("X-Score", fmt::format("{:.4f}", shot->score));
    r.header("X-Frame", std::to_string(shot->frame));
    return r;
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  } catch (const Error& e) {
    return error_reply(500, e.what());
  }
}

// A live view: a thread of its own makes its pictures and pushes them; the server sends what the viewer can take.
Response Api::mjpeg(const Request& req, const std::string& name) {
  if (!find_stream(run_, name)) return error_reply(404, fmt::format("no stream is named '{}'", name));
  if (++mjpeg_clients_ > settings_.mjpeg_clients) {
    --mjpeg_clients_;
    return error_reply(503, fmt::format("{} live view(s) are open already (api.mjpeg_clients)", settings_.mjpeg_clients));
  }
  int width = 0;
  try {
    if (req.has_param("width")) width = std::clamp(std::stoi(req.param("width")), 0, kMaxSnapshotWidth);
  } catch (const std::exception&) {
  }
  const auto interval = std::chrono::milliseconds(int64_t(settings_.snapshot_interval_s * 1000));
  auto live = std::make_shared<http::LiveBody>(kLiveQueueBytes);
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread producer([this, live, done, name, width, interval] {
    name_this_thread("vc-mjpeg");
    while (live->open() && !stopping_) {
      const auto next = std::chrono::steady_clock::now() + interval;
      std::optional<pipeline::Snapshot> shot;
      try {
        shot = run_.snapshot(name, width, kSnapshotWait, false);
      } catch (const std::exception&) {
        break;  // the stream is gone
      }
      if (shot) {
        auto part = fmt::format("--frame\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\n\r\n", shot->jpeg.size());
        part += shot->jpeg;
        part += "\r\n";
        if (!live->push(std::move(part))) break;
      }
      const auto s = find_stream(run_, name);
      if (!s || s->closed) break;
      while (live->open() && !stopping_ && std::chrono::steady_clock::now() < next) std::this_thread::sleep_for(20ms);
    }
    live->finish();
    --mjpeg_clients_;
    *done = true;
  });
  {
    std::lock_guard lock(views_mutex_);
    for (auto it = views_.begin(); it != views_.end();) {  // the finished ones joined: the list stays short
      if (*it->second) {
        it->first.join();
        it = views_.erase(it);
      } else {
        ++it;
      }
    }
    views_.emplace_back(std::move(producer), done);
  }
  Response r;
  r.content_type = "multipart/x-mixed-replace; boundary=frame";
  r.header("Cache-Control", "no-store");
  r.live = live;
  return r;
}

Response Api::events(const Request& req) {
  uint64_t since = 0;
  size_t limit = 100;
  try {
    if (req.has_param("since")) since = std::stoull(req.param("since"));
    if (req.has_param("limit")) limit = std::clamp<size_t>(std::stoul(req.param("limit")), 1, 1000);
  } catch (const std::exception&) {
    return error_reply(422, "since and limit are whole numbers");
  }
  const auto list_of = run_.recent_events(req.param("stream"), req.param("type"), since, limit);
  json list = json::array();
  uint64_t last = since;
  std::error_code ec;
  const auto dir = fs::weakly_canonical(fs::absolute(run_.config().events.dir), ec);
  for (const auto& e : list_of) {
    json item = json::parse(e.json, nullptr, false);
    item["seq"] = e.seq;
    for (const char* file : {"snapshot", "thumbnail", "clip"}) {  // where the page fetches them
      if (item.contains(file)) {
        if (auto url = event_file_url(dir, item[file]); !url.empty()) item[std::string(file) + "_url"] = url;
      }
    }
    list.push_back(std::move(item));
    last = std::max(last, e.seq);
  }
  return reply(200, {{"events", list}, {"last", last}});
}

void Api::install(http::Router& router) {
  router.set_gate([this](const Request& head, Access access) { return access_.check(head, access); });
  router.add("GET", "/", Access::Open, Lane::Inline, 0, [](Request&) {
    Response r(200, web_page(), "text/html; charset=utf-8");
    r.header("Content-Security-Policy",
             "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; style-src 'self' 'unsafe-inline'; "
             "script-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'");
    r.header("Cache-Control", "no-store");
    return r;
  });
  install_teaching(router);
  router.add("POST", "/api/v1/session", Access::Change, Lane::Reads, 0, [this](Request&) { return access_.open_session(); });
  router.add("GET", "/api/v1/status", Access::Read, Lane::Reads, 0, [this](Request&) { return status(); });
  router.add("GET", "/api/v1/streams", Access::Read, Lane::Reads, 0, [this](Request&) {
    json list = json::array();
    std::set<std::string> seen;
    auto streams = run_.streams();
    for (auto it = streams.rbegin(); it != streams.rend(); ++it) {  // the latest stream of each name
      if (!seen.insert((*it)->name).second) continue;
      if ((*it)->closed && (*it)->end_reason_text() == "removed") continue;  // (being let go of)
      list.push_back(stream_view(**it, run_));
    }
    std::reverse(list.begin(), list.end());
    return reply(200, {{"streams", list}});
  });
  router.add("GET", "/api/v1/streams/{}", Access::Read, Lane::Reads, 0, [this](Request& req) {
    const auto s = find_stream(run_, req.params[0]);
    if (!s) return error_reply(404, fmt::format("no stream is named '{}'", req.params[0]));
    return reply(200, stream_view(*s, run_));
  });
  router.add("POST", "/api/v1/streams", Access::Change, Lane::Changes, size_t(settings_.max_body_kb) * 1024,
             [this](Request& req) { return add(req); });
  router.add("DELETE", "/api/v1/streams/{}", Access::Change, Lane::Changes, 0, [this](Request& req) { return remove(req.params[0]); });
  router.add("GET", "/api/v1/streams/{}/snapshot.jpg", Access::Read, Lane::Reads, 0,
             [this](Request& req) { return snapshot(req, req.params[0]); });
  router.add("GET", "/api/v1/streams/{}/live.mjpeg", Access::Read, Lane::Reads, 0,
             [this](Request& req) { return mjpeg(req, req.params[0]); });
  router.add("GET", "/api/v1/streams/{}/live.mp4", Access::Read, Lane::Reads, 0,
             [this](Request& req) { return live_.video(req.params[0]); });
  router.add("GET", "/api/v1/streams/{}/results", Access::Read, Lane::Reads, 0,
             [this](Request& req) { return live_.results({req.params[0]}, true); });
  router.add("GET", "/api/v1/results", Access::Read, Lane::Reads, 0, [this](Request& req) {
    std::vector<std::string> names;
    std::istringstream all(req.param("streams"));
    for (std::string name; std::getline(all, name, ',');) {
      if (!name.empty()) names.push_back(name);
    }
    return live_.results(names, false);
  });
  router.add("GET", "/api/v1/streams/{}/regions", Access::Read, Lane::Reads, 0, [this](Request& req) {
    try {
      return regions(req.params[0]);
    } catch (const RequestError& e) {
      return error_reply(e.status(), e.what());
    }
  });
  router.add("PUT", "/api/v1/streams/{}/regions", Access::Change, Lane::Changes, size_t(settings_.max_body_kb) * 1024,
             [this](Request& req) { return set_regions(req, req.params[0]); });
  router.add("GET", "/api/v1/models", Access::Read, Lane::Reads, 0, [this](Request&) { return models(); });
  router.add("PUT", "/api/v1/models/{}", Access::Change, Lane::Changes, size_t(settings_.max_body_kb) * 1024,
             [this](Request& req) { return deploy(req, req.params[0]); });
  router.add("POST", "/api/v1/models/{}/rollback", Access::Change, Lane::Changes, 0,
             [this](Request& req) { return roll_back(req, req.params[0]); });
  router.add("GET", "/api/v1/events", Access::Read, Lane::Reads, 0, [this](Request& req) { return events(req); });
  // The events' snapshots, thumbnails and clips (only regular files under events.dir, reached without a link).
  router.add("GET", "/api/v1/event-files/{*}", Access::Read, Lane::Reads, 0, [this](Request& req) {
    return event_file(run_.config().events.dir, req.params[0], req.header("range"));
  });
  router.add("GET", "/api/v1/config", Access::Read, Lane::Reads, 0, [this](Request&) {
    return reply(200, yaml_to_json(YAML::Load(config::redact_credentials(config::to_yaml(run_.config())))));
  });
}

Reconciled Api::reconcile(const std::vector<config::Input>& wanted) {
  Reconciled out;
  std::lock_guard change(change_mutex_);
  std::map<std::string, config::Input> now;
  for (auto& in : run_.inputs()) {
    if (added_over_api_.count(in.name)) out.kept.push_back(in.name);  // the API's: not the config file's to change
    else now.emplace(in.name, in);
  }
  std::map<std::string, const config::Input*> want;
  for (const auto& in : wanted) want.emplace(in.name, &in);
  auto remove = [&](const std::string& name) {
    try {
      run_.remove_stream(name, kRemoveWait);
      return true;
    } catch (const std::exception& e) {
      out.failed.push_back(fmt::format("{}: {}", name, e.what()));
      return false;
    }
  };
  auto add = [&](const config::Input& in) {  // (the config file's streams are trusted as at the start)
    if (added_over_api_.count(in.name)) {
      out.failed.push_back(fmt::format("{}: a stream added over the API has this name (remove it first)", in.name));
      return false;
    }
    try {
      run_.add_stream(in, nullptr);
      return true;
    } catch (const std::exception& e) {
      out.failed.push_back(fmt::format("{}: {}", in.name, e.what()));
      return false;
    }
  };
  for (const auto& [name, in] : now) {
    auto it = want.find(name);
    if (it == want.end()) {
      if (remove(name)) out.removed.push_back(name);
    } else if (config::input_yaml(*it->second) != config::input_yaml(in)) {
      if (remove(name) && add(*it->second)) out.changed.push_back(name);
    }
  }
  // A stream that ended by itself (a file played to its end) is not started again: it did its job.
  std::set<std::string> ended;
  for (const auto& st : run_.streams()) {
    if (st->closed && st->end_reason_text() != "removed") ended.insert(st->name);
    else ended.erase(st->name);  // (a later stream of that name runs, or was removed)
  }
  for (const auto& in : wanted) {
    if (!now.count(in.name) && !ended.count(in.name) && add(in)) out.added.push_back(in.name);
  }
  std::string warning;
  state_saved(warning);
  return out;
}

}  // namespace vc::service
