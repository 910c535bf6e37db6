#include "pipeline/sources/image_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"

namespace vc::pipeline {
namespace {

namespace fs = std::filesystem;

// Why `path` cannot be read as an image ("" when it can).
std::string unusable(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);  // follows links: a loop or a dangling link fails here
  if (ec) return ec.message();
  if (!fs::is_regular_file(status)) return "not a regular file";
  if (::access(path.c_str(), R_OK) != 0) return "not readable (permissions)";
  return "";
}

}  // namespace

bool is_image_name(const std::string& path) {
  auto ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

std::vector<std::string> image_files(const std::string& spec) {
  auto log = vc::log::get("pipeline");
  std::vector<std::string> candidates;
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(spec, ec));
  if (exists && fs::is_directory(spec, ec)) {
    for (auto it = fs::directory_iterator(spec, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (is_image_name(it->path().string())) candidates.push_back(it->path().string());
    }
    if (ec) log->warn("{}: the folder could not be read to its end: {}", spec, ec.message());
  } else if (!exists && spec.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    if (glob(spec.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) candidates.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
  } else {
    if (!exists) throw NoInputError(fmt::format("{}: no such image", spec));
    if (const auto why = unusable(spec); !why.empty()) throw NoInputError(fmt::format("{}: {}", spec, why));
    return {spec};
  }
  std::vector<std::string> files;
  size_t skipped = 0;
  for (auto& c : candidates) {
    if (const auto why = unusable(c); !why.empty()) {
      log->warn("{}: skipped: {}", c, why);
      ++skipped;
      continue;
    }
    files.push_back(std::move(c));
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    throw NoInputError(skipped > 0 ? fmt::format("{}: no usable image ({} skipped: see the warnings)", spec, skipped)
                                   : fmt::format("{}: no images (.jpg, .jpeg, .png, .bmp) found", spec));
  }
  return files;
}

std::vector<std::string> image_files_in(int dir, const std::string& spec) {
  const int copy = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  DIR* listing = copy >= 0 ? ::fdopendir(copy) : nullptr;
  if (!listing) {
    if (copy >= 0) ::close(copy);
    throw NoInputError(fmt::format("{}: the folder cannot be read", spec));
  }
  ::rewinddir(listing);
  std::vector<std::string> files;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    struct stat st {};
    if (!is_image_name(name) || ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;  // (a link, a folder, a device: not read)
    }
    files.push_back((fs::path(spec) / name).string());
  }
  ::closedir(listing);
  std::sort(files.begin(), files.end());
  if (files.empty()) throw NoInputError(fmt::format("{}: no images (.jpg, .jpeg, .png, .bmp) found (links are not followed)", spec));
  return files;
}

int open_image_in(int dir, const std::string& name) {
  const int fd = ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = EINVAL;
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace vc::pipeline
