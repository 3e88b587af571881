#include "coordinator/rpc/auth.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "common/util.h"

namespace convoy {

const char* RightName(Right right) {
  switch (right) {
    case Right::kPublic:
      return "public";
    case Right::kJoin:
      return "cluster.join";
    case Right::kWorker:
      return "workers.connect";
    case Right::kJobsRead:
      return "jobs.read";
    case Right::kWorkersRead:
      return "workers.read";
    case Right::kJobsSubmit:
      return "jobs.submit";
    case Right::kJobsCancel:
      return "jobs.cancel";
    case Right::kJobsDelete:
      return "jobs.delete";
    case Right::kLogsRead:
      return "logs.read";
    case Right::kWorkersDrain:
      return "workers.drain";
    case Right::kWorkersForget:
      return "workers.forget";
    case Right::kWorkersCordon:
      return "workers.cordon";
  }
  return "?";
}

const std::map<std::string, Right>& MethodRights() {
  static const auto* rights = new std::map<std::string, Right>{
      {"/convoy.v1.JobService/SubmitJob", Right::kJobsSubmit},
      {"/convoy.v1.JobService/GetJob", Right::kJobsRead},
      {"/convoy.v1.JobService/ListJobs", Right::kJobsRead},
      {"/convoy.v1.JobService/CancelJob", Right::kJobsCancel},
      {"/convoy.v1.JobService/DeleteJob", Right::kJobsDelete},
      {"/convoy.v1.JobService/WatchJob", Right::kJobsRead},
      {"/convoy.v1.JobService/GetLogs", Right::kLogsRead},
      {"/convoy.v1.JobService/ListWorkers", Right::kWorkersRead},
      {"/convoy.v1.JobService/DrainWorker", Right::kWorkersDrain},
      {"/convoy.v1.JobService/ForgetWorker", Right::kWorkersForget},
      {"/convoy.v1.JobService/CordonWorker", Right::kWorkersCordon},
      {"/convoy.v1.JobService/GetJobMetrics", Right::kJobsRead},
      {"/convoy.v1.JobService/UploadCode", Right::kJobsSubmit},
      // A web UI login link for the caller's own token: whoever may read may look.
      {"/convoy.v1.JobService/CreateUiLogin", Right::kJobsRead},
      {"/convoy.v1.WorkerService/Connect", Right::kWorker},
      {"/convoy.v1.WorkerService/FetchCode", Right::kWorker},
      {"/convoy.v1.JoinService/GetClusterInfo", Right::kPublic},
      {"/convoy.v1.JoinService/Join", Right::kJoin},
      {"/convoy.v1.JoinService/Renew", Right::kWorker},
      // gRPC's standard health service (grpc_server.cc): public on purpose, so that probes
      // and load balancers need no credentials; it answers only SERVING or NOT_SERVING.
      {"/grpc.health.v1.Health/Check", Right::kPublic},
      {"/grpc.health.v1.Health/Watch", Right::kPublic},
  };
  return *rights;
}

namespace {

bool RoleHas(Role role, Right right) {
  switch (right) {
    case Right::kJobsRead:
    case Right::kWorkersRead:
      return role == Role::kViewer || role == Role::kUser || role == Role::kAdmin;
    case Right::kJobsSubmit:
    case Right::kJobsCancel:
    case Right::kJobsDelete:
    case Right::kLogsRead:
      return role == Role::kUser || role == Role::kAdmin;
    case Right::kWorkersDrain:
    case Right::kWorkersForget:
    case Right::kWorkersCordon:
      return role == Role::kAdmin;
    case Right::kJoin:
      return role == Role::kWorker;
    case Right::kPublic:
      return true;
    case Right::kWorker:
      return false;  // a certificate, never a token
  }
  return false;
}

}  // namespace

std::string Principal::Describe() const {
  switch (kind) {
    case Kind::kLocal:
      return "local (--insecure)";
    case Kind::kUser:
      return name + " (" + RoleName(role) + ")";
    case Kind::kWorker:
      return "worker " + name;
    case Kind::kJoin:
      return "join token " + token_id;
    case Kind::kAnonymous:
      return "anonymous";
  }
  return "?";
}

std::string Authorizer::PeerCertificateName(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  for (const grpc::string_ref& v : auth->FindPropertyValues("x509_common_name")) {
    return std::string(v.data(), v.size());
  }
  return "";
}

std::string Authorizer::BearerToken(const grpc::ServerContextBase& context, bool* malformed) {
  *malformed = false;
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  const std::string value(it->second.data(), it->second.size());
  constexpr const char kBearer[] = "Bearer ";
  if (value.size() <= sizeof(kBearer) - 1 || value.compare(0, sizeof(kBearer) - 1, kBearer) != 0) {
    *malformed = true;
    return "";
  }
  return value.substr(sizeof(kBearer) - 1);
}

StatusOr<Principal> Authorizer::Check(const grpc::ServerContextBase& context,
                                      const std::string& method) {
  auto rule = MethodRights().find(method);
  if (rule == MethodRights().end()) {
    spdlog::error("{}: no authorisation rule for this method; refused", method);
    return Status::PermissionDenied(method + " has no authorisation rule");
  }
  const Right right = rule->second;
  Principal who;
  if (options_.insecure) {
    who.kind = Principal::Kind::kLocal;
    who.role = Role::kAdmin;
    return who;
  }
  if (right == Right::kPublic) return who;

  auto refuse = [&](Status st) -> Status {
    spdlog::warn("refused {} from {} ({}): {}", method, context.peer(), who.Describe(),
                 st.message());
    return st;
  };

  if (right == Right::kWorker) {
    who.name = PeerCertificateName(context);
    if (who.name.empty()) {
      return refuse(Status::Unauthenticated(
          "a client certificate signed by the cluster CA is required (worker join)"));
    }
    who.kind = Principal::Kind::kWorker;
    return who;
  }

  bool malformed = false;
  const std::string token = BearerToken(context, &malformed);
  if (malformed) {
    return refuse(Status::Unauthenticated("the authorization metadata must be 'Bearer <token>'"));
  }
  if (token.empty()) {
    return refuse(Status::Unauthenticated(
        "no credentials: give a token (--token, CONVOY_TOKEN or `convoy login`)"));
  }
  return CheckToken(token, right, method, context.peer());
}

StatusOr<Principal> Authorizer::CheckToken(const std::string& token, Right right,
                                           const std::string& what, const std::string& peer) {
  Principal who;
  auto refuse = [&](Status st) -> Status {
    spdlog::warn("refused {} from {} ({}): {}", what, peer, who.Describe(), st.message());
    return st;
  };
  if (options_.tokens == nullptr) return refuse(Status::Unauthenticated("no token store"));
  auto record = options_.tokens->Check(token, options_.clock->NowUnixMs(), false);
  if (!record.ok()) return refuse(record.status());
  who.kind = record->role == Role::kWorker ? Principal::Kind::kJoin : Principal::Kind::kUser;
  who.name = record->user;
  who.role = record->role;
  who.token_id = record->id;
  if (!RoleHas(who.role, right)) {
    return refuse(Status::PermissionDenied(std::string("permission denied: ") + RoleName(who.role) +
                                           " token of '" + who.name + "' lacks the right " +
                                           RightName(right)));
  }
  return who;
}

bool Authorizer::Holds(const Principal& who, Right right) {
  switch (who.kind) {
    case Principal::Kind::kLocal:
      return right != Right::kWorker && right != Right::kJoin;
    case Principal::Kind::kUser:
    case Principal::Kind::kJoin:
      return RoleHas(who.role, right);
    case Principal::Kind::kWorker:
      return right == Right::kWorker;
    case Principal::Kind::kAnonymous:
      return right == Right::kPublic;
  }
  return false;
}

Status Authorizer::CheckOwner(const Principal& who, const v1::Job& job, Right right) {
  if (who.admin() || job.owner() == who.name) return Status::Ok();
  return Status::PermissionDenied(std::string("permission denied: ") + RightName(right) +
                                  " on job " + job.id() + " of '" + job.owner() +
                                  "' needs its owner or an admin; you are " + who.Describe());
}

namespace {

bool SeesEverything(const Principal& who, const std::string& owner) {
  return who.admin() || (who.kind == Principal::Kind::kUser && owner == who.name);
}

// What a failed process wrote (stderr, its exception's text) is its owner's.
void Strip(v1::ProcessExit* e) {
  e->clear_stderr_tail();
  e->clear_error_message();
  e->clear_error_traceback();
}

}  // namespace

void Authorizer::Redact(const Principal& who, v1::Job* job) {
  if (SeesEverything(who, job->owner())) return;
  for (auto& [name, value] : *job->mutable_spec()->mutable_env()) value = "(redacted)";
  for (v1::Attempt& a : *job->mutable_attempts()) {
    if (a.has_failure()) Strip(a.mutable_failure()->mutable_exit());
    for (v1::ProcessExited& x : *a.mutable_exits()) Strip(x.mutable_exit());
  }
  for (v1::JobEvent& e : *job->mutable_events()) {
    if (e.has_failure()) Strip(e.mutable_failure()->mutable_exit());
  }
}

void Authorizer::Redact(const Principal& who, const std::string& owner, v1::JobEvent* event) {
  if (SeesEverything(who, owner) || !event->has_failure()) return;
  Strip(event->mutable_failure()->mutable_exit());
}

StatusOr<std::shared_ptr<void>> Authorizer::AcquireStream(const Principal& who) {
  if (who.kind != Principal::Kind::kUser) return std::shared_ptr<void>();
  {
    MutexLock lock(mu_);
    Quota& q = quotas_[who.token_id];
    if (q.streams >= options_.max_streams_per_token) {
      return Status::ResourceExhausted(
          "too many open watch/logs streams for token " + who.token_id + " (" +
          std::to_string(options_.max_streams_per_token) + "); close one, or retry when one ends");
    }
    ++q.streams;
  }
  const std::string key = who.token_id;
  // A byte of its own: the slot's address names the stream.
  auto* slot = new char(0);
  {
    MutexLock lock(mu_);
    open_streams_[slot] = OpenStream{key, nullptr};
  }
  return std::shared_ptr<void>(slot, [this, key](void* p) {
    ReleaseStream(key, p);
    delete static_cast<char*>(p);
  });
}

void Authorizer::ReleaseStream(const std::string& key, const void* slot) {
  MutexLock lock(mu_);
  open_streams_.erase(slot);
  auto it = quotas_.find(key);
  if (it != quotas_.end() && it->second.streams > 0) --it->second.streams;
}

void Authorizer::OnRevoked(const std::shared_ptr<void>& slot, std::function<void()> close) {
  if (slot == nullptr) return;
  MutexLock lock(mu_);
  auto it = open_streams_.find(slot.get());
  if (it != open_streams_.end()) it->second.close = std::move(close);
}

void Authorizer::CloseRevokedStreams() {
  if (options_.tokens == nullptr) return;
  std::set<std::string> ids;
  {
    MutexLock lock(mu_);
    for (const auto& [slot, open] : open_streams_) ids.insert(open.token_id);
  }
  // The token store's own lock and file, never under mu_.
  std::set<std::string> dead;
  const int64_t now = options_.clock->NowUnixMs();
  for (const std::string& id : ids) {
    if (!options_.tokens->StillValid(id, now)) dead.insert(id);
  }
  if (dead.empty()) return;
  std::vector<std::function<void()>> close;
  {
    MutexLock lock(mu_);
    for (auto& [slot, open] : open_streams_) {
      if (dead.count(open.token_id) != 0 && open.close) {
        close.push_back(std::move(open.close));
        open.close = nullptr;
      }
    }
  }
  if (!close.empty()) {
    spdlog::info("closing {} open stream(s) of {} revoked or expired token(s)", close.size(),
                 dead.size());
  }
  for (auto& f : close) f();
}

Status Authorizer::CheckPriority(const Principal& who, int priority) const {
  if (who.admin() || priority <= options_.max_user_priority) return Status::Ok();
  return Status::PermissionDenied("priority: " + std::to_string(priority) +
                                  " is above the ceiling for users (" +
                                  std::to_string(options_.max_user_priority) +
                                  ", --max-user-priority); an admin may submit it");
}

Status Authorizer::CheckArchivesKept(const Principal& who, int kept) const {
  const int limit = ArchiveLimitFor(who);
  if (limit <= 0 || kept < limit) return Status::Ok();
  return Status::ResourceExhausted(
      "upload quota: " + who.name + " keeps " + std::to_string(kept) + " code archives, the most " +
      "a user may (--max-archives-per-user " + std::to_string(limit) +
      "); an archive no kept job names is removed 10 minutes after its last upload: delete "
      "finished jobs, then retry");
}

Status Authorizer::TakeUpload(const Principal& who, int64_t bytes) {
  if (who.kind != Principal::Kind::kUser || who.admin() || options_.upload_bytes_per_day <= 0) {
    return Status::Ok();
  }
  const double day = static_cast<double>(options_.upload_bytes_per_day);
  const double per_ms = day / 86'400'000.0;
  const int64_t now = options_.clock->NowMonotonicMs();
  MutexLock lock(mu_);
  Uploads& u = uploads_[who.name];
  u.bytes = u.bytes < 0 ? day : std::min(day, u.bytes + (now - u.refilled_ms) * per_ms);
  u.refilled_ms = now;
  if (static_cast<double>(bytes) > u.bytes) {
    const double wait_s = std::ceil((static_cast<double>(bytes) - u.bytes) / per_ms / 1000.0);
    return Status::ResourceExhausted(
        "upload quota: " + who.name + " may upload " + HumanBytes(options_.upload_bytes_per_day) +
        " a day (--upload-bytes-per-day) and has " + HumanBytes(static_cast<int64_t>(u.bytes)) +
        " left; this chunk needs " + HumanBytes(bytes) + ": retry in " +
        std::to_string(static_cast<int64_t>(wait_s)) + " s, or ask an admin");
  }
  u.bytes -= static_cast<double>(bytes);
  return Status::Ok();
}

Status Authorizer::TakeSubmit(const Principal& who) {
  if (who.kind != Principal::Kind::kUser) return Status::Ok();
  const int64_t now = options_.clock->NowMonotonicMs();
  const double per_ms = options_.submits_per_minute / 60000.0;
  MutexLock lock(mu_);
  Quota& q = quotas_[who.token_id];
  if (q.submits < 0) {
    q.submits = options_.submit_burst;
  } else {
    q.submits = std::min(options_.submit_burst, q.submits + (now - q.refilled_ms) * per_ms);
  }
  q.refilled_ms = now;
  if (q.submits < 1) {
    const double wait_s = std::ceil((1 - q.submits) / per_ms / 1000.0);
    return Status::ResourceExhausted("too many submits for token " + who.token_id + " (" +
                                     std::to_string(static_cast<int>(options_.submits_per_minute)) +
                                     " a minute); retry in " +
                                     std::to_string(static_cast<int>(wait_s)) + " s");
  }
  q.submits -= 1;
  return Status::Ok();
}

}  // namespace convoy
