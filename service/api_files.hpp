// The files the API makes the app open, each checked as the file actually opened: a file or image input added over
// the API (inside one of api.allowed_dirs, no link followed on the way, no glob pattern; a file: URI read by GLib's
// own parser and treated as the file it names; other URIs only with an allowed scheme), and the event files the
// page shows (inside events.dir, no link followed, whole or a byte range). The input is opened here and handed to the
// pipeline open (pipeline/core/opened_input.hpp): nothing can swap the file between the check and the read.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/opened_input.hpp"
#include "service/http/http_message.hpp"

namespace vc::service {

class AllowedDirs {
 public:
  explicit AllowedDirs(const std::vector<std::string>& dirs);

  // Checks an input added over the API and opens its file or folder (null for inputs that read no file: cameras,
  // test patterns, network URIs). A file: URI becomes a file input of that path. Throws pipeline::RequestError 403
  // (outside the allowed folders, through a link, a glob pattern, "." or "..", a URI scheme not allowed) or
  // vc::Error (no such file, unreadable, not a regular file or folder: the API's 422).
  std::shared_ptr<pipeline::OpenedInput> open(config::Input& input) const;

  // The URI schemes an input added over the API may use.
  static const std::vector<std::string>& schemes();

 private:
  struct Dir {
    std::string as_given, canonical;  // absolute, normalized; and with its links resolved
  };
  std::vector<Dir> dirs_;
};

// An event file as the answer to GET /api/v1/event-files/RELATIVE: the whole file, or the one byte range `range` (a
// Range header) asks for (206; 416 when it cannot be satisfied); 404 unless it is a regular file under `dir` reached
// without a link.
http::Response event_file(const std::string& dir, const std::string& relative, const std::string& range);

}  // namespace vc::service
