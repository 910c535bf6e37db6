// Nothing a user gives is ever destroyed, and mistakes get user errors: outputs that would overwrite an input
// (file:// URIs, results files, image folders), stream names that would escape a folder, image folders with
// entries that cannot be read, file names that look like globs, Ctrl-C in the first moments, streams that had
// finished before Ctrl-C.
#include <doctest/doctest.h>

#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("safety");

namespace {

// A small folder of images made by GStreamer (PNG test patterns).
std::string make_images(const std::string& folder, int count) {
  const auto dir = path(folder);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int i = 0; i < count; ++i) {
    const auto r = run_command("gst-launch-1.0 -q videotestsrc num-buffers=1 pattern=" + std::to_string(i % 10) +
                               " ! video/x-raw,width=64,height=48 ! pngenc ! filesink location='" + dir + "/img" +
                               std::to_string(i) + ".png'");
    REQUIRE_MESSAGE(r.code == 0, r.output);
  }
  return dir;
}

}  // namespace

TEST_CASE("a file:// input named again as the output or the results file is refused (64) and survives") {
  const auto src = make_video("uri-precious.mp4", 20);
  const auto before = slurp(src);
  const auto uri = "file://" + fs::absolute(src).string();
  auto r = run_command(app("--input '" + uri + "' --output '" + src + "'"));
  CHECK(r.code == 64);
  CHECK(r.output.find("refusing to overwrite") != std::string::npos);
  r = run_command(app("--input '" + uri + "' --output none --set output.results='" + src + "'"));
  CHECK(r.code == 64);
  CHECK(slurp(src) == before);
}

TEST_CASE("an images output into the input images' folder is refused (64); the originals survive") {
  const auto dir = make_images("same-folder", 3);
  const auto before = slurp(dir + "/img0.png");
  // Any pattern into that folder (other names, another format: the issue's 'imgs/%s.png' over JPEG inputs) too.
  for (const auto& out : {dir + "/", dir + "/%s.png", dir + "/%s.jpg", dir + "/%s-labelled.png"}) {
    CAPTURE(out);
    const auto r = run_command(app("--input '" + dir + "/' --output '" + out + "'"));
    CHECK(r.code == 64);
    CHECK(r.output.find("input") != std::string::npos);
  }
  CHECK(slurp(dir + "/img0.png") == before);
  CHECK(fs::directory_iterator(dir) != fs::directory_iterator());
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 3);  // nothing added, nothing replaced
}

TEST_CASE("a stream name that would leave its folder is refused before anything is written (78)") {
  const auto out = path("names") + "/{stream}/o.mkv";
  const auto r = run_command(app("--input test --set input.max_frames=5 --set input.name=.. --output '" + out + "'"));
  CHECK(r.code == 78);
  CHECK(r.output.find("input.name") != std::string::npos);
  CHECK(!fs::exists(path("o.mkv")));
}

TEST_CASE("an image folder with a symlink loop and an unreadable image: they are skipped with a warning, never 70") {
  const auto dir = make_images("loopy", 2);
  fs::create_symlink("loop-b.png", dir + "/loop-a.png");
  fs::create_symlink("loop-a.png", dir + "/loop-b.png");
  const auto jsonl = path("loopy.jsonl");
  auto r = run_command(app("--input '" + dir + "/' --output none --set output.results='" + jsonl + "' --log-level warn"));
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("loop-a.png: skipped") != std::string::npos);
  CHECK(frame_lines(jsonl) == 2);
  // Nothing usable left: missing input (66), with the reason.
  const auto only_loops = path("only-loops");
  fs::remove_all(only_loops);
  fs::create_directories(only_loops);
  fs::create_symlink("b.png", only_loops + "/a.png");
  fs::create_symlink("a.png", only_loops + "/b.png");
  r = run_command(app("--input '" + only_loops + "/' --output none"));
  CHECK(r.code == 66);
  CHECK(r.output.find("no usable image") != std::string::npos);
}

TEST_CASE("an existing video whose name holds glob characters is that video, not an image glob") {
  const auto odd = path("q?x.mp4");
  fs::copy_file(make_video("plain-for-glob.mp4", 12), odd, fs::copy_options::overwrite_existing);
  const auto jsonl = path("globby.jsonl");
  const auto r = run_command(app("--input '" + odd + "' --output none --set output.results='" + jsonl + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const auto lines = read_jsonl(jsonl);
  int frames = 0;
  for (const auto& j : lines) {
    if (!j.contains("top")) continue;
    ++frames;
    CHECK(j["pts"].is_number());     // a video: frames on a timeline…
    CHECK(j.contains("smoothed"));   // …smoothed across frames
  }
  CHECK(frames == 12);
}

TEST_CASE("one image in, one image file out (not a folder named like the file)") {
  const auto dir = make_images("single-in", 1);
  const auto out = path("single-out.jpg");
  fs::remove_all(out);
  auto r = run_command(app("--input '" + dir + "/img0.png' --output '" + out + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(fs::is_regular_file(out));
  CHECK(fs::file_size(out) > 100);
  // Several frames cannot go into one image file: said up front.
  r = run_command(app("--input test --set input.max_frames=3 --output '" + out + "'"));
  CHECK(r.code == 78);
  CHECK(r.output.find("one image file") != std::string::npos);
}

TEST_CASE("two Ctrl-C in the first moments never leave an empty file under the output's real name") {
  for (const char* delay : {"0.2", "0.6", "1.2"}) {
    CAPTURE(delay);
    const auto out = path(std::string("early-") + delay + ".mkv");
    fs::remove(out);
    fs::remove(out + ".partial");
    run_command("(" + app_direct("--input test --set input.fps=30 --output '" + out + "'") + ") & pid=$!; sleep " + delay +
                "; kill -INT $pid; sleep 0.05; kill -INT $pid; wait $pid");
    if (fs::exists(out)) {
      CHECK(fs::file_size(out) > 0);
      CHECK(count_frames(out) >= 0);  // it parses: a header at the least
    }
  }
}

TEST_CASE("a stream that had finished before Ctrl-C is reported ok, the others interrupted") {
  const auto clip = make_video("done-early.mp4", 10);
  const auto jsonl = path("done-early.jsonl");
  fs::remove(jsonl);
  // Ctrl-C once the clip's stream_end is in the results (a latch on the file, not a guess at timing).
  const auto r = run_command("(" + app_direct("--input '" + clip + "' --input test --set inputs.1.fps=30 --output none "
                                              "--set output.results='" + jsonl + "' --log-level info") +
                             ") & pid=$!; for i in $(seq 600); do grep -q '\"stream_end\",\"stream\":\"stream0\"' '" + jsonl +
                             "' 2>/dev/null && break; sleep 0.1; done; kill -INT $pid; wait $pid");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(std::regex_search(r.output, std::regex(R"(stream0\s+10\s+0\s.*\bok\b)")));
  CHECK(std::regex_search(r.output, std::regex(R"(stream1\s+\d+\s+\d+\s.*interrupted)")));
}

TEST_SUITE_END();
