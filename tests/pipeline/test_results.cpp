// The results writer on its own: signals that interrupt a write into a full pipe.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <exception>
#include <fstream>
#include <thread>

#include "pipeline/results/results.hpp"
#include "test_helpers.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("results");

namespace {

// The state letter of a thread of this process ('R' running, 'S' sleeping in the kernel, …).
char thread_state(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

}  // namespace

TEST_CASE("a signal that interrupts a results write into a full pipe is no error: the line arrives whole") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::fcntl(fds[1], F_SETPIPE_SZ, 4096);
  // Fill the pipe: the next write blocks.
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  const std::string filler(4096, 'x');
  size_t filled = 0;
  for (ssize_t n; (n = ::write(fds[1], filler.data(), filler.size())) > 0;) filled += size_t(n);
  ::fcntl(fds[1], F_SETFL, 0);
  // A handler without SA_RESTART, as a signal handler installed by anything in the process might be.
  struct sigaction action {}, previous {};
  action.sa_handler = [](int) {};
  sigemptyset(&action.sa_mask);
  REQUIRE(::sigaction(SIGUSR1, &action, &previous) == 0);

  pipeline::JsonLinesSink sink("/dev/fd/" + std::to_string(fds[1]), {"cam"}, false);
  pipeline::StreamEvent e;
  e.kind = pipeline::StreamEvent::Kind::StreamEnd;
  e.stream_name = "cam";
  e.reason = "end of input";
  std::atomic<pid_t> tid{0};
  std::atomic<bool> done{false};
  std::exception_ptr error;
  std::thread writer([&] {
    tid = pid_t(::syscall(SYS_gettid));
    try {
      sink.event(e);
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
  });
  // Interrupt the blocked write several times, each time once the writer sleeps in it again.
  for (int i = 0; i < 5 && !done; ++i) {
    wait_until([&] { return done || (tid != 0 && thread_state(tid) == 'S'); });
    if (!done) ::syscall(SYS_tgkill, ::getpid(), pid_t(tid), SIGUSR1);
  }
  // Now make room (read the filler): the write can complete, or has failed already.
  std::string received;
  char buffer[8192];
  while (received.size() < filled) {
    const ssize_t n = ::read(fds[0], buffer, std::min(sizeof buffer, filled - received.size()));
    REQUIRE(n > 0);
    received.append(buffer, size_t(n));
  }
  wait_until([&] { return done.load(); });
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  received.clear();
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) received.append(buffer, size_t(n));
  writer.join();
  ::sigaction(SIGUSR1, &previous, nullptr);
  CHECK_MESSAGE(!error, "the write failed on a signal");
  CHECK(received == pipeline::to_json(e) + "\n");
  sink.close();
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_SUITE_END();
