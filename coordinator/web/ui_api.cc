#include "coordinator/web/ui_api.h"

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "common/pki.h"
#include "common/util.h"
#include "coordinator/state/list_query.h"

namespace convoy {
namespace {

constexpr int kDefaultJobsPage = 50;
// A log page starts with the last this many bytes of the rank's log.
constexpr int64_t kDefaultLogTail = 256 * 1024;

void Fail(const std::shared_ptr<HttpExchange>& ex, const Status& st) {
  ex->Respond(HttpResponse::Error(HttpStatusOf(st.code()), st.message()));
}

HttpResponse NoStore(HttpResponse r) {
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

void Reply(const std::shared_ptr<HttpExchange>& ex, const google::protobuf::Message& m) {
  ex->Respond(NoStore(HttpResponse::Json(200, ProtoJson(m))));
}

std::string By(const UiCaller& caller) {
  return caller.who.kind == Principal::Kind::kUser ? caller.who.name : "";
}

// "a,b" -> {a, b}, without empty parts.
std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string CookieHeader(const std::string& value, bool secure, bool clear) {
  std::string c = std::string(UiApi::kCookie) + "=" + value + "; Path=/; HttpOnly; SameSite=Strict";
  if (secure) c += "; Secure";
  if (clear) c += "; Max-Age=0";
  return c;
}

}  // namespace

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

std::string ProtoJson(const google::protobuf::Message& message, bool defaults) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = defaults;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) return "{}";
  return out;
}

UiApi::UiApi(Coordinator& coordinator, Authorizer& auth, UiSessions& sessions, UiStreams& streams,
             Options options)
    : coordinator_(coordinator),
      auth_(auth),
      sessions_(sessions),
      streams_(streams),
      options_(options),
      local_csrf_(RandomHex(32)) {}

StatusOr<UiCaller> UiApi::Authenticate(const HttpRequest& req) {
  UiCaller caller;
  if (options_.insecure) {
    caller.who.kind = Principal::Kind::kLocal;
    caller.who.role = Role::kAdmin;
    caller.session.csrf = local_csrf_;
    return caller;
  }
  const std::string cookie = req.Cookie(kCookie);
  auto session = sessions_.Find(cookie);
  if (!session.ok()) return session.status();
  caller.who = session->who;
  caller.session = *session;
  caller.session_key = UiSessions::Key(cookie);
  return caller;
}

Status UiApi::CheckWrite(const HttpRequest& req, const UiCaller& caller) const {
  // Cross-site requests: a browser says where a request comes from (Sec-Fetch-Site, Origin);
  // a form of another site can send neither our JSON content type nor our header.
  const std::string site = req.Header("sec-fetch-site");
  if (!site.empty() && site != "same-origin" && site != "none") {
    return Status::PermissionDenied("csrf: a request from another site (" + site + ")");
  }
  const std::string origin = req.Header("origin");
  if (!origin.empty() && origin != "null") {
    const std::string host = req.Header("host");
    if (origin != "https://" + host && origin != "http://" + host) {
      return Status::PermissionDenied("csrf: origin " + origin + " is not this UI's");
    }
  }
  if (!UiSessions::CsrfMatches(caller.session, req.Header("x-csrf-token"))) {
    return Status::PermissionDenied("csrf: missing or wrong X-CSRF-Token");
  }
  return Status::Ok();
}

Status UiApi::Require(const UiCaller& caller, Right right, const HttpRequest& req) const {
  if (Authorizer::Holds(caller.who, right)) return Status::Ok();
  Status st = Status::PermissionDenied(std::string("permission denied: ") +
                                       RoleName(caller.who.role) + " token of '" + caller.who.name +
                                       "' lacks the right " + RightName(right));
  spdlog::warn("refused web UI {} {} from {} ({}): {}", req.method, req.path, req.peer,
               caller.who.Describe(), st.message());
  return st;
}

void UiApi::Handle(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex) {
  const std::string& path = req.path;
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  if (!get && !post) return Fail(ex, Status::InvalidArgument("method: GET or POST only"));
  if (path == "/api/login") {
    if (!post) return Fail(ex, Status::InvalidArgument("method: POST only"));
    return Login(req, ex);
  }
  auto caller = Authenticate(req);
  if (!caller.ok()) return Fail(ex, caller.status());
  if (post) {
    if (req.Header("content-type").rfind("application/json", 0) != 0) {
      ex->Respond(HttpResponse::Error(415, "content-type: application/json only"));
      return;
    }
    if (Status st = CheckWrite(req, *caller); !st.ok()) {
      spdlog::warn("refused web UI POST {} from {} ({}): {}", path, req.peer,
                   caller->who.Describe(), st.message());
      return Fail(ex, st);
    }
  }
  if (path == "/api/session" && get) return Session(*caller, ex);
  if (path == "/api/logout" && post) return Logout(*caller, ex);
  if (path == "/api/jobs" && get) {
    if (Status st = Require(*caller, Right::kJobsRead, req); !st.ok()) return Fail(ex, st);
    return ListJobs(req, *caller, ex);
  }
  if (path.rfind("/api/jobs/", 0) == 0) return JobRoute(req, *caller, path.substr(10), ex);
  if (path == "/api/queue" && get) {
    if (Status st = Require(*caller, Right::kJobsRead, req); !st.ok()) return Fail(ex, st);
    return Queue(*caller, ex);
  }
  if (path == "/api/workers" && get) {
    if (Status st = Require(*caller, Right::kWorkersRead, req); !st.ok()) return Fail(ex, st);
    return Workers(ex);
  }
  if (path.rfind("/api/workers/", 0) == 0 && post) {
    const std::string rest = path.substr(13);
    const size_t slash = rest.find('/');
    const std::string name = rest.substr(0, slash);
    const std::string verb = slash == std::string::npos ? "" : rest.substr(slash + 1);
    if (!IsValidName(name)) return Fail(ex, Status::InvalidArgument("worker: not a valid name"));
    if (verb != "drain" && verb != "undrain") return Fail(ex, Status::NotFound("no such action"));
    if (Status st = Require(*caller, Right::kWorkersDrain, req); !st.ok()) return Fail(ex, st);
    return Drain(name, verb == "drain", *caller, ex);
  }
  if (path == "/api/events" && get) {
    if (Status st = Require(*caller, Right::kJobsRead, req); !st.ok()) return Fail(ex, st);
    return streams_.Cluster(*caller, ex);
  }
  Fail(ex, Status::NotFound("no such endpoint: " + req.method + " " + path));
}

void UiApi::JobRoute(const HttpRequest& req, const UiCaller& caller, const std::string& rest,
                     const std::shared_ptr<HttpExchange>& ex) {
  const size_t slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  const std::string verb = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (!IsValidName(id)) return Fail(ex, Status::InvalidArgument("job: not a valid job id"));
  const bool get = req.method == "GET";
  if (get && (verb.empty() || verb == "metrics" || verb == "series" || verb == "events")) {
    if (Status st = Require(caller, Right::kJobsRead, req); !st.ok()) return Fail(ex, st);
    if (verb.empty()) return GetJob(id, caller, ex);
    if (verb == "metrics" || verb == "series") {
      return Metrics(id, verb == "series", AcceptsGzip(req), ex);
    }
    return streams_.Job(caller, id, ex);
  }
  if (get && verb == "logs") {
    if (Status st = Require(caller, Right::kLogsRead, req); !st.ok()) return Fail(ex, st);
    const std::string rank_text = req.Query("rank", "0");
    const std::string attempt_text = req.Query("attempt", "-1");
    const std::string tail_text = req.Query("tail", std::to_string(kDefaultLogTail));
    int rank = 0, attempt = -1;
    int64_t tail = 0;
    try {
      rank = std::stoi(rank_text);
      attempt = std::stoi(attempt_text);
      tail = std::stoll(tail_text);
    } catch (const std::exception&) {
      return Fail(ex, Status::InvalidArgument("rank, attempt, tail: must be numbers"));
    }
    if (rank < 0 || rank > 1 << 20) return Fail(ex, Status::InvalidArgument("rank: out of range"));
    if (tail < 0) return Fail(ex, Status::InvalidArgument("tail: must not be negative"));
    if (!OwnerOrAdmin(id, caller, Right::kLogsRead, ex)) return;
    return streams_.Logs(caller, id, rank, attempt, req.Query("follow") == "1", tail, ex);
  }
  if (req.method == "POST" && verb == "cancel") {
    if (Status st = Require(caller, Right::kJobsCancel, req); !st.ok()) return Fail(ex, st);
    return Cancel(id, caller, ex);
  }
  if (req.method == "POST" && verb == "delete") {
    if (Status st = Require(caller, Right::kJobsDelete, req); !st.ok()) return Fail(ex, st);
    return Delete(id, caller, ex);
  }
  Fail(ex, Status::NotFound("no such endpoint: " + req.method + " " + req.path));
}

bool UiApi::OwnerOrAdmin(const std::string& id, const UiCaller& caller, Right right,
                         const std::shared_ptr<HttpExchange>& ex) {
  if (caller.who.admin()) return true;
  auto job = coordinator_.Get(id);
  if (!job.ok()) {
    Fail(ex, job.status());
    return false;
  }
  Status mine = Authorizer::CheckOwner(caller.who, *job, right);
  if (!mine.ok()) {
    spdlog::warn("refused web UI {} of {} ({}): {}", RightName(right), id, caller.who.Describe(),
                 mine.message());
    Fail(ex, mine);
    return false;
  }
  return true;
}

void UiApi::Session(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex) const {
  nlohmann::json j;
  j["user"] = caller.who.kind == Principal::Kind::kLocal ? "local" : caller.who.name;
  j["role"] = RoleName(caller.who.role);
  j["csrf"] = caller.session.csrf;
  j["insecure"] = options_.insecure;
  // What the pages offer; the server checks each action again.
  j["may"] = {{"submit", Authorizer::Holds(caller.who, Right::kJobsSubmit)},
              {"cancel", Authorizer::Holds(caller.who, Right::kJobsCancel)},
              {"logs", Authorizer::Holds(caller.who, Right::kLogsRead)},
              {"drain", Authorizer::Holds(caller.who, Right::kWorkersDrain)},
              {"all_jobs", caller.who.admin()}};
  ex->Respond(NoStore(
      HttpResponse::Json(200, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))));
}

void UiApi::Login(const HttpRequest& req, const std::shared_ptr<HttpExchange>& ex) {
  // No session yet, so no CSRF token: the request must come from this UI's own page.
  const std::string site = req.Header("sec-fetch-site");
  const std::string origin = req.Header("origin");
  const std::string host = req.Header("host");
  if ((!site.empty() && site != "same-origin") ||
      (!origin.empty() && origin != "https://" + host && origin != "http://" + host) ||
      req.Header("content-type").rfind("application/json", 0) != 0) {
    spdlog::warn("refused a web UI login from {}: not from the UI's own page", req.peer);
    return Fail(ex, Status::PermissionDenied("login: only from the UI's own login page"));
  }
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Fail(ex, Status::InvalidArgument("body: a JSON object with code or token"));
  }
  StatusOr<UiSession> session = Status::InvalidArgument("body: give code or token");
  if (body.contains("code") && body["code"].is_string()) {
    session = sessions_.Redeem(body["code"].get<std::string>());
  } else if (body.contains("token") && body["token"].is_string()) {
    if (options_.insecure) {
      Principal local;
      local.kind = Principal::Kind::kLocal;
      local.role = Role::kAdmin;
      session = sessions_.Open(local);
    } else {
      auto who = auth_.CheckToken(body["token"].get<std::string>(), Right::kJobsRead,
                                  "web UI login", req.peer);
      if (who.ok()) {
        session = sessions_.Open(*who);
      } else {
        session = who.status();
      }
    }
  }
  if (!session.ok()) {
    spdlog::warn("refused a web UI login from {}: {}", req.peer, session.status().message());
    return Fail(ex, session.status());
  }
  spdlog::info("web UI: {} logged in from {}", session->who.Describe(), req.peer);
  nlohmann::json j;
  j["user"] = session->who.kind == Principal::Kind::kLocal ? "local" : session->who.name;
  j["role"] = RoleName(session->who.role);
  HttpResponse r = NoStore(HttpResponse::Json(200, j.dump()));
  r.headers.emplace_back("Set-Cookie", CookieHeader(session->id, options_.tls, false));
  ex->Respond(std::move(r));
}

void UiApi::Logout(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex) {
  if (!caller.session.id.empty()) sessions_.End(caller.session.id);
  streams_.EndSession(caller.session_key);
  spdlog::info("web UI: {} logged out", caller.who.Describe());
  HttpResponse r = NoStore(HttpResponse::Json(200, "{}"));
  r.headers.emplace_back("Set-Cookie", CookieHeader("", options_.tls, true));
  ex->Respond(std::move(r));
}

void UiApi::ListJobs(const HttpRequest& req, const UiCaller& caller,
                     const std::shared_ptr<HttpExchange>& ex) {
  v1::ListJobsRequest list;
  for (const std::string& name : SplitComma(req.Query("state"))) {
    v1::JobState state;
    if (!v1::JobState_Parse(name, &state) || state == v1::JOB_STATE_UNSPECIFIED) {
      return Fail(ex, Status::InvalidArgument("state: unknown state '" + name + "'"));
    }
    list.add_states(state);
  }
  list.set_owner(req.Query("owner"));
  try {
    list.set_limit(std::stoi(req.Query("limit", std::to_string(kDefaultJobsPage))));
  } catch (const std::exception&) {
    return Fail(ex, Status::InvalidArgument("limit: not a number"));
  }
  list.set_page_token(req.Query("page_token"));
  list.set_newest_first(true);
  auto query = ParseJobQuery(list);
  if (!query.ok()) return Fail(ex, query.status());
  const Principal who = caller.who;
  coordinator_.ListPageCommitted(*query, [ex, who](JobManager::JobPage page) {
    v1::ListJobsResponse resp;
    for (v1::Job& job : page.jobs) {
      Authorizer::Redact(who, &job);
      *resp.add_jobs() = std::move(job);
    }
    resp.set_next_page_token(std::move(page.next_page_token));
    Reply(ex, resp);
  });
}

void UiApi::GetJob(const std::string& id, const UiCaller& caller,
                   const std::shared_ptr<HttpExchange>& ex) {
  const Principal who = caller.who;
  coordinator_.GetCommitted(id, [ex, who](StatusOr<v1::Job> job) {
    if (!job.ok()) return Fail(ex, job.status());
    Authorizer::Redact(who, &*job);
    Reply(ex, *job);
  });
}

void UiApi::Metrics(const std::string& id, bool series, bool accepts_gzip,
                    const std::shared_ptr<HttpExchange>& ex) {
  auto metrics = coordinator_.GetMetrics(id);
  if (!metrics.ok()) return Fail(ex, metrics.status());
  // Tens of thousands of points: only the fields each has, or (the job page's) as columns,
  // and compressed (numbers only: nothing secret beside a string another user wrote).
  HttpResponse r =
      NoStore(HttpResponse::Json(200, series ? SeriesJson(*metrics) : ProtoJson(*metrics, false)));
  std::string gzip;
  if (accepts_gzip && r.body.size() > 1024 && Gzip(r.body, 1, &gzip)) UseGzip(&r, std::move(gzip));
  ex->Respond(std::move(r));
}

std::string SeriesJson(const v1::JobMetrics& metrics) {
  std::string out = "{\"job_id\":" + JsonQuote(metrics.job_id()) + ",\"ranks\":[";
  char buf[32];
  auto number = [&out, &buf](bool has, double v) {
    if (!has || !std::isfinite(v)) {
      out += "null";
      return;
    }
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    out += buf;
  };
  // One column of `points` (the rank's kept points, then its latest if apart).
  auto column = [&out](const char* name, int n, const std::function<void(int)>& cell) {
    out += ",\"";
    out += name;
    out += "\":[";
    for (int i = 0; i < n; ++i) {
      if (i > 0) out += ',';
      cell(i);
    }
    out += ']';
  };
  for (int r = 0; r < metrics.ranks_size(); ++r) {
    const v1::RankHistory& rank = metrics.ranks(r);
    std::vector<const v1::MetricPoint*> points;
    for (const v1::MetricPoint& p : rank.points()) points.push_back(&p);
    if (rank.has_last()) points.push_back(&rank.last());
    const int n = static_cast<int>(points.size());
    out += r == 0 ? "{" : ",{";
    out += "\"rank\":" + std::to_string(rank.rank());
    column("step", n, [&](int i) { out += std::to_string(points[i]->step()); });
    column("attempt", n, [&](int i) { out += std::to_string(points[i]->attempt()); });
    column("loss", n, [&](int i) { number(points[i]->has_loss(), points[i]->loss()); });
    column("samples_per_second", n, [&](int i) {
      number(points[i]->has_samples_per_second(), points[i]->samples_per_second());
    });
    const int e = rank.evals_size();
    column("eval_step", e, [&](int i) { out += std::to_string(rank.evals(i).step()); });
    column("test_accuracy", e, [&](int i) {
      number(rank.evals(i).has_test_accuracy(), rank.evals(i).test_accuracy());
    });
    out += '}';
  }
  out += "]}";
  return out;
}

void UiApi::Cancel(const std::string& id, const UiCaller& caller,
                   const std::shared_ptr<HttpExchange>& ex) {
  if (!OwnerOrAdmin(id, caller, Right::kJobsCancel, ex)) return;
  const Principal who = caller.who;
  coordinator_.Cancel(id, "cancelled in the web UI", By(caller), [ex, who](StatusOr<v1::Job> job) {
    if (!job.ok()) return Fail(ex, job.status());
    Authorizer::Redact(who, &*job);
    Reply(ex, *job);
  });
}

void UiApi::Delete(const std::string& id, const UiCaller& caller,
                   const std::shared_ptr<HttpExchange>& ex) {
  if (!OwnerOrAdmin(id, caller, Right::kJobsDelete, ex)) return;
  coordinator_.Delete(id, By(caller), [ex, id](StatusOr<std::vector<std::string>> workers) {
    if (!workers.ok()) return Fail(ex, workers.status());
    v1::DeleteJobResponse resp;
    resp.set_job_id(id);
    for (const std::string& w : *workers) resp.add_workers(w);
    Reply(ex, resp);
  });
}

void UiApi::Queue(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex) {
  JobQuery query;
  query.states = {v1::PENDING};
  query.limit = kMaxPageSize;
  const Principal who = caller.who;
  coordinator_.ListPageCommitted(query, [ex, who](JobManager::JobPage page) {
    // Start order: the queue position (1 = next); jobs without one (not yet ranked) last.
    std::stable_sort(page.jobs.begin(), page.jobs.end(), [](const v1::Job& a, const v1::Job& b) {
      const int pa = a.queue_position() > 0 ? a.queue_position() : 1 << 30;
      const int pb = b.queue_position() > 0 ? b.queue_position() : 1 << 30;
      return pa < pb;
    });
    v1::ListJobsResponse resp;
    for (v1::Job& job : page.jobs) {
      Authorizer::Redact(who, &job);
      *resp.add_jobs() = std::move(job);
    }
    Reply(ex, resp);
  });
}

void UiApi::Workers(const std::shared_ptr<HttpExchange>& ex) {
  v1::ListWorkersResponse resp;
  WorkerQuery query;
  query.limit = kMaxPageSize;
  for (;;) {
    JobManager::WorkerPage page = coordinator_.ListWorkersPage(query);
    for (v1::WorkerInfo& w : page.workers) *resp.add_workers() = std::move(w);
    if (page.next_page_token.empty() || resp.workers_size() == 0) break;
    query.after = resp.workers(resp.workers_size() - 1).name();
  }
  Reply(ex, resp);
}

void UiApi::Drain(const std::string& name, bool drain, const UiCaller& caller,
                  const std::shared_ptr<HttpExchange>& ex) {
  coordinator_.SetDrained(name, drain, By(caller), false, [ex](StatusOr<v1::WorkerInfo> info) {
    if (!info.ok()) return Fail(ex, info.status());
    Reply(ex, *info);
  });
}

}  // namespace convoy
