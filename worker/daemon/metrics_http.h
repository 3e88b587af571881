// The worker's HTTP endpoint (--metrics-listen): /metrics (Prometheus text exposition of
// prometheus collectables: a prometheus::Registry, WorkerMetrics, ...), /healthz (200 while the
// process serves at all) and /readyz (200 while the worker is registered with a coordinator, 503
// otherwise: a load balancer or a Kubernetes readiness probe then sees a worker that cannot take
// work). Served by civetweb (Debian's libcivetweb-dev, the server prometheus-cpp's Exposer also
// uses) on its own threads.
//
// Threading: Start and the destructor from one thread (main). `ready` and `before_scrape` are
// called from civetweb's threads, possibly concurrently with each other and with anything
// else: they must be thread-safe and must not block for long.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

class CivetServer;

namespace prometheus {
class Collectable;
}

namespace convoy {

class MetricsHttpServer {
 public:
  // True when the worker is ready (registered with a coordinator).
  using ReadyFn = std::function<bool()>;
  // Brings the registry's values up to date before a scrape serialises it (reads /proc etc.).
  using RefreshFn = std::function<void()>;

  // Listens on `listen` (HOST:PORT; port 0 picks a free one, see port()). Fails with
  // UNAVAILABLE naming the address when it cannot bind. `before_scrape` may be empty.
  // /metrics serialises every collectable in `sources`, in order.
  static StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, std::vector<std::shared_ptr<prometheus::Collectable>> sources,
      ReadyFn ready, RefreshFn before_scrape = nullptr);
  // Stops listening and waits for the requests in progress to end.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port actually bound.
  int port() const { return port_; }

 private:
  class Handler;
  MetricsHttpServer() = default;

  std::unique_ptr<CivetServer> server_;
  std::unique_ptr<Handler> metrics_, healthz_, readyz_;
  int port_ = 0;
};

}  // namespace convoy
