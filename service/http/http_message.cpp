#include "service/http/http_message.hpp"

#include <unistd.h>

#include <algorithm>

namespace vc::service::http {
namespace {

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

FileRange::~FileRange() {
  if (fd >= 0) ::close(fd);
}

std::string Request::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return {};
}

std::string Request::param(const std::string& key) const {
  const auto it = query.find(key);
  return it == query.end() ? std::string() : it->second;
}

std::string percent_decoded(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += char(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else if (plus_is_space && text[i] == '+') {
      out += ' ';
    } else {
      out += text[i];
    }
  }
  return out;
}

void split_target(std::string_view target, std::string& path, std::map<std::string, std::string>& query) {
  const size_t q = target.find('?');
  path = std::string(target.substr(0, q));
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = std::min(rest.find('&'), rest.size());
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (!pair.empty()) {
      query.try_emplace(percent_decoded(pair.substr(0, eq), true),
                        eq == std::string_view::npos ? std::string() : percent_decoded(pair.substr(eq + 1), true));
    }
    rest = amp < rest.size() ? rest.substr(amp + 1) : std::string_view();
  }
}

// (wake_ is called under the lock: once close() has returned, no producer wakes the server any more.)
LiveBody::Offered LiveBody::offer(std::string piece) {
  std::lock_guard lock(mutex_);
  if (closed_) return Offered::Closed;
  if (finished_ || piece.empty()) return Offered::Queued;
  if (queued_ + piece.size() > max_queued_ && !queue_.empty()) {
    ++skipped_;  // the client is behind: it skips this piece (the producer never waits for it)
    return Offered::Skipped;
  }
  queued_ += piece.size();
  queue_.push_back(std::move(piece));
  if (wake_) wake_();
  return Offered::Queued;
}

void LiveBody::finish() {
  std::lock_guard lock(mutex_);
  if (closed_) return;  // (closed with its connection: nothing may wake that connection's io any more)
  finished_ = true;
  if (wake_) wake_();
}

bool LiveBody::take(std::string& piece, bool& ended) {
  std::lock_guard lock(mutex_);
  ended = finished_ && queue_.empty();
  if (queue_.empty()) return false;
  piece = std::move(queue_.front());
  queue_.pop_front();
  queued_ -= piece.size();
  sent_ += int64_t(piece.size());
  return true;
}

void LiveBody::on_ready(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  wake_ = std::move(wake);
}

void LiveBody::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  queue_.clear();
  queued_ = 0;
  wake_ = nullptr;
}

}  // namespace vc::service::http
