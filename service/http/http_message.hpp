// What the HTTP server (http_server.hpp) hands a route and takes back: a request read whole and within bounds, and a
// response that is a buffered body, a range of an already opened file, or a live body a producer pushes while a
// slow client skips pieces instead of holding the producer back.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vc::service::http {

struct Request {
  std::string method;                                        // "GET", "POST", …
  std::string path;                                          // the target's path, still percent-encoded
  std::map<std::string, std::string> query;                  // decoded; a repeated key keeps its first value
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  std::string client;               // the peer's address
  std::vector<std::string> params;  // the route's {} segments, decoded

  // The first header of that name (lower case), "" when there is none.
  [[nodiscard]] std::string header(std::string_view lower_name) const;
  [[nodiscard]] std::string param(const std::string& key) const;  // a query value, "" when absent
  [[nodiscard]] bool has_param(const std::string& key) const { return query.count(key) > 0; }
};

// A file the response sends from `offset`, `length` bytes (the route opened it: the file checked is the file sent).
struct FileRange {
  int fd = -1;  // owned: closed by the server
  uint64_t offset = 0, length = 0;
  FileRange() = default;
  FileRange(int owned_fd, uint64_t off, uint64_t len) : fd(owned_fd), offset(off), length(len) {}
  FileRange(const FileRange&) = delete;
  FileRange& operator=(const FileRange&) = delete;
  ~FileRange();
};

// A body sent as it is made (chunked), for as long as both ends want it: a producer thread pushes pieces, the
// server sends them. At most `max_queued_bytes` wait for the client; a piece beyond that is skipped (counted), so a
// slow client sees fewer pieces and never slows the producer. Thread-safe.
class LiveBody {
 public:
  explicit LiveBody(size_t max_queued_bytes) : max_queued_(max_queued_bytes) {}
  // Queues a piece; false once the client has gone or the server stops (the producer should stop then).
  bool push(std::string piece) { return offer(std::move(piece)) != Offered::Closed; }
  // The same, saying whether the piece was queued or skipped (a producer whose pieces depend on each other — video —
  // resumes where a piece stands on its own).
  enum class Offered { Queued, Skipped, Closed };
  Offered offer(std::string piece);
  // Something held as long as the body (a viewer's place in what it watches).
  void hold(std::shared_ptr<void> what) { held_ = std::move(what); }
  [[nodiscard]] int64_t sent_bytes() const { return sent_.load(); }
  // The producer's end: what is queued is sent, then the body ends.
  void finish();
  [[nodiscard]] bool open() const { return !closed_.load(); }
  [[nodiscard]] int64_t skipped() const { return skipped_.load(); }

  // The server's side: the next piece (false: none now; `ended` says whether more can come), and how it is told that
  // one is waiting (called on the producer's thread; must not block).
  bool take(std::string& piece, bool& ended);
  void on_ready(std::function<void()> wake);
  void close();  // the client has gone: push() says false from now on

 private:
  const size_t max_queued_;
  mutable std::mutex mutex_;
  std::deque<std::string> queue_;
  size_t queued_ = 0;
  bool finished_ = false;
  std::function<void()> wake_;
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> skipped_{0};
  std::atomic<int64_t> sent_{0};  // bytes of the pieces taken by the server
  std::shared_ptr<void> held_;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;                   // sent when neither of the two below is set
  std::shared_ptr<FileRange> file;    // a file's range
  std::shared_ptr<LiveBody> live;     // a live body (chunked)
  bool close = false;                 // close the connection after it

  Response() = default;
  Response(int code, std::string text, std::string type = "application/json")
      : status(code), content_type(std::move(type)), body(std::move(text)) {}
  Response& header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
};

// "%41b+c" -> "Ab c" when `plus_is_space` (a query), "Ab+c" otherwise (a path); invalid escapes are kept as they are.
std::string percent_decoded(std::string_view text, bool plus_is_space);
// A request target ("/a/b?x=1&y=%20") into its path ("/a/b") and decoded query.
void split_target(std::string_view target, std::string& path, std::map<std::string, std::string>& query);

}  // namespace vc::service::http
