// An input's file or folder opened by the layer that checked it (the service: inside api.allowed_dirs, no link
// followed): a source given one reads exactly what was checked — the file through /proc/self/fd, a folder's images
// opened from it with no link followed — and never looks the path up again.
#pragma once
#include <unistd.h>

#include <string>

namespace vc::pipeline {

struct OpenedInput {
  OpenedInput(int owned_fd, bool is_directory) : fd(owned_fd), directory(is_directory) {}
  ~OpenedInput() {
    if (fd >= 0) ::close(fd);
  }
  OpenedInput(const OpenedInput&) = delete;
  OpenedInput& operator=(const OpenedInput&) = delete;

  // A path that opens this very file again, whatever has happened to its name since.
  [[nodiscard]] std::string proc_path() const { return "/proc/self/fd/" + std::to_string(fd); }

  const int fd;
  const bool directory;  // a folder of images (kind image)
};

}  // namespace vc::pipeline
