#include "pipeline/sources/input_checks.hpp"

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "config/errors.hpp"

namespace vc::pipeline {

namespace fs = std::filesystem;

void check_readable_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw NoInputError(fmt::format("{}: no such file", path));
  if (!fs::is_regular_file(path, ec)) throw NoInputError(fmt::format("{}: not a regular file", path));
  if (access(path.c_str(), R_OK) != 0) throw NoInputError(fmt::format("{}: not readable (permissions)", path));
  if (fs::file_size(path, ec) == 0) throw DataError(fmt::format("{}: the file is empty (0 bytes)", path));
}

bool is_live_input(const config::Input& in) {
  if (in.live != config::Live::Auto) return in.live == config::Live::Yes;
  switch (in.kind) {
    case config::InputKind::Test:
    case config::InputKind::Webcam: return true;
    case config::InputKind::Uri: {
      // Streams without an end: RTSP, RTMP, RTP/UDP, SRT. A file:// or http(s):// URL is a clip (it ends).
      const auto scheme = in.uri.substr(0, in.uri.find("://"));
      for (const char* live : {"rtsp", "rtsps", "rtspt", "rtmp", "rtmps", "udp", "rtp", "srt"}) {
        if (scheme == live) return true;
      }
      return false;
    }
    case config::InputKind::File: return in.realtime;
    case config::InputKind::Image: return false;
  }
  return false;
}

}  // namespace vc::pipeline
