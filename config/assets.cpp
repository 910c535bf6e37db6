#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "config/version.hpp"

namespace vc::config {

std::string bundled_asset(const std::string& relative) {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("VC_ASSETS_DIR"); env && *env) roots.emplace_back(env);
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    roots.push_back(exe.parent_path() / "../share/video-classifier/assets");
    roots.push_back(exe.parent_path() / "../../assets");  // build/app/video-classifier in a source checkout
  }
  roots.push_back(fs::path(kSourceDir) / "assets");
  roots.emplace_back("assets");
  std::vector<std::string> tried;
  for (const auto& root : roots) {
    const auto candidate = (root / relative).lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    tried.push_back(candidate.string());
  }
  throw NoInputError(fmt::format("bundled file '{}' not found (looked in: {}); set VC_ASSETS_DIR to the assets folder",
                                 relative, fmt::join(tried, ", ")));
}

}  // namespace vc::config
