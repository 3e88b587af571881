#include "worker/daemon/metrics_http.h"

#include <CivetServer.h>
#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <string>
#include <vector>

#include "common/util.h"

namespace convoy {

// One path's GET: a status, a content type and a body computed per request.
class MetricsHttpServer::Handler : public CivetHandler {
 public:
  struct Reply {
    int code = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
  };
  explicit Handler(std::function<Reply()> get) : get_(std::move(get)) {}

  bool handleGet(CivetServer* /*server*/, mg_connection* conn) override {
    const Reply r = get_();
    const char* reason = r.code == 200 ? "OK" : "Service Unavailable";
    mg_printf(conn,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
              r.code, reason, r.content_type.c_str(), r.body.size());
    mg_write(conn, r.body.data(), r.body.size());
    return true;
  }

 private:
  std::function<Reply()> get_;
};

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, std::vector<std::shared_ptr<prometheus::Collectable>> sources,
    ReadyFn ready, RefreshFn before_scrape) {
  auto hp = ParseHostPort(listen, "--metrics-listen");
  if (!hp.ok()) return hp.status();
  // civetweb takes numeric addresses: [v6]:port or v4:port.
  std::string host = hp->first == "localhost" ? "127.0.0.1" : hp->first;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  const std::string ports = host + ":" + std::to_string(hp->second);
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  // Two threads: Prometheus scrapes one at a time, and probes are cheap.
  const std::vector<std::string> options = {"listening_ports", ports, "num_threads", "2"};
  try {
    s->server_ = std::make_unique<CivetServer>(options);
  } catch (const CivetException& e) {
    return Status::Unavailable("--metrics-listen " + listen + ": cannot listen: " + e.what());
  }
  const std::vector<int> bound = s->server_->getListeningPorts();
  s->port_ = bound.empty() ? hp->second : bound.front();

  s->metrics_ = std::make_unique<Handler>([sources = std::move(sources), before_scrape] {
    if (before_scrape) before_scrape();
    std::vector<prometheus::MetricFamily> families;
    for (const auto& source : sources) {
      auto more = source->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()),
                      std::make_move_iterator(more.end()));
    }
    Handler::Reply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = prometheus::TextSerializer().Serialize(families);
    return r;
  });
  s->healthz_ = std::make_unique<Handler>([] { return Handler::Reply{200, "text/plain", "ok\n"}; });
  s->readyz_ = std::make_unique<Handler>([ready] {
    const bool ok = ready && ready();
    return Handler::Reply{ok ? 200 : 503, "text/plain",
                          ok ? "ready\n" : "not registered with a coordinator\n"};
  });
  s->server_->addHandler("/metrics", s->metrics_.get());
  s->server_->addHandler("/healthz", s->healthz_.get());
  s->server_->addHandler("/readyz", s->readyz_.get());
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (server_) server_->close();
}

}  // namespace convoy
