// A small HTTP/1.1 server for the web UI: one thread, one epoll loop, non-blocking sockets,
// TLS through OpenSSL (the coordinator's own serving certificate) or plain text. Why not
// civetweb, which serves the worker's /metrics: Debian 12's libcivetweb1 loads OpenSSL at
// run time by the 1.1 API names, and OpenSSL 3 no longer exports one of them
// (SSL_get_peer_certificate), so its TLS cannot start; and civetweb holds a thread for each
// open connection, where a page's live stream should cost no more than a `convoy watch`
// (gRPC's callback API: no thread per stream).
//
// Handlers run on the loop thread and must not block: they answer at once, or keep the
// HttpExchange and answer later from any thread (the Coordinator's commit thread, say). A
// streamed answer (server-sent events) has no Content-Length and ends the connection when it
// ends; its bytes queue in a bounded buffer, and a client that does not read is dropped
// rather than waited for.
//
// Limits: `max_connections` open at once (more are closed as they are accepted), a request
// head within `request_timeout_ms` of its first byte (or of the connection's start; slow
// clients are cut), `idle_timeout_ms` between two requests of a keep-alive connection, the
// parser's HttpLimits, and `max_stream_buffer` queued bytes per stream.
//
// Threading: Start and Shutdown from one thread; HttpExchange from any.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/web/http_message.h"

namespace convoy {

// One request's answer. Exactly one of Respond or StartStream (then Send/End) is used; later
// calls are ignored. Thread-safe; may outlive the connection (calls then do nothing).
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  // The whole answer.
  virtual void Respond(HttpResponse response) = 0;
  // Starts a streamed answer: `head` (its body sent first), then each Send, until End or
  // the client leaves. `keepalive`: sent when the stream has been quiet for 15 s (an SSE
  // comment), so that a peer that vanished is noticed by a failed write.
  virtual void StartStream(HttpResponse head, std::string keepalive = "") = 0;
  // Queues `data` on the stream; false once the stream is over (the client left, was too
  // slow and was dropped, or End was called).
  virtual bool Send(std::string data) = 0;
  // Ends the stream (the connection closes once what is queued is written).
  virtual void End() = 0;
  // `fn` runs once when the exchange is over for good (answered and written, the client
  // gone, or shutdown): at once, on the caller's thread, if it already is; else on the
  // server's thread. Streams release what they hold here.
  virtual void OnClose(std::function<void()> fn) = 0;
  // Whether OnClose's moment has come.
  virtual bool closed() const = 0;
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, std::shared_ptr<HttpExchange>)>;

  struct Options {
    std::string listen;  // HOST:PORT; port 0 picks a free one
    // TLS with this certificate chain and key (PEM); both empty: plain text.
    std::string cert_pem;
    std::string key_pem;
    // Headers added to every response, the server's own errors included (security policy).
    std::vector<std::pair<std::string, std::string>> headers;
    int max_connections = 512;
    int64_t request_timeout_ms = 10'000;
    int64_t idle_timeout_ms = 60'000;
    size_t max_stream_buffer = 1 << 20;
    HttpLimits limits;
  };

  // Binds `options.listen` and starts the loop; `handler` gets every well-formed request.
  static StatusOr<std::unique_ptr<HttpServer>> Start(Options options, Handler handler);
  // Shutdown.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  bool tls() const;
  // Replaces the handler (requests that arrive later get the new one). Any thread.
  void SetHandler(Handler handler);
  // Stops accepting, closes every connection (streams' OnClose run) and joins the loop.
  // Idempotent.
  void Shutdown();

  class Loop;  // http_server.cc

 private:
  explicit HttpServer(std::shared_ptr<Loop> loop) : loop_(std::move(loop)) {}
  std::shared_ptr<Loop> loop_;
};

}  // namespace convoy
