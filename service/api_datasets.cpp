// The API's teaching routes: the review queue (the frames output.collect kept because the model was unsure of them),
// labelling them in bulk into a model's dataset or discarding them, "capture now" (a stream's current frame, or its
// region, into the dataset under a label), and training a candidate model on the dataset as a job of the service.
//   GET    /api/v1/datasets                     the datasets (labels, images per split) and the review queue's counts
//   GET    /api/v1/datasets/review?model=&limit=  the frames waiting, newest first (top-3, scores, stream, region)
//   GET    /api/v1/datasets/review/FILE         one of them (JPEG)
//   POST   /api/v1/datasets/review/label        {"items": [FILE, …], "label": L, "dataset": MODEL (default: each
//                                               frame's model)}: moved into DATASET/SPLIT/L/, recorded in its manifest
//   POST   /api/v1/datasets/review/discard      {"items": [FILE, …]}: removed
//   POST   /api/v1/datasets/MODEL/capture       {"stream": S, "region": R (optional), "label": L}: the frame now
//   POST   /api/v1/models/MODEL/train           {"epochs": n, "min_per_class": n} (optional): a candidate trained
//   GET    /api/v1/models/MODEL/train           the job: progress, epochs, the candidate's card and per-class accuracy
//   DELETE /api/v1/models/MODEL/train           cancels it (nothing of it is left)
// A dataset is a model's: teach.datasets_dir/MODEL; its candidates go to teach.models_dir/MODEL. Both are the app's
// own folders: nothing a request names is written but inside them, under names the app makes.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/utc_time.hpp"
#include "service/api.hpp"
#include "service/api_views.hpp"
#include "pipeline/outputs/collector.hpp"

namespace vc::service {

namespace fs = std::filesystem;
using http::Request;
using http::Response;
using json = nlohmann::json;
using pipeline::RequestError;

namespace {

// The body as a JSON object, or why not (400/422).
std::optional<Response> object_body(const Request& req, json& body) {
  try {
    body = req.body.empty() ? json::object() : json::parse(req.body);
  } catch (const json::parse_error& e) {
    return error_reply(400, "the body is not JSON: " + json_error_text(e));
  }
  if (!body.is_object()) return error_reply(422, "the body must be a JSON object");
  return std::nullopt;
}

// body["items"]: a list of review files.
std::optional<Response> item_list(const json& body, std::vector<std::string>& items) {
  const auto it = body.find("items");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return error_reply(422, "items: a list of the review queue's files (GET /api/v1/datasets/review)", "items");
  }
  for (const auto& i : *it) {
    if (!i.is_string()) return error_reply(422, "items: each is a file name (a string)", "items");
    items.push_back(i.get<std::string>());
  }
  return std::nullopt;
}

std::optional<Response> label_of(const json& body, std::string& label) {
  const auto it = body.find("label");
  if (it == body.end() || !it->is_string()) return error_reply(422, "label: the class to file them under", "label");
  label = it->get<std::string>();
  if (const auto why = pipeline::label_problem(label); !why.empty()) return error_reply(422, "label: " + why, "label");
  return std::nullopt;
}

}  // namespace

void Api::init_teaching() {
  const auto& teach = run_.config().teach;
  try {
    splits_ = pipeline::parse_splits(teach.split, "teach.split");
  } catch (const Error& e) {
    throw ConfigError(e.what(), "teach.split");
  }
  // A candidate may be deployed from the models folder as from api.allowed_dirs.
  auto dirs = settings_.allowed_dirs;
  dirs.push_back(teach.models_dir);
  model_dirs_ = std::make_unique<AllowedDirs>(dirs);
  review_ = std::make_unique<ReviewQueue>(run_.config().output.collect_dir);
  training_ = std::make_unique<TrainJob>(teach);
}

bool Api::has_model(const std::string& name) const {
  for (const auto& m : run_.models()) {
    if (m.name == name) return true;
  }
  return name == "default";
}

pipeline::DatasetFolder& Api::dataset(const std::string& model) {
  std::lock_guard lock(datasets_mutex_);
  auto& d = datasets_[model];
  if (!d) {
    const auto& teach = run_.config().teach;
    d = std::make_unique<pipeline::DatasetFolder>(fs::path(teach.datasets_dir) / model, splits_, teach.block_s);
  }
  return *d;
}

Response Api::datasets() {
  json list = json::array();
  for (const auto& m : run_.models()) {
    const auto counts = dataset(m.name).counts();
    int64_t images = 0;
    for (const auto& [label, splits] : counts.items()) {
      for (const auto& [split, n] : splits.items()) images += n.get<int64_t>();
    }
    list.push_back({{"name", m.name}, {"dir", dataset(m.name).dir().string()}, {"labels", counts}, {"images", images},
                    {"model_labels", m.labels}, {"training", training_->view(m.name)}});
  }
  return reply(200, {{"datasets", list},
                     {"review", review_->summary()},
                     {"collecting", !review_->dir().empty()},
                     {"split", run_.config().teach.split},
                     {"epochs", run_.config().teach.epochs}});
}

Response Api::review_items(const Request& req) {
  size_t limit = 500;
  if (const auto l = req.param("limit"); !l.empty()) {
    try {
      limit = size_t(std::clamp(std::stol(l), 1L, 10000L));
    } catch (const std::exception&) {
      return error_reply(400, "limit: a number");
    }
  }
  const auto all = review_->items(req.param("model"));
  json items = json::array();
  for (size_t i = 0; i < all.size() && i < limit; ++i) {
    auto line = all[i].line;
    line["image"] = "/api/v1/datasets/review/" + all[i].file;
    items.push_back(std::move(line));
  }
  return reply(200, {{"items", items}, {"waiting", all.size()}});
}

Response Api::review_image(const Request& req, const std::string& file) {
  // (a name the collector gives, read without following a link: no index read for each of a page's pictures)
  if (review_->dir().empty() || !pipeline::Collector::is_frame_file(file)) {
    return error_reply(404, "no frame waits for review under that name");
  }
  return event_file(review_->dir(), file, req.header("range"));
}

Response Api::label_items(const Request& req) {
  json body;
  if (auto bad = object_body(req, body)) return *bad;
  std::vector<std::string> items;
  std::string label;
  if (auto bad = item_list(body, items)) return *bad;
  if (auto bad = label_of(body, label)) return *bad;
  std::string chosen;
  if (const auto d = body.find("dataset"); d != body.end()) {
    if (!d->is_string() || !has_model(d->get<std::string>())) {
      return error_reply(404, "dataset: a model of the run (its dataset)", "dataset");
    }
    chosen = d->get<std::string>();
  }
  json labelled = json::array(), missing = json::array();
  std::set<std::string> datasets_used;
  const auto waiting = review_->waiting();
  for (const auto& file : items) {
    const auto found = waiting.find(file);
    if (found == waiting.end()) {  // labelled or discarded already (another tab), or dropped for room
      missing.push_back(file);
      continue;
    }
    const auto& item = found->second;
    const auto& line = item.line;
    const auto model = chosen.empty() ? text_of(line, "model", "default") : chosen;
    if (!has_model(model)) {  // (a line of another run's model: said, not guessed)
      missing.push_back(file);
      continue;
    }
    // Stream time (the collector's "t": the frame's timestamp, else when it came) chooses the split, as in capture.
    const double t = number_of(line, "t", number_of(line, "pts", 0.0));
    json meta{{"stream", text_of(line, "stream", "")},
              {"source", text_of(line, "source", "")},
              {"frame", int64_t(number_of(line, "frame", -1))},
              {"t", t},
              {"predicted", text_of(line, "label", "")},
              {"score", number_of(line, "score", 0.0)},
              {"model_id", text_of(line, "model_id", "")},
              {"from", "review"}};
    if (line.contains("region")) meta["region"] = text_of(line, "region", "");
    if (line.contains("box") && line["box"].is_array()) meta["box"] = line["box"];
    try {
      labelled.push_back(dataset(model).add_file(review_->path_of(item), label, t, meta));
      datasets_used.insert(model);
    } catch (const Error& e) {
      vc::log::get("service")->warn("api: {}: {}", file, e.what());
      missing.push_back(file);
    }
  }
  if (labelled.empty() && !missing.empty()) {
    return error_reply(409, "none of the items waits for review any more (labelled, discarded or dropped for room)");
  }
  vc::log::get("service")->info("api: {} frame(s) labelled '{}' by {}", labelled.size(), label, req.client);
  return reply(200, {{"labelled", labelled}, {"missing", missing}, {"datasets", datasets_used}});
}

Response Api::discard_items(const Request& req) {
  json body;
  if (auto bad = object_body(req, body)) return *bad;
  std::vector<std::string> items;
  if (auto bad = item_list(body, items)) return *bad;
  json missing = json::array();
  int64_t discarded = 0;
  const auto waiting = review_->waiting();
  for (const auto& file : items) {
    const auto found = waiting.find(file);
    if (found != waiting.end() && review_->discard(found->second)) ++discarded;
    else missing.push_back(file);
  }
  vc::log::get("service")->info("api: {} frame(s) discarded by {}", discarded, req.client);
  return reply(200, {{"discarded", discarded}, {"missing", missing}});
}

Response Api::capture_now(const Request& req, const std::string& model) {
  if (!has_model(model)) return error_reply(404, fmt::format("no model is named '{}' (a dataset is a model's)", model));
  json body;
  if (auto bad = object_body(req, body)) return *bad;
  std::string label;
  if (auto bad = label_of(body, label)) return *bad;
  if (!body.contains("stream") || !body["stream"].is_string()) return error_reply(422, "stream: the stream's name", "stream");
  const auto stream = body["stream"].get<std::string>();
  std::string region;
  if (body.contains("region")) {
    if (!body["region"].is_string()) return error_reply(422, "region: a region's name", "region");
    region = body["region"].get<std::string>();
  }
  try {
    // The frame as the model sees it: without the overlay, full size; a region's cut out of it (its box now).
    std::optional<pipeline::Snapshot> shot;
    json meta{{"stream", stream}, {"from", "capture"}};
    if (region.empty()) {
      shot = run_.snapshot(stream, 0, std::chrono::milliseconds(2000), true);
    } else {
      const auto now = run_.regions(stream);
      const config::Region* found = nullptr;
      for (const auto& r : now.input.regions) {
        if (r.name == region) found = &r;
      }
      if (!found) return error_reply(404, fmt::format("stream {} has no region '{}'", stream, region), "region");
      const auto region_model = found->model.empty() ? std::string("default") : found->model;
      if (region_model != model) {  // (a region's pictures train the model that classifies it)
        return error_reply(422, fmt::format("region {} is classified by model {}: capture it into that model's dataset",
                                            region, region_model), "region");
      }
      const auto box = config::region_pixels(*found, now.width, now.height);
      if (!box) return error_reply(409, fmt::format("stream {} has no picture yet, or region {} is outside it", stream, region), "region");
      shot = run_.snapshot(stream, 0, std::chrono::milliseconds(2000), true, &*box);
      meta["region"] = region;
      meta["box"] = {box->x, box->y, box->width, box->height};
    }
    if (!shot || shot->jpeg.empty()) return error_reply(409, fmt::format("stream {} has no frame yet", stream), "stream");
    const auto& jpeg = shot->jpeg;
    meta["frame"] = shot->frame;
    // Stream time chooses the split (as in capture); a source without timestamps: when it was taken.
    const double t = shot->pts_s >= 0 ? shot->pts_s
                                      : std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    meta["t"] = t;
    const auto stem = fmt::format("{}{}-{}-{:06d}", stream, region.empty() ? "" : "-" + region, utc_now(UtcForm::kCompact), shot->frame);
    auto line = dataset(model).add_bytes(jpeg, stem, label, t, meta);
    vc::log::get("service")->info("api: frame {} of {} captured as '{}' by {}", shot->frame, stream, label, req.client);
    return reply(201, line);
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what(), "stream");
  } catch (const Error& e) {
    return error_reply(422, e.what());
  }
}

Response Api::train(const Request& req, const std::string& model) {
  if (!has_model(model)) return error_reply(404, fmt::format("no model is named '{}'", model));
  json body;
  if (auto bad = object_body(req, body)) return *bad;
  const auto& teach = run_.config().teach;
  TrainJob::Request job;
  job.model = model;
  job.epochs = teach.epochs;
  for (const auto& [key, value] : body.items()) {
    if ((key != "epochs" && key != "min_per_class") || !value.is_number_integer() || value.get<int64_t>() < 1 ||
        value.get<int64_t>() > 1000) {
      return error_reply(422, fmt::format("{}: the body takes epochs (1-1000) and min_per_class (1-1000)", key), key);
    }
    (key == "epochs" ? job.epochs : job.min_per_class) = int(value.get<int64_t>());
  }
  job.dataset = dataset(model).dir().string();
  std::error_code ec;
  if (!fs::exists(fs::path(job.dataset) / "labels.txt", ec)) {
    return error_reply(409, fmt::format("the dataset of {} is empty: label frames of the review queue or capture some", model));
  }
  job.out = (fs::path(teach.models_dir) / model / ("candidate-" + utc_now(UtcForm::kCompact) + ".safetensors")).string();
  for (const auto& m : run_.models()) {
    if (m.name == model) job.compare = m.current.weights;
  }
  try {
    if (job.compare.empty()) job.compare = config::bundled_asset("models/resnet18-fashion-mnist.safetensors");
  } catch (const Error&) {
  }
  try {
    training_->start(job);
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  } catch (const Error& e) {
    return error_reply(503, e.what());
  }
  vc::log::get("service")->info("api: training of {} started by {}", model, req.client);
  return reply(202, training_->view(model));
}

Response Api::training(const std::string& model) {
  auto view = training_->view(model);
  if (view.is_null()) return error_reply(404, fmt::format("model {} has had no training job", model));
  return reply(200, view);
}

Response Api::cancel_training(const Request& req, const std::string& model) {
  try {
    training_->cancel(model);
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  }
  vc::log::get("service")->info("api: training of {} cancelled by {}", model, req.client);
  return reply(200, training_->view(model));
}

void Api::install_teaching(http::Router& router) {
  using http::Access;
  using http::Lane;
  const auto body = size_t(settings_.max_body_kb) * 1024;
  router.add("GET", "/api/v1/datasets", Access::Read, Lane::Reads, 0, [this](Request&) { return datasets(); });
  router.add("GET", "/api/v1/datasets/review", Access::Read, Lane::Reads, 0, [this](Request& r) { return review_items(r); });
  router.add("GET", "/api/v1/datasets/review/{*}", Access::Read, Lane::Reads, 0,
             [this](Request& r) { return review_image(r, r.params[0]); });
  router.add("POST", "/api/v1/datasets/review/label", Access::Change, Lane::Changes, body,
             [this](Request& r) { return label_items(r); });
  router.add("POST", "/api/v1/datasets/review/discard", Access::Change, Lane::Changes, body,
             [this](Request& r) { return discard_items(r); });
  router.add("POST", "/api/v1/datasets/{}/capture", Access::Change, Lane::Changes, body,
             [this](Request& r) { return capture_now(r, r.params[0]); });
  router.add("POST", "/api/v1/models/{}/train", Access::Change, Lane::Changes, body,
             [this](Request& r) { return train(r, r.params[0]); });
  router.add("GET", "/api/v1/models/{}/train", Access::Read, Lane::Reads, 0, [this](Request& r) { return training(r.params[0]); });
  router.add("DELETE", "/api/v1/models/{}/train", Access::Change, Lane::Changes, 0,
             [this](Request& r) { return cancel_training(r, r.params[0]); });
}

}  // namespace vc::service
