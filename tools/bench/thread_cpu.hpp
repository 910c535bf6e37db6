// Each thread's CPU time in this process, by thread name (/proc/self/task/*/stat): which of the app's threads a
// steady window kept busy — e.g. whether the one post-processing thread was at a whole core when it fell behind.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace vc::bench {

struct ThreadTimes {
  std::map<int, std::pair<std::string, double>> by_tid;  // thread id -> (its name, its CPU seconds so far)
  double process = 0;  // the whole process's CPU seconds so far (threads that have ended included)
};

// This process's threads now (empty where /proc cannot be read).
ThreadTimes thread_times();

// The CPU cores each thread name used between `before` and `after`, `seconds` apart, the busiest `top` first: names
// differing only in digits are one ("qtdemux12:sink" and "qtdemux7:sink" are "qtdemux:sink"), with their thread
// count; first the whole process ("(process)": with the threads that ended meanwhile, which the names miss).
// [{"name", "threads", "cores"}, ...]
nlohmann::json thread_cores(const ThreadTimes& before, const ThreadTimes& after, double seconds, size_t top);

}  // namespace vc::bench
