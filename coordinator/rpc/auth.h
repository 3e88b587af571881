// Who is calling and what they may do (README "Securing a cluster").
//
// Every handler of every service starts with Authorizer::Check(context, method): the method's
// full gRPC name is looked up in one table (MethodRights) that says which right it needs; a
// method missing from the table is refused (default deny), and the table test in
// tests/integration/coordinator_auth_test.cc calls every method of every generated service
// descriptor without credentials, so that a method added without a rule fails CI.
//
//  - People present `authorization: Bearer cvy_<id>.<secret>` (TokenStore). viewer: the read
//    verbs; user: also submit, and cancel and read the logs of their own jobs; admin:
//    everything, on everyone's jobs.
//  - Workers are who their client certificate says (mutual TLS, signed by the cluster CA):
//    the certificate's common name is the worker's name on WorkerService.Connect.
//  - A join token (role worker) only buys a worker certificate (JoinService.Join).
//  - --insecure (loopback only): every caller is the local admin.
//
// Missing or bad credentials: UNAUTHENTICATED; valid but not allowed: PERMISSION_DENIED
// naming the missing right. Refusals are logged with the peer's address.
//
// Limits against abuse, per token: concurrent WatchJob/GetLogs streams, and submits as a
// token bucket; past them RESOURCE_EXHAUSTED says when to retry.
//
// Thread-safe: its own mutex, never held across anything but map updates.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "convoy/v1/job.pb.h"
#include "coordinator/store/token_store.h"

namespace convoy {

// The rights methods need. kPublic: anyone (the CA certificate). kWorker: a client
// certificate from the cluster CA. kJoin: a join token.
enum class Right {
  kPublic,
  kJoin,
  kWorker,
  kJobsRead,
  kWorkersRead,
  kJobsSubmit,
  kJobsCancel,
  kJobsDelete,
  kLogsRead,
  kWorkersDrain,
  kWorkersForget,
  kWorkersCordon,
};

const char* RightName(Right right);

// Full method name ("/convoy.v1.JobService/SubmitJob") -> the right it needs.
const std::map<std::string, Right>& MethodRights();

struct Principal {
  enum class Kind { kLocal, kUser, kWorker, kJoin, kAnonymous };
  Kind kind = Kind::kAnonymous;
  // The user, the worker's certificate name, or empty (local, anonymous).
  std::string name;
  Role role = Role::kViewer;
  std::string token_id;
  bool admin() const {
    return kind == Kind::kLocal || (kind == Kind::kUser && role == Role::kAdmin);
  }
  // "alice (user)", "worker w1", "local".
  std::string Describe() const;
};

struct AuthOptions {
  // Plain text on loopback: every caller is the local admin.
  bool insecure = false;
  TokenStore* tokens = nullptr;  // required unless insecure
  const Clock* clock = nullptr;  // required
  // Concurrent WatchJob + GetLogs streams one token may hold.
  int max_streams_per_token = 32;
  // Submits: a bucket of `submit_burst`, refilled at `submits_per_minute`.
  double submits_per_minute = 60;
  double submit_burst = 20;
  // Code uploads: each user (not admins) may send this many bytes a day (a bucket of a day's
  // bytes, refilled continuously); 0: no limit.
  int64_t upload_bytes_per_day = int64_t{2} << 30;
  // Code archives each user (not admins) may keep stored (CodeStore::CountOwnedBy); 0: no
  // limit. A new upload past it is RESOURCE_EXHAUSTED.
  int max_archives_per_user = 100;
  // The highest job priority a user may ask for; admins may ask any.
  int max_user_priority = 0;
};

class Authorizer {
 public:
  explicit Authorizer(AuthOptions options) : options_(options) {}
  // Destroyed after the server has shut down, so no stream slot is released
  // later; taking mu_ orders this after the last release, which ran on a gRPC
  // thread whose own synchronisation the race detector cannot see.
  ~Authorizer() EXCLUDES(mu_) { MutexLock lock(mu_); }
  Authorizer(const Authorizer&) = delete;
  Authorizer& operator=(const Authorizer&) = delete;

  // The caller of `method` when they may call it; otherwise UNAUTHENTICATED or
  // PERMISSION_DENIED (logged with the peer). `method` must be in MethodRights.
  StatusOr<Principal> Check(const grpc::ServerContextBase& context, const std::string& method);

  // Check for a caller that is no gRPC call (the web UI, coordinator/web): `token` (the
  // bearer token's text) must be known, valid and of a role that holds `right`; refusals are
  // logged naming `what` and `peer`, as Check's are.
  StatusOr<Principal> CheckToken(const std::string& token, Right right, const std::string& what,
                                 const std::string& peer);
  // Whether `who` (as Check or CheckToken made it) holds `right` by its role; the local admin
  // (--insecure) holds every right but a worker's.
  static bool Holds(const Principal& who, Right right);

  // Cancelling or reading the logs of `job`: its owner or an admin.
  static Status CheckOwner(const Principal& who, const v1::Job& job, Right right);
  // What `who` may see of `job`: all of it for its owner or an admin; for anyone else the
  // spec's env values are replaced by "(redacted)" (the names stay) and the failures' stderr
  // tails, exception messages and tracebacks are dropped (GetLogs is owner-only too).
  static void Redact(const Principal& who, v1::Job* job);
  // The same for one event of a job of `owner` (a watch's update between two job states).
  static void Redact(const Principal& who, const std::string& owner, v1::JobEvent* event);

  // One stream (watch, logs) of `who` for as long as the returned handle lives;
  // RESOURCE_EXHAUSTED past the cap.
  StatusOr<std::shared_ptr<void>> AcquireStream(const Principal& who) EXCLUDES(mu_);
  // `close` ends the stream held by `slot` (from AcquireStream) once its token is revoked or
  // expires: CloseRevokedStreams calls it, at most once, on its own thread. No-op for an
  // empty slot (callers without a token).
  void OnRevoked(const std::shared_ptr<void>& slot, std::function<void()> close) EXCLUDES(mu_);
  // Closes the open streams of every token that may no longer be used. GrpcServer calls it
  // every kRevocationCheckMs, so that a revoked token's `logs -f` or watch ends within a
  // second.
  void CloseRevokedStreams() EXCLUDES(mu_);
  static constexpr int kRevocationCheckMs = 250;

  // A spec's `priority` above --max-user-priority: PERMISSION_DENIED naming the field,
  // unless `who` is an admin.
  Status CheckPriority(const Principal& who, int priority) const;

  // Takes one submit from `who`'s bucket; RESOURCE_EXHAUSTED with the wait otherwise.
  Status TakeSubmit(const Principal& who) EXCLUDES(mu_);
  // Takes `bytes` of `who`'s daily upload quota (a user's, by name: every token of theirs);
  // RESOURCE_EXHAUSTED saying what is left and when more is, otherwise. Admins: no limit.
  Status TakeUpload(const Principal& who, int64_t bytes) EXCLUDES(mu_);
  // Whether `who` (keeping `kept` archives) may start storing another; RESOURCE_EXHAUSTED
  // naming the flag otherwise. Admins: no limit.
  Status CheckArchivesKept(const Principal& who, int kept) const;
  // The limit CheckArchivesKept applies to `who`; 0: none (callers skip counting).
  int ArchiveLimitFor(const Principal& who) const {
    return who.kind != Principal::Kind::kUser || who.admin() ? 0 : options_.max_archives_per_user;
  }

  // The name in a verified client certificate of the cluster CA; empty when there is none.
  static std::string PeerCertificateName(const grpc::ServerContextBase& context);

  // The bearer token in the call's metadata; empty when there is none.
  static std::string BearerToken(const grpc::ServerContextBase& context, bool* malformed);

  bool insecure() const { return options_.insecure; }

 private:
  struct Quota {
    int streams = 0;
    double submits = -1;  // tokens in the bucket; -1: full (never used)
    int64_t refilled_ms = 0;
  };
  void ReleaseStream(const std::string& key, const void* slot) EXCLUDES(mu_);

  const AuthOptions options_;
  Mutex mu_;
  std::map<std::string, Quota> quotas_ GUARDED_BY(mu_);  // by token id (or "local")
  struct OpenStream {
    std::string token_id;
    std::function<void()> close;  // empty until OnRevoked, and once called
  };
  std::map<const void*, OpenStream> open_streams_ GUARDED_BY(mu_);  // by slot
  struct Uploads {
    double bytes = -1;  // left in the bucket; -1: full (never used)
    int64_t refilled_ms = 0;
  };
  std::map<std::string, Uploads> uploads_ GUARDED_BY(mu_);  // by user name
};

}  // namespace convoy
