// The on-disk cache of autotuned cuDNN algorithms: JSON, keyed by GPU, cuDNN version, layer shape, batch and
// precision, so that a second start skips the timing. A missing or unreadable cache is simply empty.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace vc::inference {

struct CachedAlgo {
  int algorithm = 0;      // legacy: cudnnConvolutionFwdAlgo_t; graph: the heuristics' plan index
  int math = 0;           // cudnnMathType_t (legacy)
  bool graph = false;     // a graph-API plan rather than a legacy algorithm
  size_t workspace = 0;
  float ms = 0;
};

class AlgoCache {
 public:
  explicit AlgoCache(std::string path);  // "" = no file (in-memory only)
  [[nodiscard]] std::optional<CachedAlgo> find(const std::string& key) const;
  void put(const std::string& key, const CachedAlgo& algo);
  // Writes the file if anything was added (atomically: a temporary file, then rename). Never throws.
  void save() const;

 private:
  std::string path_;
  std::map<std::string, CachedAlgo> entries_;
  bool dirty_ = false;
};

// Writes `path` as `head` then `body` through a temporary file of its own (this process, a counter) and a rename:
// several processes, or engines of one process, may save the same file at once; a reader sees the old file or a
// whole new one. Throws std::runtime_error or std::filesystem::filesystem_error.
void write_file_atomically(const std::string& path, std::string_view head, std::span<const uint8_t> body = {});

}  // namespace vc::inference
