// Each thread's CPU time in this process, by thread name (/proc/self/task/*/stat): which of the app's threads a
// steady window kept busy — e.g. whether the one post-processing thread was at a whole core when it fell behind —
// and how long each waited for a core while it could have run (its run-queue delay, /proc/self/task/*/schedstat):
// whether it fell behind for want of a CPU.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace vc::bench {

struct ThreadTimes {
  struct Thread {
    std::string name;
    double cpu = 0;   // its CPU seconds so far
    double wait = 0;  // its seconds runnable but not running so far (0 where the kernel does not say)
  };
  std::map<int, Thread> by_tid;  // by thread id
  double process = 0;  // the whole process's CPU seconds so far (threads that have ended included)
};

// This process's threads now (empty where /proc cannot be read).
ThreadTimes thread_times();

// The CPU cores each thread name used between `before` and `after`, `seconds` apart, the busiest `top` first: names
// differing only in digits are one ("qtdemux12:sink" and "qtdemux7:sink" are "qtdemux:sink"), with their thread
// count; first the whole process ("(process)": with the threads that ended meanwhile, which the names miss).
// "waited": the cores' worth of time they were runnable but not running (their run-queue delay; absent where the
// kernel gives none). [{"name", "threads", "cores", "waited"?}, ...]
nlohmann::json thread_cores(const ThreadTimes& before, const ThreadTimes& after, double seconds, size_t top);

}  // namespace vc::bench
