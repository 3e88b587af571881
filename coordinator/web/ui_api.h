// The web UI's JSON API (README "The web UI"): what the pages in ui/ call, on the same rules
// as gRPC. Every endpoint but login goes through the session (a cookie, ui_sessions.h) and
// the same Authorizer rights and Redact as JobService (coordinator/rpc/auth.h): a viewer
// reads everyone's jobs without env values or stderr; only owners and admins cancel, delete
// and read logs; only admins drain. Requests that change anything carry the session's CSRF
// token (X-CSRF-Token), a JSON content type, and no foreign Origin.
//
//   GET  /api/session                    who is logged in, their rights, the CSRF token
//   POST /api/login    {"code"|"token"}  a session cookie (a login link's code, or a token)
//   POST /api/logout                     ends the session (and its streams)
//   GET  /api/jobs?state=&owner=&limit=&page_token=   a page of jobs, newest first
//   GET  /api/jobs/ID  ·  /api/jobs/ID/metrics         the job; its metric history
//   GET  /api/jobs/ID/series             the same history in columns (SeriesJson)
//   POST /api/jobs/ID/cancel  ·  /api/jobs/ID/delete
//   GET  /api/queue                      the waiting jobs in start order, with why
//   GET  /api/workers                    every worker
//   POST /api/workers/NAME/drain  ·  /api/workers/NAME/undrain
//   GET  /api/events  ·  /api/jobs/ID/events  ·  /api/jobs/ID/logs?rank=R&follow=1
//                                        live streams (server-sent events, ui_streams.h)
//
// Messages are the protobuf messages of proto/convoy/v1/job.proto as JSON with proto field
// names (as `convoy ... -o json` prints them); errors are {"error": "..."} with the HTTP
// status of the gRPC code (401 unauthenticated, 403 denied, 404, 409 precondition, 429 over
// a limit).
//
// Threading: Handle runs on the HTTP server's loop thread and never blocks; answers that wait
// for the commit thread are given there.
#pragma once

#include <memory>
#include <string>

#include "common/clock.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/web/http_server.h"
#include "coordinator/web/ui_sessions.h"
#include "coordinator/web/ui_streams.h"

namespace convoy {

// The HTTP status for a Status code.
int HttpStatusOf(StatusCode code);
// `message` as JSON with proto field names; `defaults`: fields at their default value too.
std::string ProtoJson(const google::protobuf::Message& message, bool defaults = true);
// A job's metric history as the job page draws it, in columns: {"job_id", "ranks": [{"rank",
// "step": [...], "attempt", "loss", "samples_per_second" (null where a point has none),
// "eval_step", "test_accuracy"}]}: a tenth of JobMetrics' JSON, and parsed as fast.
std::string SeriesJson(const v1::JobMetrics& metrics);

class UiApi {
 public:
  struct Options {
    // --insecure: every caller is the local admin (no login, no cookie); CSRF still applies.
    bool insecure = false;
    // The cookie is Secure (the UI is served over TLS).
    bool tls = true;
  };
  // All are not owned and outlive the API.
  UiApi(Coordinator& coordinator, Authorizer& auth, UiSessions& sessions, UiStreams& streams,
        Options options);

  // Serves a request whose path starts with /api/.
  void Handle(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex);

  // The name of the session cookie.
  static constexpr const char* kCookie = "convoy_session";

 private:
  // The logged-in caller, or 401.
  StatusOr<UiCaller> Authenticate(const HttpRequest& req);
  // A request that changes something: the CSRF token, a JSON body, our own origin; 403/415.
  Status CheckWrite(const HttpRequest& req, const UiCaller& caller) const;
  // `caller` holds `right`; else PERMISSION_DENIED naming it (logged like gRPC's refusals).
  Status Require(const UiCaller& caller, Right right, const HttpRequest& req) const;

  void Session(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex) const;
  void Login(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex);
  void Logout(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex);
  void ListJobs(const HttpRequest& req, const UiCaller& caller,
                const std::shared_ptr<HttpExchange>& ex);
  void GetJob(const std::string& id, const UiCaller& caller,
              const std::shared_ptr<HttpExchange>& ex);
  void Metrics(const std::string& id, bool series, bool accepts_gzip,
               const std::shared_ptr<HttpExchange>& ex);
  void Cancel(const std::string& id, const UiCaller& caller,
              const std::shared_ptr<HttpExchange>& ex);
  void Delete(const std::string& id, const UiCaller& caller,
              const std::shared_ptr<HttpExchange>& ex);
  void Queue(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex);
  void Workers(const std::shared_ptr<HttpExchange>& ex);
  void Drain(const std::string& name, bool drain, const UiCaller& caller,
             const std::shared_ptr<HttpExchange>& ex);
  // Routes /api/jobs/ID[/...].
  void JobRoute(const HttpRequest& req, const UiCaller& caller, const std::string& rest,
                const std::shared_ptr<HttpExchange>& ex);
  // The job's owner or an admin (cancel, delete, logs); answers the refusal itself.
  bool OwnerOrAdmin(const std::string& id, const UiCaller& caller, Right right,
                    const std::shared_ptr<HttpExchange>& ex);

  Coordinator& coordinator_;
  Authorizer& auth_;
  UiSessions& sessions_;
  UiStreams& streams_;
  const Options options_;
  // --insecure: the one CSRF token of every page (there are no sessions).
  const std::string local_csrf_;
};

}  // namespace convoy
