// The web UI's live updates: server-sent events (text/event-stream), one stream per page, on
// the coordinator's own watch machinery, so that a page left open costs what a
// `convoy watch` does:
//
//   /api/jobs/ID/events  the job page: Coordinator::Watch, as JobService.WatchJob (a "job"
//                        snapshot first and on every state change, then each "event" and
//                        "metric", redacted as WatchJob redacts; "end" when it finished)
//   /api/jobs/ID/logs    a rank's log ("log" chunks, "end"), asked of its worker chunk by
//                        chunk as GetLogs does; with follow=1 each ask waits on the worker
//   /api/events          the list pages (jobs, queue, workers): "changed" with a version
//                        whenever a job's state or queue place, the job counts or a worker's
//                        state, slots or drain changed (ClusterFeed, from the once-a-second
//                        export the Prometheus exporter also reads); the page then fetches
//                        its list once
//
// A stream the server ends for a reason (the token revoked, the session ended, an error)
// says why first: "stop" with {"error": "..."}.
//
// Each stream takes one of its token's stream slots (Authorizer::AcquireStream: the same
// --max-streams-per-token bound as watch and logs -f; past it 429), ends within
// Authorizer::kRevocationCheckMs when its token is revoked or expires, and ends at once
// when its session logs out or expires (EndSession). A quiet stream sends a comment every
// 15 s, so that a page that vanished is noticed.
//
// Threading: the entry points run on the HTTP loop thread; updates arrive on the
// Coordinator's commit thread and the ticker; every callback only queues bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/web/http_server.h"
#include "coordinator/web/ui_sessions.h"

namespace convoy {

// Who a request of the UI is from.
struct UiCaller {
  Principal who;
  UiSession session;        // with id and csrf; under --insecure only csrf
  std::string session_key;  // UiSessions::Key of the cookie; empty under --insecure
};

// "event: NAME\ndata: DATA\n\n" (`data` must be one line: JSON without newlines).
std::string SseEvent(const std::string& name, const std::string& data);

// The version of what the list pages show, moved by the coordinator's export snapshots.
class ClusterFeed {
 public:
  // Coordinator's on_export (every export interval, on its ticker thread).
  void Update(const Coordinator::ExportSnapshot& snapshot) EXCLUDES(mu_);
  // `fn(version)` on every move, on the ticker thread; must not block. Returns the id for
  // Unsubscribe (never 0).
  uint64_t Subscribe(std::function<void(uint64_t version)> fn) EXCLUDES(mu_);
  void Unsubscribe(uint64_t id) EXCLUDES(mu_);
  uint64_t version() EXCLUDES(mu_);

 private:
  Mutex mu_;
  uint64_t version_ GUARDED_BY(mu_) = 1;
  size_t signature_ GUARDED_BY(mu_) = 0;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::function<void(uint64_t)>> subscribers_ GUARDED_BY(mu_);
};

class UiStreams {
 public:
  UiStreams(Coordinator& coordinator, Authorizer& auth, ClusterFeed& feed)
      : coordinator_(coordinator), auth_(auth), feed_(feed) {}

  void Cluster(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex);
  void Job(const UiCaller& caller, const std::string& job_id,
           const std::shared_ptr<HttpExchange>& ex);
  // The caller must be the job's owner or an admin (checked by the API). `attempt` < 0:
  // the latest; `tail_bytes` > 0: only the log's last that many bytes.
  void Logs(const UiCaller& caller, const std::string& job_id, int rank, int attempt, bool follow,
            int64_t tail_bytes, const std::shared_ptr<HttpExchange>& ex);

  // Ends every open stream of the session `session_key` (logout, expiry).
  void EndSession(const std::string& session_key) EXCLUDES(mu_);
  // Streams open now.
  size_t open() EXCLUDES(mu_);

 private:
  // Takes a stream slot of the caller's token and starts the event stream; `cleanup` runs
  // once when it is over. False (and the refusal answered) past the token's limit.
  bool Begin(const UiCaller& caller, const std::shared_ptr<HttpExchange>& ex,
             std::function<void()> cleanup) EXCLUDES(mu_);

  Coordinator& coordinator_;
  Authorizer& auth_;
  ClusterFeed& feed_;
  Mutex mu_;
  uint64_t next_stream_ GUARDED_BY(mu_) = 1;
  struct Open {
    std::string session_key;
    std::function<void()> end;
  };
  std::map<uint64_t, Open> streams_ GUARDED_BY(mu_);
};

}  // namespace convoy
