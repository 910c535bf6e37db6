#include "app/crash_report.hpp"

#include <execinfo.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <initializer_list>

namespace vc::app {
namespace {

void write_text(const char* text) {
  const ssize_t n = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)n;
}

// Only what a signal handler may do: write(), backtrace() (loaded before any crash), raise().
void on_crash(int signal) {
  char thread[17] = {};
  prctl(PR_GET_NAME, thread, 0, 0, 0);
  write_text("\nvideo-classifier crashed: ");
  write_text(sigabbrev_np(signal) ? sigabbrev_np(signal) : "signal");
  write_text(" in thread ");
  write_text(thread);
  write_text("; the call stack:\n");
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  // Dies of the same signal, as it would have without this handler (SA_RESETHAND put the default action back).
  raise(signal);
}

}  // namespace

void install_crash_report() {
  void* frame[1];
  backtrace(frame, 1);  // (its first call loads libgcc: not in the handler)
  // Its own stack: a crash of a stack overflow still reports.
  static char alternate[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate;
  stack.ss_size = sizeof alternate;
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = on_crash;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(s, &action, nullptr);
}

}  // namespace vc::app
