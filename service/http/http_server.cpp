#include "service/http/http_server.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/thread_name.hpp"

namespace vc::service::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kFilePiece = 64 * 1024;
// Beyond the header's own limit, room in the read buffer for the start of a body or a pipelined request.
constexpr size_t kReadSlack = 8 * 1024;

// Threads that run handlers which may wait; at most `max_waiting` requests wait for one (post() says false beyond).
class WorkerPool {
 public:
  WorkerPool(int threads, size_t max_waiting) : max_waiting_(max_waiting) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        name_this_thread("vc-http");
        work();
      });
    }
  }
  ~WorkerPool() {
    std::deque<std::function<void()>> dropped;  // (destroyed outside the lock: they hold connections)
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      dropped.swap(tasks_);
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  bool post(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      if (stop_ || tasks_.size() >= max_waiting_) return false;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (stop_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  const size_t max_waiting_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// A header value as sent: no line breaks (a value must never start a field of its own).
std::string one_line(std::string value) {
  std::replace_if(value.begin(), value.end(), [](char c) { return c == '\r' || c == '\n' || c == '\0'; }, ' ');
  return value;
}

template <class Message>
void set_headers(Message& m, const Response& r) {
  m.set(bhttp::field::content_type, one_line(r.content_type));
  m.set("X-Content-Type-Options", "nosniff");
  for (const auto& [name, value] : r.headers) m.set(one_line(name), one_line(value));
}

bool quiet_end(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::operation_aborted ||
         ec == net::error::connection_reset || ec == beast::error::timeout;
}

}  // namespace

class Session;

class HttpServer::Impl {
 public:
  Impl(Limits limits, const Router& router);
  ~Impl();

  void accept();
  void admit(tcp::socket socket);
  void watch(const std::shared_ptr<LiveBody>& live) {
    std::lock_guard lock(lives_mutex_);
    std::erase_if(lives_, [](const auto& w) { return w.expired(); });
    lives_.push_back(live);
  }
  void let_go(const std::string& client) {  // a connection ended (the network thread, or after it has stopped)
    if (--per_client_[client] <= 0) per_client_.erase(client);
    --connections_;
    --open_;
  }

  const Limits limits_;
  const Router& router_;
  std::atomic<int64_t> refused_{0}, bad_{0}, open_{0}, evicted_{0};
  // Connections by client and in all (the network thread only; the sessions let go of theirs when they end).
  std::map<std::string, int> per_client_;
  int connections_ = 0;
  std::mutex lives_mutex_;
  std::vector<std::weak_ptr<LiveBody>> lives_;  // closed first at the end: no producer wakes a stopped server
  // Connections waiting for a request's header, oldest first (the network thread only): at max_connections the oldest
  // of them makes room for a newcomer, so that idle or trickling clients cannot keep a probe out.
  std::list<std::weak_ptr<Session>> waiting_;
  std::shared_ptr<spdlog::logger> log_ = vc::log::get("service");
  int64_t refusals_logged_ = 0;
  // Destroyed in reverse: the pools (their running handlers post to io_) before io_, io_ (its queued handlers hold
  // sessions, which let go of their counts above) before the counts.
  net::io_context io_{1};
  tcp::acceptor acceptor_{io_};
  net::steady_timer retry_{io_};
  std::unique_ptr<WorkerPool> reads_, changes_;
  int port_ = 0;
  std::thread thread_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, tcp::socket socket, std::string client)
      : server_(server), stream_(std::move(socket)), buffer_(server.limits_.header_bytes + kReadSlack),
        client_(std::move(client)) {}
  ~Session() {
    if (live_) live_->close();
    stop_waiting();
    server_.let_go(client_);
  }
  // Made room for a newer connection (it waited longest for a header).
  void evict() {
    stop_waiting();
    close_now();
  }
  void start() { read_header(); }

 private:
  const Limits& limits() const { return server_.limits_; }

  // In the server's list of connections waiting for a header (evicted oldest first at the connection cap), or out.
  void start_waiting() {
    if (!waiting_) waiting_ = server_.waiting_.insert(server_.waiting_.end(), weak_from_this());
  }
  void stop_waiting() {
    if (waiting_) server_.waiting_.erase(*waiting_);
    waiting_.reset();
  }

  void read_header() {
    start_waiting();
    head_.emplace();
    head_->header_limit(std::uint32_t(limits().header_bytes));
    head_->body_limit(boost::none);  // (the header is read alone: the route's own limit is checked before any body)
    stream_.expires_after(limits().header_time);
    bhttp::async_read_header(stream_, buffer_, *head_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_header(ec);
    });
  }

  void on_header(beast::error_code ec) {
    stop_waiting();
    if (ec) {
      if (ec == bhttp::error::end_of_stream && buffer_.size() == 0) return close_now();  // a keep-alive connection ended
      ++server_.bad_;
      if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
        return refuse(431, fmt::format("the request header is over {} bytes", limits().header_bytes));
      }
      if (quiet_end(ec)) return close_now();  // gone, or too slow to send a header (header_time)
      return refuse(400, "malformed request: " + ec.message());
    }
    const auto& head = head_->get();
    keep_alive_ = head.keep_alive();
    version_ = head.version();
    if (auto refusal = take_head(head, limits(), client_, request_)) return refuse(std::move(*refusal));
    const auto match = server_.router_.match(request_);
    const bool has_body = !head_->is_done();
    if (!match.route) {
      auto r = error_response(match.status, match.status == 405 ? "this path does not take " + request_.method : "no such page");
      if (match.status == 405) r.header("Allow", match.allow);
      return has_body ? refuse(std::move(r)) : respond(std::move(r));
    }
    route_ = match.route;
    if (auto answer = server_.router_.admit(request_, *route_)) {
      return has_body ? refuse(std::move(*answer)) : respond(std::move(*answer));
    }
    if (!has_body) return dispatch();
    const auto length = head_->content_length();
    if (route_->max_body == 0 || (length && *length > route_->max_body)) {
      return refuse(413, fmt::format("the body is too large (at most {} bytes here)", route_->max_body));
    }
    if (beast::iequals(request_.header("expect"), "100-continue")) {
      auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, version_);
      holding_ = cont;
      stream_.expires_after(limits().write_time);
      return bhttp::async_write(stream_, *cont, [self = shared_from_this()](beast::error_code e, size_t) {
        self->holding_.reset();
        if (e) return self->close_now();
        self->read_body();
      });
    }
    read_body();
  }

  void read_body() {
    body_.emplace(std::move(*head_));
    body_->body_limit(route_->max_body);
    stream_.expires_after(limits().body_time);
    bhttp::async_read(stream_, buffer_, *body_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_body(ec);
    });
  }

  void on_body(beast::error_code ec) {
    if (ec) {
      ++server_.bad_;
      if (ec == bhttp::error::body_limit) {
        return refuse(413, fmt::format("the body is too large (at most {} bytes here)", route_->max_body));
      }
      if (quiet_end(ec)) return close_now();
      return refuse(400, "malformed body: " + ec.message());
    }
    request_.body = std::move(body_->get().body());
    body_.reset();
    dispatch();
  }

  Response run(const Route& route) {
    try {
      return route.handle(request_);
    } catch (const std::exception& e) {
      server_.log_->error("http: {} {}: {}", request_.method, request_.path, e.what());
      return error_response(500, e.what());
    }
  }

  void dispatch() {
    if (route_->lane == Lane::Inline) return respond(run(*route_));
    auto& pool = route_->lane == Lane::Changes ? *server_.changes_ : *server_.reads_;
    // (The worker hands its reference over with the answer: the connection ends on the network thread, whose alone
    // its counts are, never on a worker.)
    const bool queued = pool.post([self = shared_from_this(), route = route_]() mutable {
      auto answer = std::make_shared<Response>(self->run(*route));
      auto executor = self->stream_.get_executor();
      net::post(executor, [self = std::move(self), answer] { self->respond(std::move(*answer)); });
    });
    if (!queued) respond(error_response(503, "the server is busy: try again in a moment").header("Retry-After", "1"));
  }

  void refuse(int status, const std::string& message) { refuse(error_response(status, message)); }
  void refuse(Response r) {  // the body (if any) is not read: the connection ends after the answer
    r.close = true;
    linger_ = true;
    respond(std::move(r));
  }

  void respond(Response r) {
    close_after_ = close_after_ || r.close || !keep_alive_;
    if (r.live) return start_live(std::move(r));
    if (r.file) return start_file(std::move(r));
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(r.status), version_);
    set_headers(*res, r);
    res->keep_alive(!close_after_);
    res->body() = std::move(r.body);
    res->prepare_payload();
    holding_ = res;
    stream_.expires_after(limits().write_time);
    bhttp::async_write(stream_, *res, [self = shared_from_this()](beast::error_code ec, size_t) { self->written(ec); });
  }

  void written(beast::error_code ec) {
    holding_.reset();
    if (!ec && close_after_ && linger_) return linger();
    if (ec || close_after_) return close_now();
    read_header();
  }

  // A refused request's body may still be arriving: closing at once would reset the connection and could lose the
  // answer on its way. The sending side is shut (the client sees the end), and what arrives is read and dropped for a
  // moment — at most a second and 1 MiB — before the connection is closed.
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    piece_.resize(16 * 1024);
    stream_.expires_after(std::chrono::seconds(1));
    drain(0);
  }
  void drain(size_t taken) {
    stream_.async_read_some(net::buffer(piece_), [self = shared_from_this(), taken](beast::error_code ec, size_t n) {
      if (ec || taken + n > (1u << 20)) return self->close_now();
      self->drain(taken + n);
    });
  }

  // A header of its own (no body yet) for the two kinds of body sent piece by piece.
  template <class Then>
  void write_head(const Response& r, bool chunked, uint64_t length, Then then) {
    struct Head {
      bhttp::response<bhttp::empty_body> message;
      std::optional<bhttp::response_serializer<bhttp::empty_body>> serializer;
    };
    auto head = std::make_shared<Head>();
    head->message = bhttp::response<bhttp::empty_body>(static_cast<bhttp::status>(r.status), version_);
    set_headers(head->message, r);
    head->message.keep_alive(!close_after_);
    if (chunked) head->message.chunked(true);
    else head->message.content_length(length);
    head->serializer.emplace(head->message);
    holding_ = head;
    stream_.expires_after(limits().write_time);
    bhttp::async_write_header(stream_, *head->serializer, [self = shared_from_this(), then](beast::error_code ec, size_t) {
      self->holding_.reset();
      if (ec) return self->close_now();
      then(*self);
    });
  }

  void start_live(Response r) {
    live_ = std::move(r.live);
    close_after_ = true;  // a live body ends its connection
    server_.watch(live_);
    write_head(r, true, 0, [](Session& s) {
      // A client of a live body sends nothing more: anything it sends, or its closing, ends the body at once. (The
      // wait holds the connection while no piece is being written.)
      s.stream_.socket().async_wait(tcp::socket::wait_read, [self = s.shared_from_this()](beast::error_code) {
        self->close_now();
      });
      s.live_->on_ready([weak = s.weak_from_this(), ex = s.stream_.get_executor()] {
        net::post(ex, [weak] {
          if (auto self = weak.lock()) self->pump_live();
        });
      });
      s.pump_live();
    });
  }

  void pump_live() {
    if (writing_ || !live_ || !live_->open()) return;
    bool ended = false;
    if (!live_->take(piece_, ended)) {
      if (!ended) return;  // on_ready wakes this when the next piece comes
      writing_ = true;
      stream_.expires_after(limits().write_time);
      net::async_write(stream_, bhttp::make_chunk_last(), [self = shared_from_this()](beast::error_code, size_t) {
        self->close_now();
      });
      return;
    }
    if (piece_.empty()) return pump_live();
    writing_ = true;
    stream_.expires_after(limits().write_time);
    net::async_write(stream_, bhttp::make_chunk(net::buffer(piece_)), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) return self->close_now();
      self->pump_live();
    });
  }

  void start_file(Response r) {
    file_ = std::move(r.file);
    sent_ = 0;
    write_head(r, false, file_->length, [](Session& s) { s.pump_file(); });
  }

  void pump_file() {
    if (sent_ >= file_->length) {
      file_.reset();
      return written({});
    }
    piece_.resize(size_t(std::min<uint64_t>(kFilePiece, file_->length - sent_)));
    const ssize_t got = ::pread(file_->fd, piece_.data(), piece_.size(), off_t(file_->offset + sent_));
    if (got <= 0) return close_now();  // the file shrank: the client sees a short body and a closed connection
    piece_.resize(size_t(got));
    stream_.expires_after(limits().write_time);
    net::async_write(stream_, net::buffer(piece_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->close_now();
      self->sent_ += n;
      self->pump_file();
    });
  }

  void close_now() {
    if (live_) live_->close();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  HttpServer::Impl& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  const std::string client_;
  std::optional<bhttp::request_parser<bhttp::empty_body>> head_;
  std::optional<bhttp::request_parser<bhttp::string_body>> body_;
  Request request_;
  const Route* route_ = nullptr;
  bool keep_alive_ = false, close_after_ = false, writing_ = false, linger_ = false;
  std::optional<std::list<std::weak_ptr<Session>>::iterator> waiting_;  // in the server's list
  unsigned version_ = 11;
  std::shared_ptr<void> holding_;  // what the write in progress reads from
  std::shared_ptr<LiveBody> live_;
  std::shared_ptr<FileRange> file_;
  uint64_t sent_ = 0;
  std::string piece_;
};

HttpServer::Impl::Impl(Limits limits, const Router& router) : limits_(std::move(limits)), router_(router) {
  beast::error_code ec;
  const auto address = net::ip::make_address(limits_.address, ec);
  if (ec) throw UnavailableError(fmt::format("http: '{}' is not an IP address to listen on", limits_.address));
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(limits_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    throw UnavailableError(fmt::format("metrics: cannot listen on {}:{}: {} (port in use, or not an address of this "
                                       "host?)", limits_.address, limits_.port, ec.message()));
  }
  port_ = acceptor_.local_endpoint(ec).port();
  reads_ = std::make_unique<WorkerPool>(limits_.read_workers, limits_.max_waiting);
  changes_ = std::make_unique<WorkerPool>(1, limits_.max_waiting);
  accept();
  thread_ = std::thread([this] {
    name_this_thread("vc-http-io");
    io_.run();
  });
}

HttpServer::Impl::~Impl() {
  {
    std::lock_guard lock(lives_mutex_);
    for (auto& w : lives_) {
      if (auto live = w.lock()) live->close();  // producers stop; none wakes the network thread any more
    }
  }
  net::post(io_, [this] {
    beast::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
  });
  io_.stop();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(lives_mutex_);  // (again: one may have started between the first close and the stop)
    for (auto& w : lives_) {
      if (auto live = w.lock()) live->close();
    }
  }
  changes_.reset();
  reads_.reset();
}

void HttpServer::Impl::accept() {
  acceptor_.async_accept(io_, [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      admit(std::move(socket));
      return accept();
    }
    // Out of file descriptors (or another passing fault): wait a little rather than spin.
    if (refusals_logged_++ % 100 == 0) log_->warn("http: cannot accept a connection: {}", ec.message());
    retry_.expires_after(std::chrono::milliseconds(100));
    retry_.async_wait([this](beast::error_code e) {
      if (!e) accept();
    });
  });
}

void HttpServer::Impl::admit(tcp::socket socket) {
  beast::error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  if (ec) return;
  const std::string client = peer.address().to_string();
  const auto from_client = per_client_.find(client);
  const int mine = from_client == per_client_.end() ? 0 : from_client->second;
  // At the cap, the connection that has waited longest for a header (idle, trickling) makes room: it ends now (its
  // count goes when its read returns) and this one is taken — idle clients cannot keep a probe out.
  bool room = connections_ < limits_.max_connections;
  if (!room && mine < limits_.max_per_client && !waiting_.empty()) {
    if (auto oldest = waiting_.front().lock()) {
      oldest->evict();
      ++evicted_;
      room = true;
    }
  }
  if (!room || mine >= limits_.max_per_client) {
    ++refused_;
    if (refusals_logged_++ % 100 == 0) {
      log_->warn("http: connection from {} refused: {} open from it (at most {}), {} in all (at most {})", client, mine,
                 limits_.max_per_client, connections_, limits_.max_connections);
    }
    static constexpr char kBusy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    socket.non_blocking(true, ec);
    socket.write_some(net::buffer(kBusy, sizeof kBusy - 1), ec);  // (best effort: never waits)
    socket.close(ec);
    return;
  }
  ++connections_;
  ++per_client_[client];
  ++open_;
  socket.set_option(tcp::no_delay(true), ec);
  std::make_shared<Session>(*this, std::move(socket), client)->start();
}

HttpServer::HttpServer(Limits limits, const Router& router) : impl_(std::make_unique<Impl>(std::move(limits), router)) {}
HttpServer::~HttpServer() = default;

int HttpServer::port() const { return impl_->port_; }

ServerCounts HttpServer::counts() const {
  return {impl_->refused_.load(), impl_->bad_.load(), impl_->open_.load(), impl_->evicted_.load()};
}

}  // namespace vc::service::http
