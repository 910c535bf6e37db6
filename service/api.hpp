// The REST API and the web page of a running service (api.enabled), on the metrics server (one server, one port):
//   GET    /api/v1/streams                    every stream: state, source, decoder, fps, latency, label, last event
//   GET    /api/v1/streams/NAME               one of them
//   POST   /api/v1/streams                    add one: the body is an `inputs:` entry as JSON, checked as the config is
//   DELETE /api/v1/streams/NAME               stop it (its frames in flight go through, its outputs are finalized), or
//                                             forget one that has ended or failed
//   GET    /api/v1/streams/NAME/snapshot.jpg  its latest labelled frame (?width=N), made at most every
//                                             api.snapshot_interval_s
//   GET    /api/v1/streams/NAME/live.mjpeg    the same as a multipart MJPEG stream (api.mjpeg_clients viewers at once)
//   GET    /api/v1/streams/NAME/live.mp4      its own video remuxed, and …/results its results as they come: live/live_views.hpp
//   GET    /api/v1/events?stream=&type=&since=&limit=   the latest events (since: a seq the last answer gave)
//   GET    /api/v1/event-files/PATH           an event's snapshot, thumbnail or clip (byte ranges for the player)
//   GET    /api/v1/config                     the effective configuration (credentials in URIs replaced)
//   GET    /api/v1/status                     engine, GPU, streams, capacity, whether changes are allowed, models
//   GET    /api/v1/models                     each model: its weights and id now, its labels, the weights it had
//   PUT    /api/v1/models/NAME                deploy: {"weights": FILE} (under api.allowed_dirs or teach.models_dir) built beside the
//                                             running model, every stream switched to it between two batches
//   POST   /api/v1/models/NAME/rollback       back to the weights it had before the last deploy
//   /api/v1/datasets…, /api/v1/models/NAME/train  the review queue, labelling, capture now, training: api_datasets.cpp
//   POST   /api/v1/session                    a token holder's session cookie: reads for the page's <img> and <video>
//   GET    /                                  the web page (service/web/index.html, compiled in)
// Who may do what: api_access.hpp. Files an added stream reads: api_files.hpp. An invalid entry gets 422 with the
// config's own message and the key at fault. No CORS headers: the page is served from the same origin.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "pipeline/core/control.hpp"
#include "service/api_access.hpp"
#include "service/api_files.hpp"
#include "service/live/live_views.hpp"
#include "pipeline/outputs/dataset_folder.hpp"
#include "service/review_queue.hpp"
#include "service/train_job.hpp"
#include "service/http/router.hpp"

namespace vc::service {

// What reconcile() did.
struct Reconciled {
  std::vector<std::string> added, removed, changed, failed;  // failed: "NAME: why"
  std::vector<std::string> kept;                             // streams added over the API: SIGHUP leaves them be
};

class Api {
 public:
  // Reads the token (api.token_file, else VC_API_TOKEN) and, from api.state_file, which streams were added over the
  // API. Throws vc::ConfigError for an unreadable token file.
  Api(const config::Api& settings, pipeline::RunControl& run);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  void install(http::Router& router);
  // Ends the live views (the server has stopped calling the routes).
  void stop();

  // Makes the config file's streams what `wanted` says (SIGHUP: the config file read again): removes the streams it
  // no longer names, adds the new ones, and replaces the ones whose settings changed; the others are not touched (nor
  // is a stream that has ended by itself, a file played to its end: it is not started again), and neither are the
  // streams added over the API (said in `kept`). Then saves the state file.
  Reconciled reconcile(const std::vector<config::Input>& wanted);

  // The run's streams into api.state_file (when set). Throws vc::IoError.
  void save_state();

  // SIGHUP: deploys every model of the run whose weights `fresh` (the config file read again) names differently;
  // returns what it did, a line each ("default: deployed default@3f2a…", "gate: …: why it failed").
  std::vector<std::string> redeploy(const config::Config& fresh);

  // The live video and result streams (live/live_views.hpp).
  [[nodiscard]] const LiveViews& live_views() const { return live_; }

 private:
  http::Response add(const http::Request& req);
  http::Response remove(const std::string& name);
  http::Response status();
  http::Response snapshot(const http::Request& req, const std::string& name);
  http::Response mjpeg(const http::Request& req, const std::string& name);
  http::Response events(const http::Request& req);
  http::Response regions(const std::string& name);
  http::Response set_regions(const http::Request& req, const std::string& name);
  // api_models.cpp
  http::Response models();
  http::Response deploy(const http::Request& req, const std::string& name);
  http::Response roll_back(const http::Request& req, const std::string& name);
  void state_saved(std::string& warning);
  void kept_for_restart(nlohmann::json& view);
  // The weights the config names for `model` (before api.state_file's deployed_models replaced them at the start).
  bool configured_weights(const std::string& model, std::string& weights) const;
  // api_datasets.cpp
  void init_teaching();
  void install_teaching(http::Router& router);
  bool has_model(const std::string& name) const;
  pipeline::DatasetFolder& dataset(const std::string& model);
  http::Response datasets();
  http::Response review_items(const http::Request& req);
  http::Response review_image(const http::Request& req, const std::string& file);
  http::Response label_items(const http::Request& req);
  http::Response discard_items(const http::Request& req);
  http::Response capture_now(const http::Request& req, const std::string& model);
  http::Response train(const http::Request& req, const std::string& model);
  http::Response training(const std::string& model);
  http::Response cancel_training(const http::Request& req, const std::string& model);

  config::Api settings_;
  pipeline::RunControl& run_;
  ApiAccess access_;
  AllowedDirs allowed_dirs_;
  std::unique_ptr<AllowedDirs> model_dirs_;  // where deployed weights may be: api.allowed_dirs and teach.models_dir
  std::vector<pipeline::Split> splits_;      // teach.split
  std::unique_ptr<ReviewQueue> review_;
  std::unique_ptr<TrainJob> training_;
  std::mutex datasets_mutex_;
  std::map<std::string, std::unique_ptr<pipeline::DatasetFolder>> datasets_;  // by model, made when first used
  std::mutex change_mutex_;  // one change (and its state file) at a time
  std::set<std::string> added_over_api_;  // (change_mutex_) names SIGHUP leaves alone; kept in the state file
  pipeline::Clock::time_point started_ = pipeline::Clock::now();
  // The live views' producers: one thread each, at most api.mjpeg_clients.
  std::atomic<int> mjpeg_clients_{0};
  LiveViews live_;
  std::atomic<bool> stopping_{false};
  std::mutex views_mutex_;
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> views_;  // thread, finished
};

// The web page (service/web/index.html), compiled in.
const char* web_page();

}  // namespace vc::service
