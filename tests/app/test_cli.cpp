// The CLI's exit codes, run as users run it: the real binary in a subprocess.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "app/results_readers.hpp"
#include "config/errors.hpp"
#include "config/version.hpp"
#include "test_helpers.hpp"

TEST_SUITE_BEGIN("cli");

namespace {

vc::test::CommandResult run_app(const std::string& args) {
  return vc::test::run_command(std::string("'") + VC_APP_BINARY + "' " + args);
}

}  // namespace

// evaluate's readers, on streams: malformed lines are a DataError naming the line, never a crash.
TEST_CASE("evaluate's readers reject a results line without a label") {  // found by fuzz/fuzz_results
  auto reject = [](const std::string& text, bool smoothed) {
    std::istringstream in(text);
    try {
      vc::app::read_results(in, "r.jsonl", smoothed);
    } catch (const vc::DataError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(reject(R"({"frame":0,"top":[{"lcbel":"x"}]})" "\n", false).rfind("r.jsonl:1: not a results line", 0) == 0);
  CHECK(reject("\n" R"({"frame":0,"top":[],"smoothed":{"lbl":"x"}})" "\n", true).rfind("r.jsonl:2: not a results line", 0) == 0);
  // A frame that is no integer: converting 1e300 to int64 was undefined behaviour (fuzz_results, UBSan).
  CHECK(reject(R"({"frame":1e300,"top":[{"label":"x"}]})" "\n", false).find("\"frame\" is 1e+300") != std::string::npos);
  CHECK(reject(R"({"frame":2.5,"top":[{"label":"x"}]})" "\n", false).rfind("r.jsonl:1: not a results line", 0) == 0);
  CHECK(reject(R"({"frame":18446744073709551615,"top":[{"label":"x"}]})" "\n", false)
            .rfind("r.jsonl:1: not a results line", 0) == 0);
  std::istringstream good(R"({"frame":3,"top":[{"label":"cat"}],"smoothed":{"label":"dog"}})" "\n");
  CHECK(vc::app::read_results(good, "r.jsonl", true).at({3, ""}) == "dog");
  std::istringstream truth("# comment\r\n7\t  a label\r\n");
  CHECK(vc::app::read_truth(truth, "t.txt").at({7, ""}) == "a label");
  std::istringstream regions("4\tgate\topen\n4\tclosed yard\n");  // a region's label, and the whole picture's
  const auto r = vc::app::read_truth(regions, "t.txt");
  CHECK(r.at({4, "gate"}) == "open");
  CHECK(r.at({4, ""}) == "closed yard");
  std::istringstream region_line(R"({"frame":4,"region":"gate","top":[{"label":"open"}]})" "\n");
  CHECK(vc::app::read_results(region_line, "r.jsonl", false).at({4, "gate"}) == "open");
}

TEST_CASE("--help and --version exit 0") {
  auto r = run_app("--help");
  CHECK(r.code == 0);
  CHECK(r.output.find("--config") != std::string::npos);
  r = run_app("--version");
  CHECK(r.code == 0);
  CHECK(r.output.find(vc::kVersion) != std::string::npos);
}

TEST_CASE("usage errors exit 64") {
  CHECK(run_app("--no-such-flag").code == 64);
  CHECK(run_app("frobnicate").code == 64);
  CHECK(run_app("evaluate").code == 64);  // required options missing
}

TEST_CASE("config errors exit 78 and say where") {
  auto r = run_app("--set model.top_k=0 config");
  CHECK(r.code == 78);
  CHECK(r.output.find("model.top_k: 0 is out of range") != std::string::npos);
  const auto path = std::filesystem::temp_directory_path() / "vc-cli-bad.yaml";
  std::ofstream(path) << "input:\n  kind: file\n  bogus: 1\n";
  r = run_app("--config '" + path.string() + "' config");
  CHECK(r.code == 78);
  CHECK(r.output.find(path.string() + ":3:3: input.bogus: unknown key") != std::string::npos);
  CHECK(run_app("--log-level loud config").code == 78);
}

TEST_CASE("a missing config file exits 66") {
  auto r = run_app("--config /nonexistent.yaml config");
  CHECK(r.code == 66);
  CHECK(r.output.find("/nonexistent.yaml") != std::string::npos);
}

TEST_CASE("config prints the effective configuration with overrides applied") {
  auto r = run_app("--config assets/configs/webcam.yaml --set model.top_k=2 --input test:ball config");
  CHECK(r.code == 0);
  CHECK(r.output.find("top_k: 2") != std::string::npos);
  CHECK(r.output.find("pattern: ball") != std::string::npos);
  CHECK(r.output.find("kind: test") != std::string::npos);
}

TEST_CASE("doctor runs and distinguishes no GPU from a broken install") {
  auto r = run_app("doctor");
  CAPTURE(r.output);
  CHECK((r.code == 0 || r.code == 69 || r.code == 72));
  CHECK(r.output.find("cuDNN") != std::string::npos);
  CHECK(r.output.find("GStreamer") != std::string::npos);
  if (r.code == 69) CHECK(r.output.find("NO GPU") != std::string::npos);
}

TEST_CASE("a crash writes its signal, its thread and the call stack, and still dies of the signal") {
  // A real process hit by SIGSEGV while it classifies (sent once it has logged: the handler is in place from main's
  // first line on).
  const std::string err = (std::filesystem::temp_directory_path() / ("vc-crash-" + std::to_string(getpid()) + ".log")).string();
  const auto r = vc::test::run_command(
      std::string("'") + VC_APP_BINARY + "' --input test --output none --set inference.device=cpu --model "
      "tests/fixtures/basic_narrow.safetensors >/dev/null 2>'" + err + "' & pid=$!; "
      "for i in $(seq 600); do grep -q 'engine' '" + err + "' && break; sleep 0.1; done; "
      "kill -SEGV $pid; wait $pid; echo \"exit status $?\"; cat '" + err + "'; rm -f '" + err + "'");
  CAPTURE(r.output);
  CHECK(r.output.find("exit status 139") != std::string::npos);  // 128 + SIGSEGV: what a supervisor sees
  CHECK(r.output.find("video-classifier crashed: SEGV in thread ") != std::string::npos);
  CHECK(r.output.find("the call stack:\n") != std::string::npos);
  CHECK(r.output.find("video-classifier(+0x") != std::string::npos);  // the frames, for addr2line
}

TEST_SUITE_END();
