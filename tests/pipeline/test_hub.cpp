// The batcher across streams (FrameHub) and the measurements (latency histogram, rate meter), without GStreamer:
// round-robin fairness, block vs drop-oldest, batch fill timeout, close and drain — all deterministic.
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <thread>

#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/core/stats.hpp"
#include "test_helpers.hpp"

using namespace vc::pipeline;
using vc::test::wait_until;
using namespace std::chrono_literals;

TEST_SUITE_BEGIN("hub");

namespace {

Frame frame(int stream, int64_t index) {
  Frame f;
  f.stream = stream;
  f.index = index;
  f.captured = Clock::now();
  return f;
}

}  // namespace

TEST_CASE("batches take frames round-robin across streams, starting after the stream served last") {
  FrameHub hub({{8, false}, {8, false}, {8, false}});
  for (int s = 0; s < 3; ++s)
    for (int i = 0; i < 4; ++i) REQUIRE(hub.push(frame(s, i)));
  auto b = hub.pop_batch(4, 0us);
  REQUIRE(b.size() == 4);
  CHECK((b[0].stream == 0 && b[1].stream == 1 && b[2].stream == 2 && b[3].stream == 0));
  b = hub.pop_batch(4, 0us);  // continues after stream 0
  REQUIRE(b.size() == 4);
  CHECK((b[0].stream == 1 && b[1].stream == 2 && b[2].stream == 0 && b[3].stream == 1));
  // Each stream's frames stay in order.
  std::map<int, int64_t> last{{0, 1}, {1, 1}, {2, 1}};
  b = hub.pop_batch(8, 0us);
  CHECK(b.size() == 4);
  for (const auto& f : b) {
    CHECK(f.index > last[f.stream]);
    last[f.stream] = f.index;
  }
}

TEST_CASE("a blocking stream makes its producer wait; a dropping stream drops its stalest frame") {
  FrameHub hub({{2, false}, {2, true}});
  REQUIRE(hub.push(frame(0, 0)));
  REQUIRE(hub.push(frame(0, 1)));
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    hub.push(frame(0, 2));  // full: waits until the consumer takes one
    pushed = true;
  });
  wait_until([&] { return hub.waiting_producers() == 1; });
  CHECK(!pushed);  // it is waiting for room, and nothing has taken a frame
  for (int i = 0; i < 5; ++i) REQUIRE(hub.push(frame(1, i)));  // never waits
  CHECK(hub.dropped(1) == 3);
  CHECK(hub.dropped(0) == 0);
  auto b = hub.pop_batch(2, 0us);
  producer.join();
  CHECK(pushed);
  REQUIRE(b.size() == 2);
  CHECK((b[0].stream == 0 && b[0].index == 0));
  CHECK((b[1].stream == 1 && b[1].index == 3));  // the two freshest of stream 1 remain: 3 and 4
  b = hub.pop_batch(8, 0us);
  REQUIRE(b.size() == 3);
  CHECK((b[0].index == 1 && b[1].index == 4 && b[2].index == 2));
}

TEST_CASE("a batch waits up to the fill timeout for more frames, and no longer") {
  FrameHub hub({{8, false}, {8, false}});
  REQUIRE(hub.push(frame(0, 0)));
  std::thread late([&] {
    wait_until([&] { return hub.consumer_waiting(); });  // the batch has its first frame and waits for more
    hub.push(frame(1, 0));
  });
  auto b = hub.pop_batch(2, 600s);  // the second frame arrives while the batch waits, joins it and fills it
  late.join();
  CHECK(b.size() == 2);
  REQUIRE(hub.push(frame(0, 1)));
  const auto start = Clock::now();
  b = hub.pop_batch(4, 50ms);  // nothing more comes: the batch leaves after the timeout
  const auto waited = Clock::now() - start;
  CHECK(b.size() == 1);
  CHECK(waited >= 50ms);
  CHECK(waited < 50ms + 5s);  // and not much later (the margin covers a loaded machine)
}

TEST_CASE("closed streams are drained, reported once, and end the batches") {
  FrameHub hub({{8, false}, {8, true}});
  REQUIRE(hub.push(frame(0, 0)));
  hub.close(0);
  CHECK(!hub.push(frame(0, 1)));  // a closed stream takes nothing more
  CHECK(hub.take_drained().streams.empty());  // its frame is still waiting
  CHECK(hub.pop_batch(4, 0us).size() == 1);
  auto drained = hub.take_drained();
  CHECK(drained.streams == std::vector<int>{0});
  CHECK(!drained.all_done);
  CHECK(hub.take_drained().streams.empty());
  CHECK(!hub.all_done());
  hub.close(1);
  // The last stream's drain and "all done" come in one step: a stream closing between two calls is never missed.
  drained = hub.take_drained();
  CHECK(drained.streams == std::vector<int>{1});
  CHECK(drained.all_done);
  CHECK(hub.all_done());
  CHECK(hub.pop_batch(4, 0us, 10ms).empty());
}

TEST_CASE("streams added while the hub runs: held until released, discarded as if never there, slots made new") {
  FrameHub hub({{8, true}});
  hub.keep_open(true);  // a service: no stream running is not the end
  hub.close(0);
  CHECK(hub.take_drained().streams == std::vector<int>{0});
  CHECK(!hub.all_done());
  CHECK(hub.pop_batch(4, 0us, 1ms).empty());

  const int id = hub.add_stream({8, false}, true);
  CHECK(id == 1);
  CHECK(hub.streams() == 2);
  REQUIRE(hub.push(frame(1, 0)));
  CHECK(hub.pop_batch(4, 0us, 1ms).empty());  // held: the run is not ready for its frames yet
  hub.release(1);
  CHECK(hub.pop_batch(4, 0us).size() == 1);

  const int refused = hub.add_stream({8, false}, true);
  REQUIRE(hub.push(frame(refused, 0)));
  hub.discard(refused);  // it could not start: its frames go, and it is never reported drained
  CHECK(!hub.push(frame(refused, 1)));
  CHECK(hub.take_drained().streams.empty());

  hub.close(1);
  CHECK(hub.take_drained().streams == std::vector<int>{1});
  hub.reopen(1, {2, true}, true);  // the slot of a stream that ended, for a new one
  CHECK(!hub.closed(1));
  REQUIRE(hub.push(frame(1, 0)));
  REQUIRE(hub.push(frame(1, 1)));
  REQUIRE(hub.push(frame(1, 2)));
  CHECK(hub.dropped(1) == 1);  // its own policy: capacity 2, dropping
  hub.release(1);
  CHECK(hub.pop_batch(4, 0us).size() == 2);

  hub.close(1);
  CHECK(!hub.take_drained().all_done);
  hub.keep_open(false);  // the service stops: done once every stream is
  CHECK(hub.take_drained().all_done);
}

TEST_CASE("a stalled producer is released by shutdown") {
  FrameHub hub({{1, false}});
  REQUIRE(hub.push(frame(0, 0)));
  std::atomic<bool> returned{false}, result{true};
  std::thread producer([&] {
    result = hub.push(frame(0, 1));
    returned = true;
  });
  wait_until([&] { return hub.waiting_producers() == 1; });
  hub.shutdown();
  producer.join();
  CHECK(returned);
  CHECK(!result);
}

TEST_CASE("the latency histogram's percentiles are within its bucket width") {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.add(double(i));  // 1 .. 1000 ms
  CHECK(h.count() == 1000);
  CHECK(h.mean_ms() == doctest::Approx(500.5));
  CHECK(h.percentile_ms(0.5) == doctest::Approx(500).epsilon(0.03));
  CHECK(h.percentile_ms(0.99) == doctest::Approx(990).epsilon(0.03));
  CHECK(h.count_at_most(100.0) == doctest::Approx(100).epsilon(0.05));
  CHECK(LatencyHistogram().percentile_ms(0.5) == 0);
}

TEST_CASE("the rate meter counts frames over wall time, also when they come in batches") {
  RateMeter m;
  const auto t0 = Clock::time_point(std::chrono::seconds(1000));
  // 30 frames per second arriving in bursts of 8 (a batch): the rate is 30, not the burst's near-zero gaps.
  int64_t frames = 0;
  for (auto t = t0; t < t0 + 4s; t += std::chrono::microseconds(8'000'000 / 30)) {
    for (int k = 0; k < 8; ++k, ++frames) m.tick(t);
  }
  CHECK(m.per_second(t0 + 4s) == doctest::Approx(30).epsilon(0.1));
  CHECK(RateMeter().per_second(t0) == 0);
}

TEST_SUITE_END();
