#include "coordinator/web/ui_server.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "common/util.h"
#include "coordinator/web/ui_api.h"
#include "coordinator/web/ui_assets.h"

namespace convoy {
namespace {

bool IsWildcardHost(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

// The host part of a Host header ("127.0.0.1:8443", "[::1]:8443", "localhost").
std::string HostOf(const std::string& host_header) {
  if (!host_header.empty() && host_header[0] == '[') {
    const size_t close = host_header.find(']');
    return close == std::string::npos ? host_header : host_header.substr(1, close - 1);
  }
  return host_header.substr(0, host_header.rfind(':'));
}

// The pages: one document; its script draws the page the path names.
bool IsPage(const std::string& path) {
  return path == "/jobs" || path == "/queue" || path == "/workers" || path == "/login" ||
         (path.rfind("/jobs/", 0) == 0 && path.size() > 6 &&
          path.find('/', 6) == std::string::npos);
}

// `gzip`: the asset compressed, or null (the client takes none, or it would not shrink).
HttpResponse Asset(const UiAsset& asset, const std::string* gzip, const HttpRequest& req) {
  HttpResponse r;
  r.content_type = asset.content_type;
  // Each encoding is a representation of its own, with its own tag.
  const std::string etag = std::string("\"") + asset.etag + (gzip ? "-gz" : "") + "\"";
  r.headers.emplace_back("ETag", etag);
  // Checked again at every use (a new binary has new assets); unchanged ones answer 304.
  r.headers.emplace_back("Cache-Control", "no-cache");
  if (req.Header("if-none-match") == etag) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  if (gzip != nullptr) {
    UseGzip(&r, *gzip);
  } else {
    r.body.assign(reinterpret_cast<const char*>(asset.data), asset.size);
  }
  return r;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> UiSecurityHeaders() {
  return {
      // Scripts, styles, images and connections from the UI itself only: no inline script or
      // style, no eval, no other origin, no framing, no plugin.
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      {"Cross-Origin-Opener-Policy", "same-origin"},
      {"Cross-Origin-Resource-Policy", "same-origin"},
  };
}

StatusOr<std::unique_ptr<UiServer>> UiServer::Start(Options options, const Clock& clock,
                                                    std::function<std::string()> leader) {
  auto hp = ParseHostPort(options.listen, "--ui-listen");
  if (!hp.ok()) return hp.status();
  if (options.insecure && !IsLoopbackHost(hp->first)) {
    return Status::InvalidArgument(
        "--ui-listen: --insecure serves plain HTTP without authentication: a loopback address "
        "only, not '" +
        hp->first + "'");
  }
  if (!options.insecure && (options.cert_pem.empty() || options.key_pem.empty())) {
    return Status::InvalidArgument("--ui-listen: HTTPS needs the serving certificate");
  }
  std::unique_ptr<UiServer> s(new UiServer(options, clock));
  s->leader_ = std::move(leader);
  // The files compressed once (the chart library to 40 %), for the browsers that take gzip.
  for (size_t i = 0; i < UiAssetCount(); ++i) {
    const UiAsset& a = UiAssets()[i];
    std::string gzip;
    if (Gzip(std::string(reinterpret_cast<const char*>(a.data), a.size), 9, &gzip) &&
        gzip.size() < a.size) {
      s->gzipped_[a.path] = std::move(gzip);
    }
  }
  HttpServer::Options http;
  http.listen = options.listen;
  if (!options.insecure) {
    http.cert_pem = options.cert_pem;
    http.key_pem = options.key_pem;
  }
  http.headers = UiSecurityHeaders();
  http.max_connections = options.max_connections;
  UiServer* self = s.get();
  auto server = HttpServer::Start(
      http,
      [self](const HttpRequest& req, std::shared_ptr<HttpExchange> ex) { self->Serve(req, ex); });
  if (!server.ok()) return server.status();
  s->http_ = std::move(*server);
  s->housekeeping_ = std::thread([self] { self->Housekeep(); });
  spdlog::info("web UI on {}://{}:{}{}", options.insecure ? "http" : "https", hp->first,
               s->http_->port(), options.insecure ? " (PLAIN TEXT, loopback only)" : "");
  return s;
}

UiServer::UiServer(Options options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

UiServer::~UiServer() { Shutdown(); }

void UiServer::Attach(Coordinator& coordinator, Authorizer& auth, TokenStore* tokens,
                      ClusterFeed& feed) {
  std::function<bool(const std::string&)> still_valid;
  if (tokens != nullptr) {
    const Clock* clock = &clock_;
    still_valid = [tokens, clock](const std::string& id) {
      return tokens->StillValid(id, clock->NowUnixMs());
    };
  }
  sessions_ = std::make_unique<UiSessions>(clock_, options_.sessions, std::move(still_valid));
  streams_ = std::make_unique<UiStreams>(coordinator, auth, feed);
  UiApi::Options api;
  api.insecure = options_.insecure;
  api.tls = !options_.insecure;
  api_ = std::make_unique<UiApi>(coordinator, auth, *sessions_, *streams_, api);
  MutexLock lock(mu_);
  attached_ = true;
}

StatusOr<v1::CreateUiLoginResponse> UiServer::Login(const Principal& who) {
  {
    MutexLock lock(mu_);
    if (!attached_) {
      return Status::FailedPrecondition(
          "the web UI is not serving yet (this coordinator does "
          "not lead)");
    }
  }
  const UiLoginCode code = sessions_->IssueCode(who);
  v1::CreateUiLoginResponse resp;
  resp.set_scheme(options_.insecure ? "http" : "https");
  auto hp = ParseHostPort(options_.listen, "--ui-listen");
  std::string host = hp.ok() ? hp->first : "";
  if (IsWildcardHost(host)) host = options_.advertise_host;
  resp.set_host(host);
  resp.set_port(http_->port());
  resp.set_path("/login#code=" + code.code);
  resp.set_expires_unix_ms(code.expires_unix_ms);
  spdlog::info("web UI: a login link for {} (valid until {})", who.Describe(),
               UtcIso8601(code.expires_unix_ms / 1000));
  return resp;
}

void UiServer::Serve(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex) {
  if (options_.insecure && !IsLoopbackHost(HostOf(req.Header("host")))) {
    // Plain text serves loopback names only: a page of another site whose name was made to
    // resolve to 127.0.0.1 (DNS rebinding) gets nothing.
    ex->Respond(HttpResponse::Error(403, "host: this UI answers loopback names only"));
    return;
  }
  bool attached;
  {
    MutexLock lock(mu_);
    attached = attached_;
  }
  if (!attached) return Follower(req, ex);
  const std::string& path = req.path;
  if (path.rfind("/api/", 0) == 0) return api_->Handle(req, ex);
  if (req.method != "GET") {
    ex->Respond(HttpResponse::Error(405, "method: GET only"));
    return;
  }
  if (path == "/") {
    HttpResponse r;
    r.status = 302;
    r.content_type.clear();
    r.headers.emplace_back("Location", "/jobs");
    ex->Respond(std::move(r));
    return;
  }
  const UiAsset* asset = FindUiAsset(IsPage(path) ? "/index.html" : path);
  if (asset == nullptr || path == "/index.html") {
    ex->Respond(HttpResponse::Error(404, "no such page: " + path));
    return;
  }
  auto gz = gzipped_.find(asset->path);
  ex->Respond(Asset(*asset, AcceptsGzip(req) && gz != gzipped_.end() ? &gz->second : nullptr, req));
}

void UiServer::Follower(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex) {
  std::string leader;
  {
    MutexLock lock(mu_);
    leader = leader_now_;
  }
  auto hp = ParseHostPort(leader, "leader");
  if (hp.ok() && !IsWildcardHost(hp->first)) {
    HttpResponse r;
    r.status = 307;
    r.content_type = "text/plain; charset=utf-8";
    const std::string host =
        hp->first.find(':') != std::string::npos ? "[" + hp->first + "]" : hp->first;
    const std::string to = std::string(options_.insecure ? "http" : "https") + "://" + host + ":" +
                           std::to_string(http_->port()) + req.target;
    r.headers.emplace_back("Location", to);
    r.body = "this coordinator follows " + leader + "; the UI is at " + to + "\n";
    ex->Respond(std::move(r));
    return;
  }
  HttpResponse r = HttpResponse::Error(
      503, leader.empty() ? "this coordinator is starting, or follows a leader it cannot name yet"
                          : "this coordinator follows " + leader);
  r.headers.emplace_back("Retry-After", "2");
  ex->Respond(std::move(r));
}

void UiServer::Housekeep() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_) break;
    lock.unlock();
    bool attached;
    {
      MutexLock l(mu_);
      attached = attached_;
    }
    if (attached) {
      // Sessions past their time, or whose token was revoked: their streams end too.
      for (const std::string& key : sessions_->Sweep()) streams_->EndSession(key);
    } else if (leader_) {
      const std::string leader = leader_();
      MutexLock l(mu_);
      leader_now_ = leader;
    }
    lock.lock();
  }
}

void UiServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (housekeeping_.joinable()) housekeeping_.join();
  if (http_) http_->Shutdown();
}

}  // namespace convoy
