#include "bench/thread_cpu.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace vc::bench {
namespace {

// "12345 (qtdemux7:sink) S 1 ..." -> the name and utime + stime (fields 14 and 15) in seconds.
bool parse_stat(const std::string& line, std::string& name, double& seconds) {
  const auto open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  name = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // (field 3 is the state)
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  seconds = double(utime + stime) / double(sysconf(_SC_CLK_TCK));
  return true;
}

std::string without_digits(std::string name) {
  std::erase_if(name, [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
  return name;
}

}  // namespace

ThreadTimes thread_times() {
  ThreadTimes out;
  {
    std::ifstream self("/proc/self/stat");
    std::string line, name;
    if (std::getline(self, line)) parse_stat(line, name, out.process);
  }
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "stat");
    std::string line, name;
    double seconds = 0;
    if (!std::getline(in, line) || !parse_stat(line, name, seconds)) continue;  // (a thread that has just ended)
    int tid = 0;
    try {
      tid = std::stoi(task.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    out.by_tid[tid] = {name, seconds};
  }
  return out;
}

nlohmann::json thread_cores(const ThreadTimes& before, const ThreadTimes& after, double seconds, size_t top) {
  std::map<std::string, std::pair<int, double>> by_name;  // name -> (threads, CPU seconds in the window)
  for (const auto& [tid, now] : after.by_tid) {
    const auto was = before.by_tid.find(tid);
    const double start = was != before.by_tid.end() && was->second.first == now.first ? was->second.second : 0;
    auto& n = by_name[without_digits(now.first)];
    ++n.first;
    n.second += std::max(0.0, now.second - start);
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> sorted(by_name.begin(), by_name.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"name", "(process)"},
                 {"threads", after.by_tid.size()},
                 {"cores", seconds > 0 ? std::max(0.0, after.process - before.process) / seconds : 0}});
  for (size_t i = 0; i < sorted.size() && i < top; ++i) {
    out.push_back({{"name", sorted[i].first},
                   {"threads", sorted[i].second.first},
                   {"cores", seconds > 0 ? sorted[i].second.second / seconds : 0}});
  }
  return out;
}

}  // namespace vc::bench
