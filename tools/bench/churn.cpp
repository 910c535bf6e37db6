#include "bench/churn.hpp"

#include <chrono>
#include <thread>

#include <fmt/format.h>

namespace vc::bench {

using Clock = std::chrono::steady_clock;

namespace {

// Frames the streams not added by the churn have dropped so far.
int64_t others_dropped(const pipeline::RunControl& run) {
  int64_t n = 0;
  for (const auto& st : run.streams()) {
    if (st->name.rfind("churn", 0) != 0) n += st->queue_dropped + st->output_dropped;
  }
  return n;
}

}  // namespace

void churn(pipeline::RunControl& run, const config::Input& like, const std::atomic<int>& stop, Churn& out) {
  while (!stop && !run.engine().ready) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the N started
  std::this_thread::sleep_for(std::chrono::seconds(2));  // (their first frames in)
  out.batch_max_ms_before = run.engine().batch_ms.percentile_ms(1.0);
  for (int k = 0; !stop; ++k) {
    auto in = like;
    in.name = fmt::format("churn{}", k);
    const int64_t before_add = others_dropped(run);
    const auto t0 = Clock::now();
    try {
      run.add_stream(in, nullptr);
    } catch (const std::exception& e) {
      if (stop) break;
      fmt::print(stderr, "bench_pipeline: adding {}: {}\n", in.name, e.what());
      ++out.failed;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    ++out.added;
    for (;;) {
      bool got = false;
      for (const auto& st : run.streams()) got |= st->name == in.name && (st->classified > 0 || st->closed);
      if (got || stop) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    out.first_frame_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    const int64_t added = others_dropped(run);
    out.drops_adding += added - before_add;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const int64_t ran = others_dropped(run);
    out.drops_running += ran - added;
    // A stream that ended by itself meanwhile is a fault to find: which one, after how many frames, and why. (Once the
    // run is stopping every stream ends: not a fault.)
    for (const auto& st : run.streams()) {
      if (stop || st->name != in.name || !st->closed) continue;
      out.ended_early.push_back(fmt::format("{} ({}, {} frames, {} dropped): {}{}", in.name, vc::pipeline::name(st->state.load()),
                                            st->classified.load(), st->queue_dropped.load(), st->end_reason_text(),
                                            st->error_text().empty() ? "" : "; " + st->error_text()));
      fmt::print(stderr, "bench_pipeline: {} ended by itself before its removal: {}\n", in.name, out.ended_early.back());
    }
    const auto t1 = Clock::now();
    try {
      if (run.remove_stream(in.name, std::chrono::seconds(20))) ++out.removed;
      else if (!stop) ++out.failed;  // (the run ending meanwhile answers at once: not a failed removal)
    } catch (const std::exception& e) {
      fmt::print(stderr, "bench_pipeline: removing {}: {}\n", in.name, e.what());
      ++out.failed;
    }
    out.remove_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
    out.drops_removing += others_dropped(run) - ran;
  }
  out.batch_max_ms = run.engine().batch_ms.percentile_ms(1.0);
}

}  // namespace vc::bench
