#include "service/review_queue.hpp"

#include <cmath>
#include <fstream>
#include <map>

#include "pipeline/outputs/collector.hpp"
#include "service/api_views.hpp"

namespace vc::service {

namespace fs = std::filesystem;
using json = nlohmann::json;

ReviewQueue::ReviewQueue(std::string dir) : dir_(std::move(dir)) {}

ReviewQueue::Index ReviewQueue::read() const {
  Index index;
  if (dir_.empty()) return index;
  std::ifstream in(fs::path(dir_) / "collect.jsonl");
  std::map<std::string, size_t> at;  // file -> its place in items (a line written again wins)
  for (std::string text; std::getline(in, text);) {
    auto line = json::parse(text, nullptr, false);
    if (!line.is_object()) continue;  // (a line cut short)
    if (const auto n = line.find("dropped_for_room"); n != line.end() && n->is_number_integer()) {
      index.dropped_for_room += n->get<int64_t>();
      continue;
    }
    const auto file = line.find("file");
    if (file == line.end() || !file->is_string()) continue;
    const auto name = file->get<std::string>();
    if (!pipeline::Collector::is_frame_file(name)) continue;  // (a hand-edited line: nothing outside the queue's files)
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(fs::path(dir_) / name, ec))) continue;
    if (auto it = at.find(name); it != at.end()) {
      index.items[it->second].line = std::move(line);
      continue;
    }
    at[name] = index.items.size();
    index.items.push_back({name, std::move(line)});
  }
  return index;
}

std::vector<ReviewQueue::Item> ReviewQueue::items(const std::string& model) const {
  std::lock_guard lock(mutex_);
  auto all = read().items;
  std::vector<Item> out;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (model.empty() || text_of(it->line, "model", "default") == model) out.push_back(std::move(*it));
  }
  return out;
}

json ReviewQueue::summary() const {
  std::lock_guard lock(mutex_);
  const auto index = read();
  json by_model = json::object();
  for (const auto& item : index.items) {
    auto& n = by_model[text_of(item.line, "model", "default")][text_of(item.line, "label", "")];
    n = n.is_null() ? 1 : n.get<int64_t>() + 1;
  }
  return {{"waiting", index.items.size()}, {"dropped_for_room", index.dropped_for_room}, {"by_model", by_model}};
}

std::map<std::string, ReviewQueue::Item> ReviewQueue::waiting() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, Item> out;
  for (auto& item : read().items) out.emplace(item.file, std::move(item));
  return out;
}

bool ReviewQueue::discard(const Item& item) {
  std::error_code ec;
  return fs::remove(path_of(item), ec);
}

}  // namespace vc::service
