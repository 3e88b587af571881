// The coordinator's web UI (README "The web UI", issue 43): pages of jobs, a job (charts,
// events, failures, a rank's log), the queue and the workers, served on a listener of its own
// (--ui-listen HOST:PORT): HTTPS with the cluster's serving certificate, or plain HTTP on
// loopback under --insecure. The pages (ui/: HTML, CSS, JavaScript, and the uPlot chart
// library that scripts/install-deps.sh vendors from npm) are built into the binary
// (ui_assets.h); nothing is fetched at run time.
//
// Every response carries a strict Content-Security-Policy (scripts, styles and connections
// from the UI itself only, no inline script or style, no framing), nosniff, no referrer.
// The pages put every string of the API into the page as text, never as HTML.
//
// Life: Start binds the listener (the daemon's composition root does it before an etcd
// follower campaigns); until Attach, every request is answered by the follower's page: a
// redirect to the leader's host (same UI port: the group's coordinators are configured
// alike) when the leader is known, else 503 naming what the coordinator waits for. Attach
// (once leading, with the store loaded and gRPC serving) turns the real UI on.
//
// Threading: Start, Attach and Shutdown from one thread; Login from any (gRPC's).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/store/token_store.h"
#include "coordinator/web/http_server.h"
#include "coordinator/web/ui_sessions.h"
#include "coordinator/web/ui_streams.h"

namespace convoy {

class UiApi;

// The headers every response of the UI carries (the server's own errors included).
std::vector<std::pair<std::string, std::string>> UiSecurityHeaders();

class UiServer {
 public:
  struct Options {
    std::string listen;  // HOST:PORT (checked by the flags; port 0 picks one)
    // Plain text (--insecure; the listen host must be loopback): every caller is the local
    // admin, and a request must name a loopback host (no DNS rebinding).
    bool insecure = false;
    // TLS: the serving certificate and key (PEM). Required unless insecure.
    std::string cert_pem;
    std::string key_pem;
    // The host put in login links when `listen` is a wildcard (--advertise-address); empty:
    // the CLI uses the host it reached the coordinator by.
    std::string advertise_host;
    UiSessions::Options sessions;
    int max_connections = 512;
  };

  // Binds and serves the follower's page. `leader()` says who leads now ("HOST:PORT" of its
  // gRPC API, "" unknown); it may block (etcd), and is called off the serving thread.
  static StatusOr<std::unique_ptr<UiServer>> Start(Options options, const Clock& clock,
                                                   std::function<std::string()> leader = {});
  ~UiServer();
  UiServer(const UiServer&) = delete;
  UiServer& operator=(const UiServer&) = delete;

  // Serves the UI on the leading coordinator. `tokens` null under --insecure. `feed` gets the
  // coordinator's export snapshots (the composition root wires it). All outlive the server.
  void Attach(Coordinator& coordinator, Authorizer& auth, TokenStore* tokens, ClusterFeed& feed);

  // JobService.CreateUiLogin: a one-time login link for `who`. FAILED_PRECONDITION before
  // Attach (a follower).
  StatusOr<v1::CreateUiLoginResponse> Login(const Principal& who) EXCLUDES(mu_);

  int port() const { return http_->port(); }
  // Closes every connection and stream, then stops. Idempotent.
  void Shutdown();

 private:
  UiServer(Options options, const Clock& clock);
  void Serve(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex);
  void Follower(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex);
  void Housekeep();

  const Options options_;
  const Clock& clock_;
  // The assets gzip-compressed, by path (written before serving, then only read).
  std::map<std::string, std::string> gzipped_;
  std::unique_ptr<HttpServer> http_;
  std::function<std::string()> leader_;
  Mutex mu_;
  std::string leader_now_ GUARDED_BY(mu_);  // refreshed by the housekeeping thread
  bool attached_ GUARDED_BY(mu_) = false;
  std::unique_ptr<UiSessions> sessions_;
  std::unique_ptr<UiStreams> streams_;
  std::unique_ptr<UiApi> api_;
  std::thread housekeeping_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  bool shut_down_ = false;
};

}  // namespace convoy
