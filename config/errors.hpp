// Typed errors shared by every module. Set-up code throws them; app/main.cpp maps them to sysexits codes.
#pragma once
#include <stdexcept>
#include <string>

namespace vc {

// Exit codes, from sysexits(3). Documented in README.md ("Exit codes").
enum class ExitCode : int {
  kOk = 0,
  kUsage = 64,        // EX_USAGE: bad command line
  kData = 65,         // EX_DATAERR: corrupt model/weights, undecodable media, wrong shapes
  kNoInput = 66,      // EX_NOINPUT: an input file or device does not exist or cannot be read
  kUnavailable = 69,  // EX_UNAVAILABLE: a needed service is absent (no GPU, GStreamer element, camera gone)
  kInternal = 70,     // EX_SOFTWARE: a bug or a fatal GPU error
  kOsFile = 72,       // EX_OSFILE: broken install (a system library such as libcudnn cannot be loaded)
  kCantCreate = 73,   // EX_CANTCREAT: an output file cannot be created
  kIoError = 74,      // EX_IOERR: writing results or video failed (disk full, closed pipe): data was lost
  kConfig = 78,       // EX_CONFIG: invalid configuration
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  [[nodiscard]] ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

struct UsageError : Error {
  explicit UsageError(const std::string& w) : Error(ExitCode::kUsage, w) {}
};
struct DataError : Error {
  explicit DataError(const std::string& w) : Error(ExitCode::kData, w) {}
};
struct NoInputError : Error {
  explicit NoInputError(const std::string& w) : Error(ExitCode::kNoInput, w) {}
};
struct UnavailableError : Error {
  explicit UnavailableError(const std::string& w) : Error(ExitCode::kUnavailable, w) {}
};
struct InternalError : Error {
  explicit InternalError(const std::string& w) : Error(ExitCode::kInternal, w) {}
};
struct CantCreateError : Error {
  explicit CantCreateError(const std::string& w) : Error(ExitCode::kCantCreate, w) {}
};
struct IoError : Error {
  explicit IoError(const std::string& w) : Error(ExitCode::kIoError, w) {}
};
struct ConfigError : Error {
  // `key`: the key at fault ("input.path"), when one is (the service's API returns it).
  explicit ConfigError(const std::string& w, std::string key = {}) : Error(ExitCode::kConfig, w), key_(std::move(key)) {}
  [[nodiscard]] const std::string& key() const noexcept { return key_; }

 private:
  std::string key_;
};

}  // namespace vc
