// Names the calling thread (what top -H, /proc/PID/task/TID/comm and perf show): the app's own threads by their job,
// so that a measurement can say which of them uses the CPU (scripts/live-check.py, the density runs). Linux keeps 15
// characters.
#pragma once
#include <pthread.h>

namespace vc {

inline void name_this_thread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace vc
