// The worker's supervisor: owns every rank process of every attempt on this machine. It
// launches ranks (with the torchrun-compatible environment of rank_env.h), captures their
// output into per-rank log files (rank_log.h), reaps them, kills attempts on request
// (SIGTERM to each process group, SIGKILL after a grace period), serves each attempt's
// metrics socket (metrics_server.h), answers ReservePort and ReadLogs, stops orphaned ranks
// when the coordinator stays away, and reports all of it through an Outbox.
//
// Threading:
//  - One supervisor thread (Run, started by Start) owns all process state (`attempts_`, the
//    event sequence) without a lock and does every fork, so that PR_SET_PDEATHSIG is tied to
//    a thread that lives as long as the worker. It also does every Outbox::Send. It sleeps in
//    one poll(2) on events (commands through a pipe, the ranks' output, metrics sockets,
//    rank exits through the launcher's descriptors) with the time to the next due timer as
//    its timeout; nothing waits on a fixed tick.
//  - Other threads call only Post, BuildRegister, OnConnected, OnDisconnected and Stop, and
//    never wait for process work: `cmd_mu_` guards the command queue, and `snap_mu_` the
//    snapshot of the attempts that BuildRegister reads. The supervisor thread publishes a new
//    snapshot (built without any lock, swapped in under `snap_mu_`) at the end of each turn
//    in which something changed. Neither lock is held across a fork, a file write or a send.
//    Lock order: none (no lock is taken while another is held).
//
// Size: about 45 methods, over the guide's 25, on purpose. The supervisor is one event loop:
// every private method runs on the supervisor thread and reads or changes `attempts_`, which
// that thread owns without a lock (the threading contract above); split into classes, they
// would share it. What needs no access to it lives in classes of its own: CodeUnpacker (its
// thread), PortReservations, RankLog, MetricsSocket, JobIdentities, Cgroups, rank_env.h.
//
// Reports and reconnection: every rank start, launch failure and exit gets a number from
// one sequence. A Register records the sequence number it reflects; when the coordinator
// acknowledges it (OnConnected), the supervisor thread first sends what happened after that
// number and only then sends new reports directly. Nothing produced while disconnected is
// queued except metric records (bounded, oldest dropped): the next Register carries the
// state instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "common/job_paths.h"
#include "common/mutex.h"
#include "common/status.h"
#include "convoy/v1/worker.pb.h"
#include "worker/exec/cgroups.h"
#include "worker/exec/metrics_server.h"
#include "worker/exec/port_reservations.h"
#include "worker/exec/process_launcher.h"
#include "worker/files/code_unpacker.h"
#include "worker/files/data_cache.h"
#include "worker/files/rank_log.h"
#include "worker/host/attempt_key.h"
#include "worker/host/job_identity.h"
#include "worker/host/nvml.h"
#include "worker/link/link_listener.h"
#include "worker/link/report_queue.h"

namespace convoy {

struct WorkerConfig {
  std::string name;
  std::string address;
  std::string hostname;
  std::string work_dir;  // absolute: the worker's own files (rank logs, metrics sockets)
  // Each job's directory is <job_root>/<job id> (its default working and checkpoint
  // directory); the spec's paths must resolve under it (common/job_paths.h). Canonical;
  // empty: <work_dir>/job-root.
  std::string job_root;
  // Read-only roots a trainer.data_dir may also name (canonical).
  std::vector<std::string> data_paths;
  // Roots a checkpoint_dir or working_dir may also name (--shared-path; canonical).
  std::vector<std::string> shared_paths;
  // The user every rank runs as, owner of its job directory and log files; unset: the
  // worker's own (a worker that is not root cannot switch), unless `identities` is set.
  std::optional<RunAsUser> run_as;
  // Set (a root worker, --run-as pool): each job's ranks run as an identity of their own from
  // this pool (worker/host/job_identity.h), and `run_as` is unused.
  std::shared_ptr<JobIdentities> identities;
  // Set (a root worker, --run-as owner): each job's ranks run as the Unix account named as
  // its owner (Launch.owner; never root), and `run_as` is unused.
  bool run_as_owner = false;
  std::string trainer_path;
  int cores = 1;
  int slots = 1;
  std::vector<int> gpus;
  // What Register carries besides: physical memory (bytes, 0: unknown), the GPUs of `gpus`
  // with what is known of each, the --label pairs.
  int64_t memory_bytes = 0;
  std::vector<GpuDeviceInfo> gpu_devices;
  std::map<std::string, std::string> labels;
  int64_t kill_grace_ms = 5000;
  int64_t orphan_timeout_ms = 60000;
  int64_t log_max_bytes = 64 << 20;
  // Base environment of every rank (normally the worker's own, ProcessEnvironment()).
  std::map<std::string, std::string> env;
  // The worker's data cache (worker/files/data_cache.h), passed to every rank as CONVOY_CACHE_DIR
  // and filled before a trainer job's ranks read it; null: none.
  std::shared_ptr<WorkerDataCache> data_cache;
  // Where each job's snapshot directory is made (worker/files/snapshot_dir.h), passed as
  // CONVOY_SNAPSHOT_DIR; empty: none.
  std::string snapshot_root;
  // Set: each rank runs in a cgroup of its own under the worker's subtree
  // (<job dir name>/attempt-N/rank-R), limited to what its job asked (Launch.resources:
  // memory_per_proc, cpus_per_proc) and to `pids_per_rank`; an OOM kill there is reported
  // as such (ProcessExit.oom_killed). Unset: limits cannot be enforced (`cgroups_missing`
  // says why) and a Launch that asks for them is refused.
  std::shared_ptr<Cgroups> cgroups;
  std::string cgroups_missing;
  int64_t pids_per_rank = 8192;
  // Runs on the unpacking thread before each job's code is unpacked (tests hold it there).
  std::function<void(const std::string& sha256)> before_unpack;
};

class Supervisor : public LinkListener {
 public:
  // Metric records kept while the coordinator is away; older ones are dropped.
  static constexpr size_t kMaxPendingRecords = 10000;
  // Exit records of attempts are kept this long after their last rank ended, unless
  // ForgetAttempt comes first.
  static constexpr int64_t kKeepExitedMs = 3600 * 1000;

  // `clock` drives kill grace, heartbeats, metric batching and the orphan timeout.
  Supervisor(WorkerConfig config, ProcessLauncher& launcher, Outbox& outbox, const Clock& clock);
  // Stops (as Stop) if still running.
  ~Supervisor() override;

  // Starts the supervisor thread. Call once.
  void Start();
  // Kills every rank (SIGTERM, SIGKILL after --kill-grace-ms), waits for them to be reaped
  // and reported (at most the grace plus 5 s), then ends the thread. Any thread but the
  // supervisor's; idempotent.
  void Stop();

  // Queues a coordinator message for the supervisor thread. Any thread; never blocks on
  // process work.
  void Post(const v1::CoordinatorMessage& msg) override;
  // A Register carrying every attempt that still runs or whose exits were not forgotten.
  // Any thread (the connection's, before it sends it).
  v1::Register BuildRegister() override;
  // The coordinator acknowledged the last BuildRegister; heartbeats every
  // `heartbeat_interval_ms`. `stale_snapshot_keys` (RegisterAck's): snapshot directories that
  // belong to no job of the cluster that may still run, removed unless an attempt here still
  // uses one. Any thread.
  void OnConnected(int heartbeat_interval_ms,
                   std::vector<std::string> stale_snapshot_keys = {}) override;
  // The stream broke. Any thread.
  void OnDisconnected() override;

  // ---- For the worker's /metrics (worker_metrics.h).
  // One rank the supervisor knows (running, or exited and not yet forgotten).
  struct RankSample {
    std::string job_id;
    int attempt = 0;
    int rank = 0;
    pid_t pid = 0;  // 0 when it never started
    bool running = false;
  };
  // Every rank's identity and pid from the last published snapshot (attempts that are
  // forgotten and over are left out): O(ranks), no I/O, never waits for the supervisor, so
  // a scrape reads /proc afterwards. Any thread.
  std::vector<RankSample> RankSamples() EXCLUDES(snap_mu_);
  // Monotonic totals since the worker started. Any thread (atomics).
  struct Counters {
    int64_t log_bytes = 0;         // rank output written to the rank logs
    int64_t records_received = 0;  // metric records parsed from the ranks' sockets
    int64_t records_dropped = 0;   // malformed records and records dropped while disconnected
    int64_t restarts_seen = 0;     // Launches of an attempt other than a job's first
  };
  Counters counters() const;

 private:
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
    bool forgotten = false;
    int64_t ended_ms = 0;  // monotonic time the last rank ended, 0 while any runs
    bool AnyRunning() const;
  };
  // Who a metrics-socket peer is: a rank's pid, or a process in a group a rank leads.
  static MetricsSocket::RankOf RankOfPeer(const Attempt& a);
  using Key = AttemptKey;
  struct Command {
    bool resync = false;  // false: `msg` from the coordinator, or `unpacked`
    v1::CoordinatorMessage msg;
    // The code of the launch `key` is unpacked (`unpack` says how it went; `unpacker_`).
    bool unpacked = false;
    Key key;
    Status unpack = Status::Ok();
    int64_t unpacked_files = 0;
    uint64_t link_gen = 0;    // resync: the connection it belongs to
    uint64_t since_seq = 0;   // resync: the Register reflected events up to this
    int heartbeat_ms = 1000;  // resync: from the RegisterAck
    std::vector<std::string> stale_snapshot_keys;  // resync: from the RegisterAck
  };
  struct PendingRecord {
    Key key;
    v1::MetricRecord record;
  };

  // What BuildRegister reports: every attempt still running or not forgotten, as of event
  // number `seq`.
  struct Snapshot {
    uint64_t seq = 0;
    std::vector<v1::AttemptStatus> attempts;
  };

  // Queues `cmd` for the supervisor thread and wakes it. Any thread.
  void Enqueue(Command cmd) EXCLUDES(cmd_mu_);

  // All below run on the supervisor thread.
  void Run();
  // How long the loop may wait for its next event: until the earliest timer is due (a kill
  // grace, a heartbeat, a metric batch, the orphan timeout, a held log read or port, an exit
  // record's expiry, the stop deadline), at most `launcher_period_ms` when the launcher asks
  // to be polled (>= 0); -1: no timer is due at all.
  int PollTimeoutMs(int launcher_period_ms, int64_t stop_deadline) const;
  // Builds and publishes a Snapshot when something changed since the last one.
  void PublishSnapshot();
  void Handle(const Command& cmd);
  void Resync(const Command& cmd);
  // Checks a Launch and prepares its identity and directories; then starts it
  // (StartAttempt), or, when it ships code, leaves it in `unpacking_` while `unpacker_`
  // unpacks the archive off this thread (an archive of up to 100 MiB must not hold up
  // heartbeats, log pumping or kills); CodeUnpacked starts it then.
  void Launch(const v1::Launch& launch);
  // What a Launch still needs once its code is in place.
  struct LaunchPlan {
    v1::Launch launch;
    int first_rank = 0;
    std::vector<std::string> argv;
    JobDirs dirs;
    std::string dir_name;
    std::optional<RunAsUser> user;
    std::string resume_from;
  };
  void StartAttempt(const LaunchPlan& plan);
  void CodeUnpacked(const Command& cmd);
  // Tells the coordinator that `rank` of `launch` cannot start, and why.
  void RefuseLaunch(const v1::Launch& launch, int rank, const std::string& why);
  void KillAttempt(Attempt& a, int64_t grace_ms);
  void KillEverything(const std::string& why);
  void ReservePort(const v1::ReservePort& req);
  // Whether attempt `key` still needs its reserved master port (one whose code is being
  // unpacked does).
  PortReservations::Use PortUse(const Key& key) const;
  // Answers at once, or holds a request with wait_ms that has nothing to say yet.
  void ReadLogs(const v1::ReadLogs& req);
  void AnswerLogs(const v1::ReadLogs& req);
  // Removes a deleted job's files (supervisor_cleanup.cc): its attempt directories and its
  // job directory, keeping those of an attempt that still runs; answers JobFilesDeleted.
  void DeleteJobFiles(const v1::DeleteJobFiles& req);
  // The job finished (supervisor_cleanup.cc): its snapshots go, once no rank of it runs here
  // any more (a rank still stopping may be writing one: it must not find its directory gone).
  void JobFinished(const v1::JobFinished& req);
  // Removes the snapshots of finished jobs whose ranks here have all exited (each turn).
  void RemoveFinishedJobsSnapshots();
  // The snapshot keys of job `id` of uid `uid`: its attempts' here (never another job's of the
  // same id; an empty uid, from an older coordinator, matches the id alone).
  std::set<std::string> SnapshotKeysOf(const std::string& id, const std::string& uid) const;
  // True when attempt `key` is one of job `id` of uid `uid` (an empty uid on either side,
  // from before identities, matches the id alone).
  static bool SameJob(const Key& key, const std::string& id, const std::string& uid) {
    return key.job_id == id && (uid.empty() || key.job_uid.empty() || key.job_uid == uid);
  }
  // Removes the snapshot directories of `keys` that no attempt here uses (RegisterAck).
  void RemoveStaleSnapshots(const std::vector<std::string>& keys);
  // Writes the attempt's CONVOY_PREEMPT_FILE (its ranks are asked to save and stop).
  void WritePreemptFile(const Attempt& a, const std::string& reason);
  // Drops the snapshots of jobs that have not run here for kSnapshotIdleMs (once a minute).
  void ExpireSnapshots(int64_t now_ms);
  // True while the rank runs and its log has no bytes at the request's offset.
  bool LogsWouldWait(const v1::ReadLogs& req) const;
  // Answers held requests whose log grew, whose rank exited, or whose wait is over.
  void RetryHeldLogs();
  void PumpOutput(Rank& r, bool is_stderr);
  void Reap();
  void OnExit(Attempt& a, Rank& r, int wait_status);
  void CloseMetrics(Attempt& a);
  // Kills what is left in the rank's cgroup and removes it (a rank that ended, or that could
  // not start).
  void RemoveCgroup(Rank& r, const std::string& label);
  // With cgroups, makes the rank's group `name` (its job's `resources` and --pids-per-rank)
  // and sets `req`'s join files, given to `user`; the error when it cannot. Nothing without.
  Status PrepareRankCgroup(Rank& r, const std::string& name, const v1::RankResources& resources,
                           const std::optional<RunAsUser>& user, const std::string& label,
                           LaunchRequest* req);
  void AddRecords(const Key& key, std::vector<v1::MetricRecord>* records);
  void FlushMetrics(bool force);
  void Timers();
  void SendStarted(const Attempt& a, const Rank& r);
  void SendExited(const Attempt& a, const Rank& r);
  // Sends when the link is up and resynchronised; false otherwise.
  bool Send(const v1::WorkerMessage& msg);
  bool LinkUp() const { return connected_ && sending_gen_ == link_gen_; }

  const WorkerConfig config_;
  ProcessLauncher& launcher_;
  Outbox& outbox_;
  const Clock& clock_;

  Mutex cmd_mu_;
  std::deque<Command> commands_ GUARDED_BY(cmd_mu_);
  int wake_fd_[2] = {-1, -1};  // a byte in it wakes the supervisor thread

  Mutex snap_mu_;
  std::shared_ptr<const Snapshot> snapshot_ GUARDED_BY(snap_mu_);
  uint64_t register_seq_ GUARDED_BY(snap_mu_) = 0;  // Snapshot::seq of the last BuildRegister

  // Supervisor thread only.
  std::map<Key, Attempt> attempts_;
  uint64_t seq_ = 0;            // the last event number
  bool snapshot_dirty_ = true;  // attempts_ changed since the last PublishSnapshot

  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> link_gen_{0};  // bumped by every connect and disconnect
  std::atomic<int64_t> disconnected_since_ms_{0};
  std::atomic<bool> stopping_{false};

  // Supervisor thread only.
  uint64_t sending_gen_ = ~uint64_t{0};  // link_gen_ whose resync has been sent
  int heartbeat_ms_ = 1000;
  bool orphaned_ = false;
  int64_t next_heartbeat_ms_ = 0;
  int64_t next_flush_ms_ = 0;
  std::deque<PendingRecord> pending_;  // metric records not yet sent, oldest first
  // ReadLogs with wait_ms held until there is something to say (logs -f as a long poll).
  struct HeldLogRead {
    v1::ReadLogs req;
    int64_t deadline_ms = 0;
  };
  std::vector<HeldLogRead> held_logs_;
  // Master ports reserved for attempts (ReservePort), held bound until their ranks end.
  PortReservations ports_;
  // Made (mkdtemp) when a metrics socket path is too long for the work dir; removed at Stop.
  std::string socket_fallback_dir_;
  int64_t dropped_records_ = 0;
  int64_t next_snapshot_expiry_ms_ = 0;
  // Jobs that finished while ranks of theirs were still stopping here: their snapshot
  // directories go when the last of those ranks has exited. Job id -> snapshot keys (the
  // JobFinished message's and its attempts').
  std::map<std::string, std::set<std::string>> finished_jobs_with_snapshots_;
  // Launches whose code `unpacker_` is unpacking (a Kill of one drops it).
  std::map<Key, LaunchPlan> unpacking_;
  std::thread thread_;

  // Unpacks code archives off this thread; each result comes back as a Command.
  CodeUnpacker unpacker_;

  // Totals for counters(): written by the supervisor thread, read by scrapes.
  std::atomic<int64_t> log_bytes_total_{0};
  std::atomic<int64_t> records_received_total_{0};
  std::atomic<int64_t> records_dropped_total_{0};
  std::atomic<int64_t> restarts_seen_total_{0};
};

}  // namespace convoy
