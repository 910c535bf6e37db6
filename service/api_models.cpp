// The API's model routes: what each model of the run is now and was, a deploy of new weights, a rollback; and SIGHUP's
// deploy of the weights a configuration file names anew. The switch itself is the pipeline's (model_swaps.hpp).
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "service/api.hpp"
#include "service/api_views.hpp"

namespace vc::service {

using http::Request;
using http::Response;
using json = nlohmann::json;
using pipeline::RequestError;

Response Api::models() {
  json list = json::array();
  for (const auto& m : run_.models()) list.push_back(model_view(m));
  return reply(200, {{"models", list}});
}

Response Api::deploy(const Request& req, const std::string& name) {
  config::Input file;  // the weights, checked as an added stream's file is: inside api.allowed_dirs, no link followed
  try {
    const auto body = json::parse(req.body);
    if (!body.is_object() || !body.contains("weights") || !body["weights"].is_string() || body.size() != 1) {
      return error_reply(422, "the body must be a JSON object: {\"weights\": \"FILE.safetensors\"}", "weights");
    }
    file.kind = config::InputKind::File;
    file.name = name;
    file.path = body["weights"].get<std::string>();
    if (file.path.empty()) return error_reply(422, "weights: a file path", "weights");
  } catch (const json::parse_error& e) {
    return error_reply(400, "the body is not JSON: " + json_error_text(e));
  }
  // (not under change_mutex_: a build takes seconds, and streams may come and go meanwhile; one switch at a time is
  // the pipeline's rule)
  try {
    const auto opened = model_dirs_->open(file);  // (api.allowed_dirs and teach.models_dir)
    auto view = model_view(run_.deploy_model(name, file.path, opened));
    vc::log::get("service")->info("api: model {} deployed by {}: {}", name, req.client, view["id"].get<std::string>());
    kept_for_restart(view);
    return reply(200, view);
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what(), e.status() == 403 ? "weights" : "");
  } catch (const Error& e) {  // no such file, not a model, a label a rule needs missing: the running model goes on
    return error_reply(422, e.what(), "weights");
  }
}

Response Api::roll_back(const Request& req, const std::string& name) {
  try {
    auto view = model_view(run_.roll_back_model(name));
    vc::log::get("service")->info("api: model {} rolled back by {}: {}", name, req.client, view["id"].get<std::string>());
    kept_for_restart(view);
    return reply(200, view);
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  } catch (const Error& e) {
    return error_reply(422, e.what());
  }
}

// The model now in api.state_file (a restart loads it); a warning in the answer when that failed.
void Api::kept_for_restart(json& view) {
  std::lock_guard change(change_mutex_);
  std::string warning;
  state_saved(warning);
  if (!warning.empty()) view["warning"] = warning;
}

std::vector<std::string> Api::redeploy(const config::Config& fresh) {
  std::vector<std::string> done;
  for (const auto& m : run_.models()) {
    std::string weights;
    try {
      weights = config::for_model(fresh, m.name).model.weights;
    } catch (const ConfigError& e) {
      done.push_back(fmt::format("{}: {}", m.name, e.what()));
      continue;
    }
    // (the file names what it named at the start: nothing changed there, whatever was deployed over the API since)
    std::string configured;
    if (weights.empty() || weights == m.current.weights || (configured_weights(m.name, configured) && weights == configured)) {
      continue;
    }
    try {  // (the config file is trusted as at the start: its paths are not limited to api.allowed_dirs)
      const auto now = run_.deploy_model(m.name, weights, nullptr);
      done.push_back(fmt::format("{}: deployed {} ({})", m.name, now.current.id, weights));
    } catch (const std::exception& e) {
      done.push_back(fmt::format("{}: {} was not deployed: {}", m.name, weights, e.what()));
    }
  }
  return done;
}

}  // namespace vc::service
