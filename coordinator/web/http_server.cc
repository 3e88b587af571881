#include "coordinator/web/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "common/mutex.h"
#include "coordinator/web/http_listener.h"

namespace convoy {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
// A stream quiet for this long gets its keepalive text.
constexpr int64_t kStreamQuietMs = 15'000;
// How often deadlines and keepalives are looked at.
constexpr int kSweepMs = 250;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class ServerExchange;

// One client connection; touched only by the loop thread.
struct Connection {
  enum class Phase { kReading, kHandling, kResponding, kStreaming };
  uint64_t id = 0;
  int fd = -1;
  SSL* ssl = nullptr;
  std::string peer;
  bool handshaken = false;
  Phase phase = Phase::kReading;
  std::string in;
  std::string out;
  size_t out_off = 0;
  bool tls_wants_write = false;  // the last TLS operation waits for the socket to be writable
  bool peer_eof = false;         // the client closed its side (or the connection broke)
  bool close_after_write = false;
  bool keep_alive = true;
  int64_t deadline_ms = 0;  // 0: none
  int64_t last_write_ms = 0;
  std::string keepalive;  // a stream's
  std::shared_ptr<ServerExchange> exchange;
  uint32_t interest = 0;
};

}  // namespace

class HttpServer::Loop : public std::enable_shared_from_this<HttpServer::Loop> {
 public:
  ~Loop();
  Status Init(Options options, Handler handler);
  void Start() {
    thread_ = std::thread([self = shared_from_this()] { self->Run(); });
  }
  // Stops the loop and joins it; every connection is closed (on the loop thread).
  void Stop() EXCLUDES(mu_);
  // Runs `fn` on the loop thread with connection `id`, if it is still open.
  void Post(uint64_t id, std::function<void(Connection&)> fn) EXCLUDES(mu_);
  void SetHandler(Handler h) EXCLUDES(handler_mu_) {
    MutexLock lock(handler_mu_);
    handler_ = std::move(h);
  }
  int port() const { return port_; }
  bool tls() const { return ctx_ != nullptr; }
  size_t max_stream_buffer() const { return options_.max_stream_buffer; }

  // The loop-thread side of an exchange's calls.
  void Answer(Connection& c, const HttpResponse& response);
  void BeginStream(Connection& c, const HttpResponse& head, const std::string& keepalive);
  void Append(Connection& c, std::string data);
  void EndStream(Connection& c);

 private:
  void Run();
  void Accept();
  void Service(Connection& c);
  bool Handshake(Connection& c);
  // Reads what is there; false when the connection is over.
  bool ReadAvailable(Connection& c);
  bool Flush(Connection& c);
  void TryParse(Connection& c);
  void Dispatch(Connection& c, HttpRequest req);
  void Close(uint64_t id);
  void Interest(Connection& c);
  void Sweep();
  void RunPosted() EXCLUDES(mu_);

  Options options_;
  HttpRequestParser parser_;
  Mutex handler_mu_;
  Handler handler_ GUARDED_BY(handler_mu_);
  SSL_CTX* ctx_ = nullptr;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  // Loop thread only.
  std::map<uint64_t, std::unique_ptr<Connection>> conns_;
  uint64_t next_id_ = 2;
  int64_t accept_paused_until_ms_ = 0;
  int64_t last_sweep_ms_ = 0;

  Mutex mu_;
  std::vector<std::pair<uint64_t, std::function<void(Connection&)>>> posted_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
};

namespace {

class ServerExchange final : public HttpExchange {
 public:
  ServerExchange(std::weak_ptr<HttpServer::Loop> loop, uint64_t id, size_t max_buffer)
      : loop_(std::move(loop)), id_(id), max_buffer_(max_buffer) {}

  void Respond(HttpResponse response) override EXCLUDES(mu_) {
    if (!Claim(State::kAnswered)) return;
    auto r = std::make_shared<HttpResponse>(std::move(response));
    Post([r](HttpServer::Loop& loop, Connection& c) { loop.Answer(c, *r); });
  }
  void StartStream(HttpResponse head, std::string keepalive) override EXCLUDES(mu_) {
    if (!Claim(State::kStreaming)) return;
    auto h = std::make_shared<HttpResponse>(std::move(head));
    Post([h, keepalive](HttpServer::Loop& loop, Connection& c) {
      loop.BeginStream(c, *h, keepalive);
    });
  }
  bool Send(std::string data) override EXCLUDES(mu_) {
    bool drop = false;
    {
      MutexLock lock(mu_);
      if (state_ != State::kStreaming || closed_) return false;
      if (queued_ + data.size() > max_buffer_) {
        state_ = State::kEnded;
        drop = true;
      } else {
        queued_ += data.size();
      }
    }
    if (drop) {
      spdlog::warn("web UI: a stream's client does not read fast enough; dropped");
      Post([](HttpServer::Loop& loop, Connection& c) { loop.EndStream(c); });
      return false;
    }
    auto d = std::make_shared<std::string>(std::move(data));
    Post([d](HttpServer::Loop& loop, Connection& c) { loop.Append(c, std::move(*d)); });
    return true;
  }
  void End() override EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      if (state_ != State::kStreaming) return;
      state_ = State::kEnded;
    }
    Post([](HttpServer::Loop& loop, Connection& c) { loop.EndStream(c); });
  }
  void OnClose(std::function<void()> fn) override EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      if (!closed_) {
        on_close_ = std::move(fn);
        return;
      }
    }
    fn();
  }
  bool closed() const override EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return closed_;
  }

  // Loop thread: bytes of the stream written to the socket.
  void Written(size_t n) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    queued_ = n > queued_ ? 0 : queued_ - n;
  }
  // Loop thread: the exchange is over.
  void Closed() EXCLUDES(mu_) {
    std::function<void()> fn;
    {
      MutexLock lock(mu_);
      if (closed_) return;
      closed_ = true;
      fn = std::move(on_close_);
    }
    if (fn) fn();
  }

 private:
  enum class State { kNew, kAnswered, kStreaming, kEnded };
  bool Claim(State to) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (state_ != State::kNew || closed_) return false;
    state_ = to;
    return true;
  }
  void Post(std::function<void(HttpServer::Loop&, Connection&)> fn) {
    auto loop = loop_.lock();
    if (!loop) return;
    HttpServer::Loop* raw = loop.get();
    loop->Post(id_, [raw, fn = std::move(fn)](Connection& c) { fn(*raw, c); });
  }

  const std::weak_ptr<HttpServer::Loop> loop_;
  const uint64_t id_;
  const size_t max_buffer_;
  mutable Mutex mu_;
  State state_ GUARDED_BY(mu_) = State::kNew;
  bool closed_ GUARDED_BY(mu_) = false;
  size_t queued_ GUARDED_BY(mu_) = 0;
  std::function<void()> on_close_ GUARDED_BY(mu_);
};

}  // namespace

HttpServer::Loop::~Loop() {
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

Status HttpServer::Loop::Init(Options options, Handler handler) {
  options_ = std::move(options);
  parser_ = HttpRequestParser(options_.limits);
  {
    MutexLock lock(handler_mu_);
    handler_ = std::move(handler);
  }
  if (options_.cert_pem.empty() != options_.key_pem.empty()) {
    return Status::InvalidArgument("TLS needs both a certificate and its key");
  }
  if (!options_.cert_pem.empty()) {
    auto ctx = MakeTlsContext(options_.cert_pem, options_.key_pem);
    if (!ctx.ok()) return ctx.status();
    ctx_ = *ctx;
  }
  auto fd = BindListener(options_.listen, &port_);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Status::Internal(std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return Status::Ok();
}

void HttpServer::Loop::Post(uint64_t id, std::function<void(Connection&)> fn) {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    posted_.emplace_back(id, std::move(fn));
  }
  const uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;
}

void HttpServer::Loop::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  const uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;
  if (thread_.joinable()) thread_.join();
}

void HttpServer::Loop::RunPosted() {
  std::vector<std::pair<uint64_t, std::function<void(Connection&)>>> work;
  {
    MutexLock lock(mu_);
    work.swap(posted_);
  }
  for (auto& [id, fn] : work) {
    auto it = conns_.find(id);
    if (it != conns_.end()) fn(*it->second);
  }
}

void HttpServer::Loop::Run() {
  std::vector<epoll_event> events(64);
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stopping_) break;
    }
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kSweepMs);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenerId) {
        Accept();
      } else if (id == kWakeId) {
        uint64_t count;
        ssize_t ignored = read(wake_fd_, &count, sizeof(count));
        (void)ignored;
      } else if (auto it = conns_.find(id); it != conns_.end()) {
        // Both directions closed, or an error: nothing more can be read or written.
        if ((events[i].events & (EPOLLHUP | EPOLLERR)) != 0) {
          Close(id);
        } else {
          Service(*it->second);
        }
      }
    }
    RunPosted();
    if (NowMs() - last_sweep_ms_ >= kSweepMs) Sweep();
  }
  while (!conns_.empty()) Close(conns_.begin()->first);
  MutexLock lock(mu_);
  posted_.clear();
}

void HttpServer::Loop::Accept() {
  while (true) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd =
        accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop listening for a while rather than spin on the listener.
        spdlog::warn("web UI: cannot accept ({}); pausing 100 ms", std::strerror(errno));
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_until_ms_ = NowMs() + 100;
      }
      return;
    }
    if (static_cast<int>(conns_.size()) >= options_.max_connections) {
      close(fd);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Connection>();
    c->id = next_id_++;
    c->fd = fd;
    c->peer = PeerName(addr);
    c->deadline_ms = NowMs() + options_.request_timeout_ms;
    if (ctx_ != nullptr) {
      c->ssl = SSL_new(ctx_);
      SSL_set_fd(c->ssl, fd);
      SSL_set_accept_state(c->ssl);
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = c->id;
    c->interest = ev.events;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    Connection& ref = *c;
    conns_[c->id] = std::move(c);
    Service(ref);
  }
}

bool HttpServer::Loop::Handshake(Connection& c) {
  ERR_clear_error();
  const int r = SSL_do_handshake(c.ssl);
  if (r == 1) {
    c.handshaken = true;
    c.tls_wants_write = false;
    return true;
  }
  const int err = SSL_get_error(c.ssl, r);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    c.tls_wants_write = err == SSL_ERROR_WANT_WRITE;
    return true;
  }
  spdlog::debug("web UI: TLS handshake with {} failed: {}", c.peer, OpenSslError("handshake"));
  return false;
}

bool HttpServer::Loop::ReadAvailable(Connection& c) {
  // A request's head and body at most, plus one more request's worth pipelined behind it.
  const size_t cap = 2 * (options_.limits.max_header_bytes + options_.limits.max_body_bytes);
  char buf[16 * 1024];
  while (c.phase == Connection::Phase::kStreaming || c.in.size() < cap) {
    ssize_t n;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      const int r = SSL_read(c.ssl, buf, sizeof(buf));
      if (r <= 0) {
        const int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_WANT_READ) return true;
        if (err == SSL_ERROR_WANT_WRITE) {
          c.tls_wants_write = true;
          return true;
        }
        return false;  // closed, or broken
      }
      n = r;
    } else {
      n = recv(c.fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) return false;
    }
    // What a client sends on a stream is nothing we read.
    if (c.phase != Connection::Phase::kStreaming) c.in.append(buf, static_cast<size_t>(n));
  }
  return true;
}

bool HttpServer::Loop::Flush(Connection& c) {
  size_t written = 0;
  while (c.out_off < c.out.size()) {
    const size_t left = c.out.size() - c.out_off;
    ssize_t n;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      const int r = SSL_write(c.ssl, c.out.data() + c.out_off, static_cast<int>(left));
      if (r <= 0) {
        const int err = SSL_get_error(c.ssl, r);
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
          c.tls_wants_write = err == SSL_ERROR_WANT_WRITE;
          break;
        }
        return false;
      }
      n = r;
    } else {
      n = send(c.fd, c.out.data() + c.out_off, left, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) return false;
    }
    c.out_off += static_cast<size_t>(n);
    written += static_cast<size_t>(n);
    c.tls_wants_write = false;
  }
  if (written > 0) {
    c.last_write_ms = NowMs();
    if (c.phase == Connection::Phase::kStreaming && c.exchange) c.exchange->Written(written);
  }
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  } else if (c.out_off > 64 * 1024) {
    c.out.erase(0, c.out_off);
    c.out_off = 0;
  }
  return true;
}

void HttpServer::Loop::Service(Connection& c) {
  const uint64_t id = c.id;
  if (c.ssl != nullptr && !c.handshaken) {
    if (!Handshake(c)) return Close(id);
    if (!c.handshaken) return Interest(c);
  }
  if (!c.peer_eof && !ReadAvailable(c)) {
    // The client closed its side, or the connection broke: a request already read is still
    // answered (a client may half-close after sending it); a stream's page has left.
    c.peer_eof = true;
    c.keep_alive = false;
    c.close_after_write = true;
    if (c.phase == Connection::Phase::kStreaming) return Close(id);
  }
  for (;;) {
    if (c.phase == Connection::Phase::kReading) {
      TryParse(c);
      if (conns_.count(id) == 0) return;
      if (c.phase == Connection::Phase::kReading && c.peer_eof) return Close(id);
    }
    if (!Flush(c)) return Close(id);
    if (!c.out.empty()) break;
    if (c.phase == Connection::Phase::kStreaming && c.close_after_write) return Close(id);
    if (c.phase != Connection::Phase::kResponding) break;
    // The answer is written: the exchange is over; the connection waits for the next request.
    if (c.exchange) c.exchange->Closed();
    c.exchange.reset();
    if (c.close_after_write) return Close(id);
    c.phase = Connection::Phase::kReading;
    c.deadline_ms =
        NowMs() + (c.in.empty() ? options_.idle_timeout_ms : options_.request_timeout_ms);
    // What TLS already decrypted is not seen by epoll again: read it now.
    if (!ReadAvailable(c)) {
      c.peer_eof = true;
      c.close_after_write = true;
    }
  }
  Interest(c);
}

void HttpServer::Loop::TryParse(Connection& c) {
  if (c.phase != Connection::Phase::kReading || c.in.empty()) return;
  HttpRequest req;
  int status = 0;
  std::string why;
  switch (parser_.Parse(c.in, &req, &status, &why)) {
    case HttpRequestParser::Result::kNeedMore:
      if (c.deadline_ms == 0 || c.deadline_ms > NowMs() + options_.request_timeout_ms) {
        c.deadline_ms = NowMs() + options_.request_timeout_ms;
      }
      return;
    case HttpRequestParser::Result::kError: {
      c.phase = Connection::Phase::kResponding;
      c.keep_alive = false;
      c.close_after_write = true;
      const HttpResponse r = HttpResponse::Error(status, why);
      c.out += HttpHead(r, options_.headers, false, false) + r.body;
      c.in.clear();
      return;
    }
    case HttpRequestParser::Result::kDone:
      req.peer = c.peer;
      Dispatch(c, std::move(req));
      return;
  }
}

void HttpServer::Loop::Dispatch(Connection& c, HttpRequest req) {
  c.phase = Connection::Phase::kHandling;
  c.deadline_ms = 0;
  c.keep_alive = req.keep_alive;
  c.exchange = std::make_shared<ServerExchange>(weak_from_this(), c.id, options_.max_stream_buffer);
  Handler handler;
  {
    MutexLock lock(handler_mu_);
    handler = handler_;
  }
  std::shared_ptr<HttpExchange> exchange = c.exchange;
  try {
    handler(req, exchange);
  } catch (const std::exception& e) {
    spdlog::error("web UI: {} {}: {}", req.method, req.path, e.what());
    exchange->Respond(HttpResponse::Error(500, "internal error"));
  }
}

void HttpServer::Loop::Answer(Connection& c, const HttpResponse& response) {
  if (c.phase != Connection::Phase::kHandling) return;
  c.phase = Connection::Phase::kResponding;
  if (!c.keep_alive) c.close_after_write = true;
  c.out += HttpHead(response, options_.headers, c.keep_alive, false);
  c.out += response.body;
  Service(c);
}

void HttpServer::Loop::BeginStream(Connection& c, const HttpResponse& head,
                                   const std::string& keepalive) {
  if (c.phase != Connection::Phase::kHandling) return;
  c.phase = Connection::Phase::kStreaming;
  c.keepalive = keepalive;
  c.in.clear();
  c.out += HttpHead(head, options_.headers, false, true);
  c.out += head.body;
  Service(c);
}

void HttpServer::Loop::Append(Connection& c, std::string data) {
  if (c.phase != Connection::Phase::kStreaming || c.close_after_write) return;
  c.out += data;
  Service(c);
}

void HttpServer::Loop::EndStream(Connection& c) {
  if (c.phase != Connection::Phase::kStreaming) return;
  c.close_after_write = true;
  Service(c);
}

void HttpServer::Loop::Interest(Connection& c) {
  uint32_t want = 0;
  const size_t cap = 2 * (options_.limits.max_header_bytes + options_.limits.max_body_bytes);
  if (!c.peer_eof && (c.phase == Connection::Phase::kStreaming || c.in.size() < cap)) {
    want |= EPOLLIN | EPOLLRDHUP;
  }
  if (!c.out.empty() || c.tls_wants_write) want |= EPOLLOUT;
  if (want == c.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.interest = want;
}

void HttpServer::Loop::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::unique_ptr<Connection> c = std::move(it->second);
  conns_.erase(it);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  if (c->ssl != nullptr) SSL_free(c->ssl);
  close(c->fd);
  if (c->exchange) c->exchange->Closed();
}

void HttpServer::Loop::Sweep() {
  const int64_t now = NowMs();
  last_sweep_ms_ = now;
  if (accept_paused_until_ms_ != 0 && now >= accept_paused_until_ms_) {
    accept_paused_until_ms_ = 0;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  }
  std::vector<uint64_t> expired;
  for (auto& [id, c] : conns_) {
    if (c->deadline_ms != 0 && now >= c->deadline_ms && c->phase == Connection::Phase::kReading) {
      expired.push_back(id);
    } else if (c->phase == Connection::Phase::kStreaming && !c->keepalive.empty() &&
               c->out.empty() && now - c->last_write_ms >= kStreamQuietMs) {
      c->out = c->keepalive;
      if (!Flush(*c))
        expired.push_back(id);
      else
        Interest(*c);
    }
  }
  for (uint64_t id : expired) Close(id);
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Options options, Handler handler) {
  // SSL_write writes to the socket itself: a client gone away must not kill the process
  // with SIGPIPE (the daemons ignore it already, common/signals.h; test binaries may not).
  struct sigaction now {};
  if (sigaction(SIGPIPE, nullptr, &now) == 0 && now.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  auto loop = std::make_shared<Loop>();
  CONVOY_RETURN_IF_ERROR(loop->Init(std::move(options), std::move(handler)));
  loop->Start();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(loop)));
}

HttpServer::~HttpServer() { Shutdown(); }

int HttpServer::port() const { return loop_->port(); }
bool HttpServer::tls() const { return loop_->tls(); }
void HttpServer::SetHandler(Handler handler) { loop_->SetHandler(std::move(handler)); }
void HttpServer::Shutdown() { loop_->Stop(); }

}  // namespace convoy
