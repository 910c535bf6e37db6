#include "service/api_files.hpp"

#include <fcntl.h>
#include <glib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/errors.hpp"
#include "pipeline/core/control.hpp"
#include "service/api_views.hpp"
#include "service/http/router.hpp"

namespace vc::service {

namespace fs = std::filesystem;
using pipeline::RequestError;

namespace {

// Closes a descriptor when it goes out of scope, unless released.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int release() { return std::exchange(fd, -1); }
};

// A path's components, or nothing when it has "." or ".." among them (never resolved over the API: a link before a
// ".." makes the textual and the real parent differ).
std::optional<std::vector<std::string>> components(const fs::path& relative) {
  std::vector<std::string> out;
  for (const auto& part : relative) {
    const auto s = part.string();
    if (s.empty() || s == "/") continue;
    if (s == "." || s == "..") return std::nullopt;
    out.push_back(s);
  }
  return out;
}

// Opens `parts` under the directory `dirfd` without following a link anywhere on the way: each folder is opened with
// O_NOFOLLOW | O_DIRECTORY (a link is not a folder), the last part with O_NOFOLLOW (a link fails). The last part must
// be a regular file (`directory` false) or a folder (true). -1 with errno set on failure (ELOOP/ENOTDIR: a link or a
// file on the way; ENOENT; EACCES; EINVAL: neither a regular file nor a folder).
int open_no_links(int dirfd, const std::vector<std::string>& parts, bool directory) {
  Fd current(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (current.fd < 0) return -1;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    int flags = O_CLOEXEC | O_NOFOLLOW;
    if (!last) flags |= O_PATH | O_DIRECTORY;
    else flags |= directory ? (O_RDONLY | O_DIRECTORY) : (O_RDONLY | O_NONBLOCK);  // (a FIFO never blocks the open)
    Fd next(::openat(current.fd, parts[i].c_str(), flags));
    if (next.fd < 0) return -1;
    std::swap(current.fd, next.fd);
  }
  if (parts.empty() && directory) {  // the allowed folder itself
    Fd self(::openat(current.fd, ".", O_CLOEXEC | O_RDONLY | O_DIRECTORY));
    if (self.fd < 0) return -1;
    std::swap(current.fd, self.fd);
  }
  struct stat st {};
  if (::fstat(current.fd, &st) != 0) return -1;
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return -1;
  }
  if (!directory) ::fcntl(current.fd, F_SETFL, ::fcntl(current.fd, F_GETFL) & ~O_NONBLOCK);
  return current.release();
}

// The scheme of a URI as GLib reads it (lower case), and for a file: URI its local path; throws RequestError 403
// for one it cannot read.
std::string glib_scheme(const std::string& uri, std::string& local_path) {
  GError* error = nullptr;
  GUri* parsed = g_uri_parse(uri.c_str(), G_URI_FLAGS_NONE, &error);
  if (!parsed) {
    const std::string why = error ? error->message : "not a URI";
    if (error) g_error_free(error);
    throw RequestError(403, fmt::format("input.uri: not a URI this service reads ({})", why));
  }
  std::string scheme = g_uri_get_scheme(parsed);
  g_uri_unref(parsed);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  // The text before the first ':' is what GStreamer takes for the scheme too: the two must agree.
  const auto colon = uri.find(':');
  if (colon == std::string::npos || g_ascii_strncasecmp(uri.c_str(), scheme.c_str(), colon) != 0 || colon != scheme.size()) {
    throw RequestError(403, "input.uri: its scheme cannot be read unambiguously");
  }
  if (scheme == "file") {
    gchar* host = nullptr;
    gchar* path = g_filename_from_uri(uri.c_str(), &host, &error);
    const bool remote = host && std::strcmp(host, "localhost") != 0;
    g_free(host);
    if (!path || remote) {
      const std::string why = error ? error->message : "a file on another host";
      if (error) g_error_free(error);
      g_free(path);
      throw RequestError(403, fmt::format("input.uri: not a local file ({})", why));
    }
    local_path = path;
    g_free(path);
  }
  return scheme;
}

}  // namespace

const std::vector<std::string>& AllowedDirs::schemes() {
  static const std::vector<std::string> allowed = {"rtsp", "rtsps", "rtspt", "http", "https", "file", "udp", "srt"};
  return allowed;
}

AllowedDirs::AllowedDirs(const std::vector<std::string>& dirs) {
  for (const auto& d : dirs) {
    std::error_code ec;
    const auto given = fs::absolute(d).lexically_normal();
    const auto canonical = fs::weakly_canonical(given, ec);
    dirs_.push_back({given.string(), (ec ? given : canonical).lexically_normal().string()});
  }
}

std::shared_ptr<pipeline::OpenedInput> AllowedDirs::open(config::Input& in) const {
  if (in.kind == config::InputKind::Uri) {
    std::string local;
    const auto scheme = glib_scheme(in.uri, local);
    if (std::find(schemes().begin(), schemes().end(), scheme) == schemes().end()) {
      throw RequestError(403, fmt::format("input.uri: the scheme '{}' is not accepted over the API (accepted: {})", scheme,
                                          fmt::join(schemes(), ", ")));
    }
    if (scheme != "file") return nullptr;
    in.kind = config::InputKind::File;  // a file: URI is the file it names, checked and opened as one
    in.path = local;
    in.uri.clear();
  }
  if (in.kind == config::InputKind::Webcam) {  // a camera, not any file under /dev or elsewhere
    struct stat st {};
    static const std::regex video_device(R"(/dev/video[0-9]{1,3})");
    // (one that is not plugged in goes on: it fails to start as in a config file, 422 "no such camera")
    const bool exists = ::stat(in.device.c_str(), &st) == 0;
    if (!std::regex_match(in.device, video_device) || (exists && !S_ISCHR(st.st_mode))) {
      throw RequestError(403, fmt::format("input.device: '{}': over the API a camera is /dev/videoN (a V4L2 device)",
                                          in.device));
    }
    return nullptr;
  }
  if (in.kind != config::InputKind::File && in.kind != config::InputKind::Image) return nullptr;
  const std::string& spec = in.path;
  if (spec.find_first_of("*?[") != std::string::npos) {
    throw RequestError(403, fmt::format("input.path: '{}': glob patterns are not accepted over the API (name a file or "
                                        "a folder)", spec));
  }
  const auto path = fs::absolute(spec);
  const auto parts = components(path);
  if (!parts) {
    throw RequestError(403, fmt::format("input.path: '{}': '.' and '..' are not accepted over the API (name the file "
                                        "inside api.allowed_dirs directly)", spec));
  }
  const auto outside = [&] {
    return RequestError(403, dirs_.empty() ? fmt::format("input: '{}': files may not be read over the API "
                                                         "(api.allowed_dirs is empty)", spec)
                                           : fmt::format("input: '{}' is outside api.allowed_dirs", spec));
  };
  for (const auto& dir : dirs_) {
    for (const auto& base : {dir.as_given, dir.canonical}) {
      const auto rel = path.lexically_relative(base);
      if (rel.empty() || *rel.begin() == "..") continue;
      const auto rest = rel == "." ? std::optional<std::vector<std::string>>(std::vector<std::string>{}) : components(rel);
      if (!rest) continue;
      Fd root(::open(dir.canonical.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (root.fd < 0) throw outside();
      // A folder of images, or one file (an image input may be either: a folder is tried when the name is one).
      bool directory = false;
      if (in.kind == config::InputKind::Image) {
        struct stat st {};
        directory = ::fstatat(root.fd, rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      const int fd = open_no_links(root.fd, *rest, directory);
      if (fd >= 0) return std::make_shared<pipeline::OpenedInput>(fd, directory);
      const int err = errno;
      if (err == ENOENT) throw NoInputError(fmt::format("{}: no such file", spec));
      if (err == ELOOP || err == ENOTDIR) {
        throw RequestError(403, fmt::format("input: '{}': a link on the way (links are not followed for files added "
                                            "over the API: name the file inside api.allowed_dirs itself)", spec));
      }
      if (err == EINVAL) throw NoInputError(fmt::format("{}: not a regular file{}", spec, directory ? " or folder" : ""));
      throw NoInputError(fmt::format("{}: cannot be read ({})", spec, std::strerror(err)));
    }
  }
  throw outside();
}

http::Response event_file(const std::string& dir, const std::string& relative, const std::string& range) {
  std::error_code ec;
  const auto base = fs::weakly_canonical(fs::absolute(dir), ec);
  const auto parts = components(fs::path(relative));
  if (ec || !parts || parts->empty()) return http::error_response(404, "no such event file");
  Fd root(::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.fd < 0) return http::error_response(404, "no such event file");
  Fd file(open_no_links(root.fd, *parts, false));
  struct stat st {};
  if (file.fd < 0 || ::fstat(file.fd, &st) != 0) return http::error_response(404, "no such event file");
  const auto size = uint64_t(st.st_size);
  uint64_t first = 0, last = size ? size - 1 : 0;
  bool partial = false;
  // One range ("bytes=A-B", "bytes=A-", "bytes=-N"); anything else is ignored (the whole file), as RFC 9110 allows.
  if (range.rfind("bytes=", 0) == 0 && range.find(',') == std::string::npos) {
    const auto spec = range.substr(6);
    const auto dash = spec.find('-');
    try {
      if (dash == 0 && spec.size() > 1) {
        const auto n = std::stoull(spec.substr(1));
        first = n >= size ? 0 : size - n;
        partial = n > 0;
      } else if (dash != std::string::npos && dash > 0) {
        first = std::stoull(spec.substr(0, dash));
        if (dash + 1 < spec.size()) last = std::min<uint64_t>(last, std::stoull(spec.substr(dash + 1)));
        partial = true;
      }
    } catch (const std::exception&) {
      partial = false;
      first = 0;
      last = size ? size - 1 : 0;
    }
    if (partial && (first >= size || first > last)) {
      return http::error_response(416, "the range is outside the file").header("Content-Range", fmt::format("bytes */{}", size));
    }
  }
  http::Response r;
  r.status = partial ? 206 : 200;
  r.content_type = media_type(relative);
  r.header("Accept-Ranges", "bytes").header("Cache-Control", "private, max-age=60");
  if (partial) r.header("Content-Range", fmt::format("bytes {}-{}/{}", first, last, size));
  r.file = std::make_shared<http::FileRange>(file.release(), first, size ? last - first + 1 : 0);
  return r;
}

}  // namespace vc::service
