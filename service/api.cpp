#include "service/api.hpp"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/version.hpp"
#include "service/api_views.hpp"

namespace vc::service {

namespace fs = std::filesystem;
using json = nlohmann::json;
using pipeline::RequestError;
using pipeline::StreamState;
using pipeline::StreamStats;
using namespace std::chrono_literals;

namespace {

// How long DELETE waits for the stream's outputs to be finalized before it answers 202 (they still will be).
constexpr auto kRemoveWait = 20s;
// How long a snapshot request waits for the stream's next frame.
constexpr auto kSnapshotWait = 1s;
constexpr int kMaxSnapshotWidth = 4096;

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void error_reply(httplib::Response& res, int status, const std::string& message, const std::string& key = {}) {
  json body{{"error", message}};
  if (!key.empty()) body["key"] = key;
  reply(res, status, body);
}

bool same_text(const std::string& a, const std::string& b) {  // (without an early exit: no timing hint)
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string json_error_text(const json::parse_error& e) {
  const std::string what = e.what();
  const auto at = what.find("] ");
  return at == std::string::npos ? what : what.substr(at + 2);
}

}  // namespace

Api::Api(const config::Api& settings, pipeline::RunControl& run) : settings_(settings), run_(run) {
  if (!settings_.token_file.empty()) {
    std::ifstream in(settings_.token_file);
    if (!in) throw ConfigError(fmt::format("api.token_file: cannot read '{}'", settings_.token_file), "api.token_file");
    std::getline(in, token_);
  } else if (const char* env = std::getenv("VC_API_TOKEN")) {
    token_ = env;
  }
  while (!token_.empty() && std::isspace(static_cast<unsigned char>(token_.back()))) token_.pop_back();
  if (!settings_.token_file.empty() && token_.empty()) {
    throw ConfigError(fmt::format("api.token_file: '{}' is empty", settings_.token_file), "api.token_file");
  }
  for (const auto& d : settings_.allowed_dirs) {
    std::error_code ec;
    const auto canonical = fs::weakly_canonical(fs::absolute(d), ec);
    allowed_dirs_.push_back((ec ? fs::path(d) : canonical).lexically_normal().string());
  }
  auto log = vc::log::get("service");
  if (token_.empty()) log->warn("api: no token (api.token_file, VC_API_TOKEN): the API is read-only");
}

bool Api::allowed(const httplib::Request& req, httplib::Response& res, Access access) {
  if (access == Access::Read && !settings_.protect_reads) return true;
  if (token_.empty()) {
    error_reply(res, 403, "changes are turned off: the service has no token (api.token_file or VC_API_TOKEN)");
    return false;
  }
  const auto header = req.get_header_value("Authorization");
  if (header.rfind("Bearer ", 0) != 0) {
    res.set_header("WWW-Authenticate", "Bearer");
    error_reply(res, 401, "a bearer token is needed (Authorization: Bearer TOKEN)");
    return false;
  }
  if (!same_text(header.substr(7), token_)) {
    error_reply(res, 403, "the token is not the service's");
    return false;
  }
  return true;
}

bool Api::within_rate(const httplib::Request& req, httplib::Response& res) {
  const auto now = std::chrono::steady_clock::now();
  const double burst = std::max(1.0, settings_.rate_per_s);
  std::lock_guard lock(rate_mutex_);
  if (buckets_.size() > 10000) buckets_.clear();  // (a flood of addresses: forget them rather than grow)
  auto [it, fresh] = buckets_.try_emplace(req.remote_addr, Bucket{burst, now});
  Bucket& b = it->second;
  b.tokens = std::min(burst, b.tokens + std::chrono::duration<double>(now - b.at).count() * settings_.rate_per_s);
  b.at = now;
  if (b.tokens < 1) {
    res.set_header("Retry-After", std::to_string(int(std::ceil((1 - b.tokens) / settings_.rate_per_s))));
    error_reply(res, 429, fmt::format("more than {} change(s) per second (api.rate_per_s)", settings_.rate_per_s));
    return false;
  }
  b.tokens -= 1;
  return true;
}

void Api::check_paths(const config::Input& in) const {
  std::string path;
  if (in.kind == config::InputKind::File || in.kind == config::InputKind::Image) path = in.path;
  else if (in.kind == config::InputKind::Uri) path = file_uri_path(in.uri);
  if (path.empty()) return;
  if (path.rfind("file://", 0) == 0) path = file_uri_path(path);
  std::error_code ec;
  // Links and ".." resolved first: the file it would really read must be inside an allowed folder.
  const auto real = fs::weakly_canonical(fs::absolute(path), ec).lexically_normal();
  if (!ec) {
    for (const auto& dir : allowed_dirs_) {
      const auto rel = real.lexically_relative(dir);
      if (!rel.empty() && *rel.begin() != "..") return;
    }
  }
  throw RequestError(403, allowed_dirs_.empty()
                              ? fmt::format("input: '{}': files may not be read over the API (api.allowed_dirs is "
                                            "empty)", path)
                              : fmt::format("input: '{}' is outside api.allowed_dirs", path));
}

void Api::state_saved(std::string& warning) {
  try {
    save_state();
  } catch (const Error& e) {
    warning = fmt::format("the change is made, but not kept for a restart: {}", e.what());
    vc::log::get("service")->error("api: {}", warning);
  }
}

void Api::save_state() {
  if (settings_.state_file.empty()) return;
  config::save_inputs(run_.inputs(), settings_.state_file, run_.config().input);
}

void Api::add(const httplib::Request& req, httplib::Response& res) {
  config::Input input;
  try {
    // JSON is what the API speaks (a YAML mapping would do as well: the body is read as the config file is).
    const auto body = json::parse(req.body);
    if (!body.is_object()) return error_reply(res, 422, "the body must be a JSON object: an `inputs:` entry");
    input = config::parse_input(run_.config(), body.dump(), "request");
  } catch (const json::parse_error& e) {
    return error_reply(res, 400, "the body is not JSON: " + json_error_text(e));
  } catch (const ConfigError& e) {
    return error_reply(res, 422, e.what(), key_of(e));
  }
  std::lock_guard change(change_mutex_);
  try {
    check_paths(input);
    run_.add_stream(input);
  } catch (const RequestError& e) {
    return error_reply(res, e.status(), e.what(), e.status() == 403 ? source_key(input) : "");
  } catch (const ConfigError& e) {
    return error_reply(res, 422, e.what(), key_of(e));
  } catch (const Error& e) {  // it cannot start: a file that is not there, a camera that is not plugged in
    return error_reply(res, 422, e.what(), source_key(input));
  }
  json view = json::object();
  if (auto s = find_stream(run_, input.name)) view = stream_view(*s, run_);
  std::string warning;
  state_saved(warning);
  if (!warning.empty()) view["warning"] = warning;
  vc::log::get("service")->info("api: stream {} added by {}", input.name, req.remote_addr);
  reply(res, 201, view);
}

void Api::remove(const std::string& name, httplib::Response& res) {
  std::lock_guard change(change_mutex_);
  bool finalized = false;
  try {
    finalized = run_.remove_stream(name, kRemoveWait);
  } catch (const RequestError& e) {
    return error_reply(res, e.status(), e.what());
  }
  json body{{"removed", name}, {"finalized", finalized}};
  std::string warning;
  state_saved(warning);
  if (!warning.empty()) body["warning"] = warning;
  vc::log::get("service")->info("api: stream {} removed", name);
  reply(res, finalized ? 200 : 202, body);
}

void Api::snapshot(const httplib::Request& req, httplib::Response& res, const std::string& name) {
  int width = 0;
  if (req.has_param("width")) {
    try {
      width = std::stoi(req.get_param_value("width"));
    } catch (const std::exception&) {
      width = -1;
    }
    if (width < 1 || width > kMaxSnapshotWidth) {
      return error_reply(res, 422, fmt::format("width: 1 to {}", kMaxSnapshotWidth), "width");
    }
  }
  try {
    auto shot = run_.snapshot(name, width, kSnapshotWait);
    if (!shot) return error_reply(res, 503, fmt::format("stream {} has no frame yet", name));
    res.set_header("Cache-Control", "no-store");
    // What the picture shows, for a page that labels it (percent-encoded: a label may be any UTF-8 text).
    res.set_header("X-Label", url_encoded(shot->label));
    res.set_header("X-Score", fmt::format("{:.4f}", shot->score));
    res.set_header("X-Frame", std::to_string(shot->frame));
    res.set_content(std::move(shot->jpeg), "image/jpeg");
  } catch (const RequestError& e) {
    error_reply(res, e.status(), e.what());
  } catch (const Error& e) {
    error_reply(res, 500, e.what());
  }
}

void Api::mjpeg(const httplib::Request& req, httplib::Response& res, const std::string& name) {
  if (!find_stream(run_, name)) return error_reply(res, 404, fmt::format("no stream is named '{}'", name));
  if (++mjpeg_clients_ > settings_.mjpeg_clients) {
    --mjpeg_clients_;
    return error_reply(res, 503, fmt::format("{} live view(s) are open already (api.mjpeg_clients)", settings_.mjpeg_clients));
  }
  int width = 0;
  if (req.has_param("width")) width = std::clamp(std::atoi(req.get_param_value("width").c_str()), 0, kMaxSnapshotWidth);
  const auto interval = std::chrono::milliseconds(int64_t(settings_.snapshot_interval_s * 1000));
  res.set_header("Cache-Control", "no-store");
  res.set_chunked_content_provider(
      "multipart/x-mixed-replace; boundary=frame",
      [this, name, width, interval](size_t, httplib::DataSink& sink) {
        const auto next = std::chrono::steady_clock::now() + interval;
        std::optional<std::string> jpeg;
        try {
          if (auto shot = run_.snapshot(name, width, kSnapshotWait)) jpeg = std::move(shot->jpeg);
        } catch (const std::exception&) {
          return false;  // the stream is gone
        }
        if (jpeg) {
          const auto head = fmt::format("--frame\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\n\r\n", jpeg->size());
          if (!sink.write(head.data(), head.size()) || !sink.write(jpeg->data(), jpeg->size()) || !sink.write("\r\n", 2)) {
            return false;
          }
        }
        const auto s = find_stream(run_, name);
        if (!s || s->closed) {
          sink.done();
          return true;
        }
        std::this_thread::sleep_until(next);
        return sink.is_writable();
      },
      [this](bool) { --mjpeg_clients_; });
}

void Api::install(httplib::Server& server) {
  server.set_payload_max_length(size_t(settings_.max_body_kb) * 1024);
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {  // (413, 404, … said in JSON too)
    if (!res.body.empty()) return;
    error_reply(res, res.status, res.status == 413   ? "the body is too large (api.max_body_kb)"
                                 : res.status == 404 ? "no such page"
                                                     : fmt::format("HTTP {}", res.status));
  });
  // Live views hold a thread each: the pool has room for them and for everything else.
  server.new_task_queue = [n = size_t(settings_.mjpeg_clients) + 8] { return new httplib::ThreadPool(n); };

  server.Get("/", [this](const httplib::Request& req, httplib::Response& res) {
    (void)req;
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' blob: data:; style-src 'self' 'unsafe-inline'; "
                   "script-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(web_page(), "text/html; charset=utf-8");
  });
  server.Get("/api/v1/status", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Read)) return;
    const auto streams = run_.streams();
    int64_t frames = 0;
    int running = 0;
    for (const auto& s : streams) {
      frames += s->classified;
      running += s->state == StreamState::Running || s->state == StreamState::Reconnecting ? 1 : 0;
    }
    const auto& cfg = run_.config();
    json engines = json::array();
    int64_t batches = 0;
    for (const auto& e : run_.engines()) {
      batches += e.stats->batches.load();
      engines.push_back({{"engine", e.engine}, {"gpu", e.gpu}, {"name", e.name}, {"batches", e.stats->batches.load()},
                         {"frames", e.stats->frames.load()}, {"failed", !e.failure.empty()}, {"failure", e.failure}});
    }
    reply(res, 200,
          {{"version", vc::kVersion},
           {"engine", run_.engine_name()},
           {"gpu", run_.cuda_device()},
           {"model", cfg.model.architecture},
           {"ready", run_.engine().ready.load()},
           {"uptime_s", std::chrono::duration<double>(pipeline::Clock::now() - started_).count()},
           {"streams_running", running},
           {"max_streams", settings_.max_streams},
           {"frames", frames},
           {"batches", batches},
           {"engines", engines},
           {"changes_allowed", !token_.empty()},
           {"token_for_reads", settings_.protect_reads},
           {"snapshot_interval_s", settings_.snapshot_interval_s},
           {"events", run_.events() != nullptr}});
  });
  server.Get("/api/v1/streams", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Read)) return;
    json list = json::array();
    std::set<std::string> seen;
    auto streams = run_.streams();
    for (auto it = streams.rbegin(); it != streams.rend(); ++it) {  // the latest stream of each name
      if (!seen.insert((*it)->name).second) continue;
      if ((*it)->closed && (*it)->end_reason_text() == "removed") continue;
      list.push_back(stream_view(**it, run_));
    }
    std::reverse(list.begin(), list.end());
    reply(res, 200, {{"streams", list}});
  });
  server.Get(R"(/api/v1/streams/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Read)) return;
    const auto s = find_stream(run_, req.matches[1]);
    if (!s) return error_reply(res, 404, fmt::format("no stream is named '{}'", req.matches[1].str()));
    reply(res, 200, stream_view(*s, run_));
  });
  server.Post("/api/v1/streams", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Change) || !within_rate(req, res)) return;
    add(req, res);
  });
  server.Delete(R"(/api/v1/streams/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Change) || !within_rate(req, res)) return;
    remove(req.matches[1], res);
  });
  server.Get(R"(/api/v1/streams/([^/]+)/snapshot\.jpg)", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Read)) return;
    snapshot(req, res, req.matches[1]);
  });
  server.Get(R"(/api/v1/streams/([^/]+)/live\.mjpeg)", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Read)) return;
    mjpeg(req, res, req.matches[1]);
  });
  server.Get("/api/v1/events", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Read)) return;
    uint64_t since = 0;
    size_t limit = 100;
    try {
      if (req.has_param("since")) since = std::stoull(req.get_param_value("since"));
      if (req.has_param("limit")) limit = std::clamp<size_t>(std::stoul(req.get_param_value("limit")), 1, 1000);
    } catch (const std::exception&) {
      return error_reply(res, 422, "since and limit are whole numbers");
    }
    const auto events = run_.recent_events(req.get_param_value("stream"), req.get_param_value("type"), since, limit);
    json list = json::array();
    uint64_t last = since;
    std::error_code ec;
    const auto dir = fs::weakly_canonical(fs::absolute(run_.config().events.dir), ec);
    for (const auto& e : events) {
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
    reply(res, 200, {{"events", list}, {"last", last}});
  });
  // The events' snapshots, thumbnails and clips (only files under events.dir).
  server.Get(R"(/api/v1/event-files/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Read)) return;
    std::error_code ec;
    const auto dir = fs::weakly_canonical(fs::absolute(run_.config().events.dir), ec);
    const auto file = fs::weakly_canonical(dir / req.matches[1].str(), ec);
    const auto rel = file.lexically_relative(dir);
    if (ec || rel.empty() || *rel.begin() == ".." || !fs::is_regular_file(file, ec)) {
      return error_reply(res, 404, "no such event file");
    }
    auto in = std::make_shared<std::ifstream>(file, std::ios::binary);
    const auto size = fs::file_size(file, ec);
    if (!*in || ec) return error_reply(res, 404, "no such event file");
    res.set_content_provider(size, media_type(file), [in](size_t offset, size_t length, httplib::DataSink& sink) {
      std::vector<char> buffer(std::min<size_t>(length, 1 << 16));
      in->seekg(std::streamoff(offset));
      in->read(buffer.data(), std::streamsize(buffer.size()));
      const auto got = size_t(in->gcount());
      return got > 0 && sink.write(buffer.data(), got);
    });
  });
  server.Get("/api/v1/config", [this](const httplib::Request& req, httplib::Response& res) {
    if (!allowed(req, res, Access::Read)) return;
    reply(res, 200, yaml_to_json(YAML::Load(config::to_yaml(run_.config()))));
  });
}

Reconciled Api::reconcile(const std::vector<config::Input>& wanted) {
  Reconciled out;
  std::lock_guard change(change_mutex_);
  std::map<std::string, config::Input> now;
  for (auto& in : run_.inputs()) now.emplace(in.name, in);
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
    try {
      run_.add_stream(in);
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
