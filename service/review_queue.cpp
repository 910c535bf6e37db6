#include "service/review_queue.hpp"

#include <fstream>
#include <map>

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
    if (name.empty() || name.front() == '/' || name.find("..") != std::string::npos) continue;
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(dir_) / name, ec) || fs::is_symlink(fs::path(dir_) / name, ec)) continue;
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
    if (model.empty() || it->line.value("model", std::string("default")) == model) out.push_back(std::move(*it));
  }
  return out;
}

json ReviewQueue::summary() const {
  std::lock_guard lock(mutex_);
  const auto index = read();
  json by_model = json::object();
  for (const auto& item : index.items) {
    auto& n = by_model[item.line.value("model", std::string("default"))][item.line.value("label", std::string())];
    n = n.is_null() ? 1 : n.get<int64_t>() + 1;
  }
  return {{"waiting", index.items.size()}, {"dropped_for_room", index.dropped_for_room}, {"by_model", by_model}};
}

std::optional<ReviewQueue::Item> ReviewQueue::find(const std::string& file) const {
  std::lock_guard lock(mutex_);
  for (auto& item : read().items) {
    if (item.file == file) return item;
  }
  return std::nullopt;
}

bool ReviewQueue::discard(const std::string& file) {
  const auto item = find(file);
  if (!item) return false;
  std::error_code ec;
  return fs::remove(path_of(*item), ec);
}

}  // namespace vc::service
