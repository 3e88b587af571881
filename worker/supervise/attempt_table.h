// The attempts this worker runs or remembers, and their ranks: the table the supervisor's loop
// owns (worker/supervise/supervisor.h) and its controllers read and change, each on the loop's
// thread, without a lock. Every rank start, launch failure and exit gets a number from one
// event sequence (Reporter resends what a Register did not carry); what BuildRegister reads
// from other threads is a snapshot the loop publishes (Publish), never the table itself.
//
// Threading: everything on the supervisor thread, except Published (any thread; `mu_`, held
// only to swap or copy the pointer).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "convoy/v1/worker.pb.h"
#include "worker/exec/cgroups.h"
#include "worker/exec/metrics_server.h"
#include "worker/files/rank_log.h"
#include "worker/host/attempt_key.h"
#include "worker/host/users.h"

namespace convoy {

// One rank process of an attempt.
struct Rank {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  int out_fd = -1;
  int err_fd = -1;
  std::unique_ptr<RankLog> log;
  bool running = false;
  bool launch_failed = false;
  std::string launch_error;
  bool signalled = false;  // the worker sent it SIGTERM/SIGKILL
  int64_t kill_at_ms = 0;  // when SIGKILL is due (monotonic), 0: none
  v1::ProcessExit exit;    // set once it is not running
  // Its cgroup (WorkerConfig::cgroups), removed once it ended; null without cgroups.
  std::unique_ptr<Cgroup> cgroup;
  std::string error_file;  // its TORCHELASTIC_ERROR_FILE (in the attempt's dir)
  uint64_t start_seq = 0;  // event numbers of its start (or launch failure) and its exit
  uint64_t exit_seq = 0;
};

struct Attempt {
  std::string job_id;
  // Its job's uid (Launch.job_uid): a Launch of another job with the same id (another
  // cluster's) never lands on this attempt.
  std::string job_uid;
  int attempt = 0;
  // Its job's snapshot directory under the snapshot root (SnapshotKey: by cluster id and
  // job uid, not by the job id, which repeats across clusters).
  std::string snapshot_key;
  std::string dir;
  // The user its ranks run as (the job's identity, or --run-as); unset: the worker's own.
  std::optional<RunAsUser> user;
  std::vector<std::unique_ptr<Rank>> ranks;
  std::unique_ptr<MetricsSocket> metrics;  // null once every rank ended
  // Its job's checkpoint directory (resolved at launch) and `checkpoint:` policy, when it has
  // one (worker/supervise/checkpoint_reports.h).
  std::string checkpoint_dir;
  std::optional<v1::CheckpointPolicy> checkpoint_policy;
  bool forgotten = false;
  int64_t ended_ms = 0;  // monotonic time the last rank ended, 0 while any runs

  AttemptKey key() const { return {job_id, attempt, job_uid}; }
  bool AnyRunning() const;
  // "job J attempt N", for the log.
  std::string label() const;
  // Who a metrics-socket peer is: a rank's pid, or a process in a group a rank leads.
  MetricsSocket::RankOf RankOfPeer() const;
};

// What BuildRegister reports: every attempt still running or not forgotten, as of event number
// `seq`.
struct AttemptSnapshot {
  uint64_t seq = 0;
  std::vector<v1::AttemptStatus> attempts;
};

class AttemptTable {
 public:
  using Key = AttemptKey;
  using Map = std::map<Key, Attempt>;

  AttemptTable();

  // ---- Supervisor thread.
  Map& attempts() { return attempts_; }
  const Map& attempts() const { return attempts_; }
  Attempt* Find(const Key& key);
  const Attempt* Find(const Key& key) const;
  // A new, empty attempt `key` (there must be none).
  Attempt& Add(const Key& key);
  // Forgets the attempt at `it` (its metrics socket closed by the caller first).
  Map::iterator Erase(Map::iterator it);
  // The attempt numbered `attempt` of any job with id `id` (the uid aside): its directory,
  // ports and metrics socket are named by the id and the number. end() when none.
  Map::iterator FindByNumber(const std::string& id, int attempt);
  // Whether any rank of any attempt runs.
  bool AnyRunning() const;

  // The next event number (a rank started, could not start, or ended); the table changed.
  uint64_t NextEvent();
  // Something a Register reports changed (an attempt forgotten, added or dropped).
  void Changed() { dirty_ = true; }
  // Builds and publishes a snapshot when something changed since the last one.
  void Publish() EXCLUDES(mu_);

  // True when attempt `key` is one of job `id` of uid `uid` (an empty uid on either side,
  // from before identities, matches the id alone).
  static bool SameJob(const Key& key, const std::string& id, const std::string& uid) {
    return key.job_id == id && (uid.empty() || key.job_uid.empty() || key.job_uid == uid);
  }
  // The snapshot keys of job `id` of uid `uid`: its attempts' here (never another job's of the
  // same id; an empty uid, from an older coordinator, matches the id alone).
  std::set<std::string> SnapshotKeysOf(const std::string& id, const std::string& uid) const;

  // ---- Any thread.
  // The last snapshot published: O(1), never waits for the loop.
  std::shared_ptr<const AttemptSnapshot> Published() const EXCLUDES(mu_);

 private:
  Map attempts_;
  uint64_t seq_ = 0;   // the last event number
  bool dirty_ = true;  // changed since the last Publish

  mutable Mutex mu_;
  std::shared_ptr<const AttemptSnapshot> published_ GUARDED_BY(mu_);
};

}  // namespace convoy
