#include "pipeline/sources/network_errors.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace vc::pipeline {
namespace {

int default_port(const std::string& scheme) {
  if (scheme == "rtsp" || scheme == "rtspt") return 554;
  if (scheme == "rtsps") return 322;
  if (scheme == "rtmp") return 1935;
  if (scheme == "http") return 80;
  if (scheme == "https") return 443;
  return 0;
}

// What a TCP connection to host:port gets, in words ("" when it connects).
std::string try_connect(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return fmt::format("host '{}' not found ({})", host, gai_strerror(rc));
  }
  std::string why = "no answer";
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 2000) == 1) {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    ::close(fd);
    if (err == 0) {
      why.clear();
      break;
    }
    why = err == ETIMEDOUT ? "no answer within 2 s (timeout)" : err == ECONNREFUSED ? "connection refused" : std::strerror(err);
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace

std::string explain_network_failure(const std::string& uri, int code) {
  GstUri* parsed = gst_uri_from_string(uri.c_str());
  if (!parsed) return "";
  const std::string scheme = gst_uri_get_scheme(parsed) ? gst_uri_get_scheme(parsed) : "";
  const std::string host = gst_uri_get_host(parsed) ? gst_uri_get_host(parsed) : "";
  const guint uri_port = gst_uri_get_port(parsed);
  gst_uri_unref(parsed);
  const int port = uri_port != GST_URI_NO_PORT ? int(uri_port) : default_port(scheme);
  if (host.empty() || port == 0) return "";
  const auto where = fmt::format("{}:{}", host, port);
  switch (code) {
    case GST_RESOURCE_ERROR_NOT_FOUND: return fmt::format("the server at {} has no such stream (not found)", where);
    case GST_RESOURCE_ERROR_NOT_AUTHORIZED: return fmt::format("the server at {} refused the credentials (unauthorized)", where);
    case GST_RESOURCE_ERROR_OPEN_READ:
    case GST_RESOURCE_ERROR_OPEN_READ_WRITE:
    case GST_RESOURCE_ERROR_OPEN_WRITE:
    case GST_RESOURCE_ERROR_READ:
    case GST_RESOURCE_ERROR_FAILED: {
      const auto why = try_connect(host, port);
      return why.empty() ? fmt::format("{} accepts connections but the stream could not be opened or read", where)
                         : fmt::format("cannot connect to {}: {}", where, why);
    }
    default: return "";
  }
}

}  // namespace vc::pipeline
