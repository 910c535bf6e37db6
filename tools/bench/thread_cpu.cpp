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

// "CPU_NS WAIT_NS SLICES" -> the run-queue delay in seconds (0 where it cannot be read).
double run_queue_wait(const std::filesystem::path& schedstat) {
  std::ifstream in(schedstat);
  long long cpu_ns = 0, wait_ns = 0;
  return in >> cpu_ns >> wait_ns ? double(wait_ns) / 1e9 : 0;
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
    std::string line;
    ThreadTimes::Thread thread;
    if (!std::getline(in, line) || !parse_stat(line, thread.name, thread.cpu)) continue;  // (a thread that has just ended)
    thread.wait = run_queue_wait(task.path() / "schedstat");
    int tid = 0;
    try {
      tid = std::stoi(task.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    out.by_tid[tid] = std::move(thread);
  }
  return out;
}

nlohmann::json thread_cores(const ThreadTimes& before, const ThreadTimes& after, double seconds, size_t top) {
  struct Sum {
    int threads = 0;
    double cpu = 0, wait = 0;  // seconds in the window
  };
  std::map<std::string, Sum> by_name;
  double waited = 0;
  for (const auto& [tid, now] : after.by_tid) {
    const auto was = before.by_tid.find(tid);
    const bool same = was != before.by_tid.end() && was->second.name == now.name;
    auto& n = by_name[without_digits(now.name)];
    ++n.threads;
    n.cpu += std::max(0.0, now.cpu - (same ? was->second.cpu : 0));
    const double wait = std::max(0.0, now.wait - (same ? was->second.wait : 0));
    n.wait += wait;
    waited += wait;
  }
  std::vector<std::pair<std::string, Sum>> sorted(by_name.begin(), by_name.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.cpu > b.second.cpu; });
  const auto cores = [&](double s) { return seconds > 0 ? s / seconds : 0; };
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"name", "(process)"}, {"threads", after.by_tid.size()},
                 {"cores", cores(std::max(0.0, after.process - before.process))}});
  if (waited > 0) out.back()["waited"] = cores(waited);  // (of the threads alive at the end)
  for (size_t i = 0; i < sorted.size() && i < top; ++i) {
    out.push_back({{"name", sorted[i].first}, {"threads", sorted[i].second.threads}, {"cores", cores(sorted[i].second.cpu)}});
    if (waited > 0) out.back()["waited"] = cores(sorted[i].second.wait);
  }
  return out;
}

}  // namespace vc::bench
