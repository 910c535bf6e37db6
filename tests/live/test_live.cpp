// The live view, the service's side (the app on the CPU engine, read with curl): a stream's own H.264 remuxed into
// fragmented MP4 — an init segment, then one fragment per picture, the first on a keyframe, every box whole and the
// file decodable — a raw test pattern encoded while watched, a codec MP4 cannot carry refused (415), results as
// server-sent events that say where their frame is in the video, viewers bounded, counted in /metrics.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "config/errors.hpp"
#include "pipeline/live/mp4_boxes.hpp"
#include "service/service_helpers.hpp"

using namespace vc;
using namespace vc::test;
using json = nlohmann::json;

TEST_SUITE_BEGIN("live");

namespace {

struct Boxes {
  std::vector<pipeline::Mp4Box> all;
  std::string whole;  // the complete boxes, in order (a body cut short by curl's --max-time loses its last one)
};

Boxes read_boxes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  pipeline::Mp4BoxReader reader;
  reader.append(bytes.str());
  Boxes out;
  while (auto box = reader.next()) {
    out.whole += box->bytes;
    out.all.push_back(std::move(*box));
  }
  return out;
}

// Checks a live.mp4 body: ftyp, moov, then moof + mdat pairs, the first fragment on a keyframe. Returns the
// fragments.
int check_fragmented_mp4(const Boxes& b) {
  REQUIRE(b.all.size() >= 4);
  CHECK(b.all[0].type == "ftyp");
  CHECK(b.all[1].type == "moov");
  const uint32_t trex = pipeline::trex_default_sample_flags(b.all[1].bytes);
  int fragments = 0, keys = 0;
  for (size_t i = 2; i + 1 < b.all.size(); i += 2) {
    CHECK(b.all[i].type == "moof");
    CHECK(b.all[i + 1].type == "mdat");
    const bool key = pipeline::fragment_starts_with_keyframe(b.all[i].bytes, trex);
    if (fragments == 0) CHECK_MESSAGE(key, "the first fragment must start on a keyframe");
    keys += key;
    ++fragments;
  }
  CHECK(keys >= 1);
  return fragments;
}

// A box: its size, type and payload.
std::string box(const std::string& type, const std::string& payload) {
  const uint32_t size = uint32_t(8 + payload.size());
  std::string out{char(size >> 24), char(size >> 16), char(size >> 8), char(size)};
  return out + type + payload;
}
std::string u32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

// A moof of one sample whose flags are where `where` says: trun's first-sample flags, the sample's own, tfhd's
// defaults, or nowhere (the trex defaults then).
std::string moof(const std::string& where, uint32_t flags) {
  std::string tfhd = u32(where == "tfhd" ? 0x020020 : 0x020000) + u32(1);  // (0x020000: default-base-is-moof)
  if (where == "tfhd") tfhd += u32(flags);
  uint32_t tr = 0x1;  // data offset
  if (where == "first") tr |= 0x4;
  if (where == "sample") tr |= 0x100 | 0x200 | 0x400;
  std::string trun = u32(tr) + u32(1) + u32(0);
  if (where == "first") trun += u32(flags);
  if (where == "sample") trun += u32(3000) + u32(1234) + u32(flags);
  return box("moof", box("mfhd", u32(0) + u32(1)) + box("traf", box("tfhd", tfhd) + box("trun", trun)));
}

}  // namespace

TEST_CASE("live view: which fragments start on a keyframe, boxes read as they come") {
  constexpr uint32_t kSync = 0x02000000, kNonSync = 0x01010000;  // (depends on none / on others and non-sync)
  for (const char* where : {"first", "sample", "tfhd"}) {
    CAPTURE(where);
    CHECK(pipeline::fragment_starts_with_keyframe(moof(where, kSync), kNonSync));
    CHECK_FALSE(pipeline::fragment_starts_with_keyframe(moof(where, kNonSync), kSync));
  }
  // Neither trun nor tfhd says: the init segment's trex defaults do.
  const auto trex = box("trex", u32(0) + u32(1) + u32(1) + u32(0) + u32(0) + u32(kNonSync));
  const auto moov = box("moov", box("mvhd", std::string(100, '\0')) + box("mvex", trex));
  CHECK(pipeline::trex_default_sample_flags(moov) == kNonSync);
  CHECK_FALSE(pipeline::fragment_starts_with_keyframe(moof("none", 0), pipeline::trex_default_sample_flags(moov)));
  CHECK(pipeline::fragment_starts_with_keyframe(moof("none", 0), kSync));
  // A moof it cannot read is not a keyframe (never a place to join).
  CHECK_FALSE(pipeline::fragment_starts_with_keyframe(box("moof", "short"), kSync));
  CHECK_FALSE(pipeline::fragment_starts_with_keyframe(moof("first", kSync).substr(0, 40), kSync));

  // Bytes in any pieces: whole boxes out, in order; a size smaller than its header is an error.
  const auto all = box("ftyp", "isom") + moov + moof("first", kSync) + box("mdat", std::string(5000, 'x'));
  pipeline::Mp4BoxReader reader;
  std::vector<std::string> types;
  for (size_t at = 0; at < all.size(); at += 7) {
    reader.append(std::string_view(all).substr(at, 7));
    while (auto b = reader.next()) types.push_back(b->type);
  }
  CHECK(types == std::vector<std::string>{"ftyp", "moov", "moof", "mdat"});
  pipeline::Mp4BoxReader bad;
  bad.append(u32(4) + "moof");
  CHECK_THROWS_AS(bad.next(), vc::DataError);
}

TEST_CASE("live view: remuxed H.264, an encoded test pattern, results with their place in the video, bounds") {
  Service svc("live");
  // A 2 s H.264 file with a keyframe every 10 pictures, looped; a VP8 file (MP4 here does not carry it); a test pattern.
  const auto media = svc.dir() + "/media";
  REQUIRE(run_command("gst-launch-1.0 -q videotestsrc num-buffers=60 pattern=ball ! video/x-raw,width=320,height=240,"
                      "framerate=30/1 ! x264enc key-int-max=10 speed-preset=ultrafast ! h264parse ! mp4mux ! filesink "
                      "location='" + media + "/ball.mp4'").code == 0);
  REQUIRE(run_command("gst-launch-1.0 -q videotestsrc num-buffers=60 ! video/x-raw,width=320,height=240,framerate=30/1 ! "
                      "vp8enc deadline=1 ! webmmux ! filesink location='" + media + "/vp8.webm'").code == 0);
  svc.write_config("inputs:\n"
                   "  - {name: f, kind: file, path: media/ball.mp4, loop: true, realtime: true}\n"
                   "  - {name: v, kind: file, path: media/vp8.webm, loop: true, realtime: true}\n"
                   "  - {name: t, kind: test, pattern: smpte, width: 320, height: 240, fps: 30}\n",
                   "  live_clients_per_stream: 1\n");
  svc.start();
  svc.wait_frames("f", 0);
  svc.wait_frames("v", 0);
  svc.wait_frames("t", 0);

  // The file's own H.264, and its results while it is watched: both for 3 s, at once.
  const auto dir = svc.dir();
  (void)run_command("curl -s -D '" + dir + "/f.headers' --max-time 3 -o '" + dir + "/f.mp4' '" +
                    svc.url("/api/v1/streams/f/live.mp4") + "' & curl -s -N --max-time 3 -o '" + dir + "/f.events' '" +
                    svc.url("/api/v1/streams/f/results") + "' & wait");
  const auto headers = svc.file("f.headers");
  CHECK(headers.find("200") != std::string::npos);
  CHECK(headers.find("video/mp4") != std::string::npos);
  const auto at = headers.find("X-Live-Session: ");
  REQUIRE(at != std::string::npos);
  const auto session = std::stoull(headers.substr(at + 16));
  const auto f = read_boxes(dir + "/f.mp4");
  const int fragments = check_fragmented_mp4(f);
  CHECK(fragments >= 30);  // 3 s at 30 fps, less the wait for a keyframe and the start
  // Whole, it is a video GStreamer's own demuxer and decoder play to the end.
  std::ofstream(dir + "/f-whole.mp4", std::ios::binary) << f.whole;
  const auto play = run_command("gst-launch-1.0 -q filesrc location='" + dir + "/f-whole.mp4' ! qtdemux ! h264parse ! "
                                "avdec_h264 ! fakesink 2>&1");
  CHECK_MESSAGE(play.code == 0, play.output);

  // The results as events: the results lines, with the frame's place in the session's video while watched, in order.
  std::istringstream events(svc.file("f.events"));
  int lines = 0, placed = 0;
  double last_t = -1;
  for (std::string line; std::getline(events, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    const auto r = json::parse(line.substr(6), nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r["stream"] == "f");
    CHECK(!r["top"].empty());
    ++lines;
    if (r.contains("live")) {
      CHECK(r["live"]["session"].get<uint64_t>() == session);
      CHECK(r["live"]["t"].get<double>() > last_t);  // across the file's loop too: the video's time runs on
      last_t = r["live"]["t"].get<double>();
      ++placed;
    }
  }
  CHECK(lines >= 30);
  CHECK(placed >= 20);

  // A raw test pattern: encoded for the viewer (H.264 too), starting on a keyframe at once.
  (void)run_command("curl -s --max-time 2 -o '" + dir + "/t.mp4' '" + svc.url("/api/v1/streams/t/live.mp4") + "'");
  CHECK(check_fragmented_mp4(read_boxes(dir + "/t.mp4")) >= 20);

  // VP8 does not go into MP4 here: 415 (the page shows live.mjpeg); an unknown stream: 404.
  auto r = svc.get("/api/v1/streams/v/live.mp4");
  CHECK(r.status == 415);
  CHECK(r.parsed()["error"].get<std::string>().find("H.264") != std::string::npos);
  CHECK(svc.get("/api/v1/streams/nope/live.mp4").status == 404);
  CHECK(svc.get("/api/v1/streams/nope/results").status == 404);
  // Several streams in one feed: a name twice is refused (it would take two places), a made-up one is 404.
  CHECK(svc.get("/api/v1/results?streams=f,f").status == 422);
  CHECK(svc.get("/api/v1/results?streams=f,made-up").status == 404);
  CHECK(svc.get("/api/v1/results").status == 422);
  (void)run_command("curl -s -N --max-time 2 -o '" + dir + "/ft.events' '" + svc.url("/api/v1/results?streams=f,t") + "'");
  const auto both = svc.file("ft.events");
  CHECK(both.find(R"("stream":"f")") != std::string::npos);
  CHECK(both.find(R"("stream":"t")") != std::string::npos);

  // One viewer per stream (api.live_clients_per_stream: 1): a second is turned away while the first watches.
  (void)run_command("curl -s --max-time 3 -o '" + dir + "/first.mp4' '" + svc.url("/api/v1/streams/t/live.mp4") +
                    "' & until [ -s '" + dir + "/first.mp4' ]; do sleep 0.05; done; curl -s -o /dev/null -w '%{http_code}' '" +
                    svc.url("/api/v1/streams/t/live.mp4") + "' >'" + dir + "/second.txt'; wait");
  CHECK(svc.file("second.txt") == "503");

  // Counted: bytes sent to f's viewers; nobody watches now.
  const auto metrics = svc.get("/metrics").body;
  CHECK(metrics.find("vc_live_viewers{stream=\"f\"} 0") != std::string::npos);
  CHECK(metrics.find("made-up") == std::string::npos);  // (a name no stream has adds nothing)
  const auto sent = metrics.find("vc_live_sent_bytes_total{stream=\"f\"} ");
  REQUIRE(sent != std::string::npos);
  CHECK(std::stod(metrics.substr(sent + 38)) > 10000);
  CHECK(svc.stop() == 0);
}
