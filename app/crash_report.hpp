// A crash says where it happened: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT the process writes the signal, the
// thread's name (config/thread_name.hpp: vc-engine, vc-http-io, a GStreamer element's) and the call stack to stderr,
// then dies of the same signal (the exit status and a core dump are the system's as before). The frames are
// `binary(+offset)`: `addr2line -Cfe BINARY OFFSET` on the same build names the line.
#pragma once

namespace vc::app {

void install_crash_report();

}  // namespace vc::app
