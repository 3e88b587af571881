// The worker's supervisor: owns every rank process of every attempt on this machine, in an
// attempt table (attempt_table.h) that one loop owns, and dispatches what happens to small
// controllers that share it on the loop's thread:
//  - LaunchAdmission (launch_admission.h): checks a Launch, resolves its user and
//    directories, prepares what takes time (a checkpoint copy, the code) off the loop;
//  - RankRunner (rank_runner.h): starts the ranks, pumps their output into their logs
//    (rank_log.h), reaps them, kills attempts (SIGTERM, SIGKILL after a grace);
//  - MetricsRelay (metrics_relay.h): the attempts' metrics sockets to the coordinator;
//  - LogReads (log_reads.h): ReadLogs, long polls included;
//  - AttemptPorts (attempt_ports.h): ReservePort, held until the ranks end;
//  - FileCleanup (file_cleanup.h): a deleted job's files, finished jobs' snapshots;
//  - CheckpointReports (checkpoint_reports.h): the jobs' checkpoint policies, applied on the
//    files thread, and CheckpointsKept;
//  - Reporter (reporter.h): every report, the resynchronisation after a reconnect,
//    heartbeats and the orphan timeout (ranks are stopped when the coordinator stays away).
//
// Threading:
//  - One supervisor thread (Run, started by Start) owns the table and the controllers
//    without a lock and does every fork, so that PR_SET_PDEATHSIG is tied to a thread that
//    lives as long as the worker. It also does every Outbox::Send. It sleeps in one poll(2)
//    on events (commands through a pipe, the ranks' output, metrics sockets, rank exits
//    through the launcher's descriptors) with the time to the next due timer as its timeout;
//    nothing waits on a fixed tick.
//  - Nothing slow runs on it (issue 44): checkpoint copies and tree removals run on the files
//    thread, cgroup kills on the cgroups thread (off_loop.h), code on the unpacker's; each
//    reports back as a command (ToLoop).
//  - Other threads call only Post, BuildRegister, OnConnected, OnDisconnected, RankSamples,
//    counters and Stop, and never wait for process work: `cmd_mu_` guards the command queue;
//    BuildRegister reads the snapshot the loop publishes at the end of each turn in which
//    something changed (AttemptTable::Published). Neither lock is held across a fork, a file
//    write or a send. Lock order: none (no lock is taken while another is held).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "convoy/v1/worker.pb.h"
#include "worker/exec/process_launcher.h"
#include "worker/files/code_unpacker.h"
#include "worker/link/link_listener.h"
#include "worker/link/report_queue.h"
#include "worker/supervise/attempt_ports.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/checkpoint_reports.h"
#include "worker/supervise/file_cleanup.h"
#include "worker/supervise/launch_admission.h"
#include "worker/supervise/log_reads.h"
#include "worker/supervise/metrics_relay.h"
#include "worker/supervise/off_loop.h"
#include "worker/supervise/rank_runner.h"
#include "worker/supervise/reporter.h"
#include "worker/supervise/worker_config.h"

namespace convoy {

class Supervisor : public LinkListener {
 public:
  // Metric records kept while the coordinator is away; older ones are dropped.
  static constexpr size_t kMaxPendingRecords = MetricsRelay::kMaxPending;
  // Exit records of attempts are kept this long after their last rank ended, unless
  // ForgetAttempt comes first.
  static constexpr int64_t kKeepExitedMs = 3600 * 1000;

  // `clock` drives kill grace, heartbeats, metric batching and the orphan timeout.
  Supervisor(WorkerConfig config, ProcessLauncher& launcher, Outbox& outbox, const Clock& clock);
  // Stops (as Stop) if still running.
  ~Supervisor() override;

  // Starts the supervisor thread and its helpers. Call once.
  void Start();
  // Kills every rank (SIGTERM, SIGKILL after --kill-grace-ms), waits for them to be reaped
  // and reported (at most the grace plus 5 s), then ends the thread; the cgroups of the
  // ranks are gone when it returns. Any thread but the supervisor's; idempotent.
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
  // Register and every heartbeat carry `health`'s newest report (README "When nodes are
  // sick"). Before Start; not owned, outlives the supervisor's thread.
  void UseHealth(const HealthMonitor* health) { reporter_.UseHealth(health); }
  // The health verdict changed: a heartbeat tells the coordinator now, not at the next
  // interval. Any thread.
  void HealthChanged();

  // ---- For the worker's /metrics (worker/daemon/worker_metrics.h).
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
  std::vector<RankSample> RankSamples() const;
  // Monotonic totals since the worker started. Any thread (atomics).
  struct Counters {
    int64_t log_bytes = 0;         // rank output written to the rank logs
    int64_t records_received = 0;  // metric records parsed from the ranks' sockets
    int64_t records_dropped = 0;   // malformed records and records dropped while disconnected
    int64_t restarts_seen = 0;     // Launches of an attempt other than a job's first
  };
  Counters counters() const;

 private:
  struct Command {
    enum class Kind { kMessage, kResync, kThen } kind = Kind::kMessage;
    v1::CoordinatorMessage msg;  // kMessage
    std::function<void()> then;  // kThen: work done off the loop reporting back
    uint64_t link_gen = 0;       // kResync: the connection it belongs to
    uint64_t since_seq = 0;      // kResync: the Register reflected events up to this
    int heartbeat_ms = 1000;     // kResync: from the RegisterAck
    std::vector<std::string> stale_snapshot_keys;  // kResync: from the RegisterAck
  };

  // Queues `cmd` for the supervisor thread and wakes it. Any thread.
  void Enqueue(Command cmd) EXCLUDES(cmd_mu_);
  // Runs `then` on the supervisor thread (what the controllers' off-loop work reports back
  // with). Any thread.
  void ToLoop(std::function<void()> then);
  void Wake(char why);

  // All below run on the supervisor thread.
  void Run();
  // One poll(2) for events, then what they ask for; false once the loop should end.
  bool Turn(int64_t* stop_deadline);
  // How long the loop may wait for its next event: until the earliest timer is due (a kill
  // grace, a heartbeat, a metric batch, the orphan timeout, a held log read or port, an exit
  // record's expiry, the stop deadline), at most `launcher_period_ms` when the launcher asks
  // to be polled (>= 0); -1: no timer is due at all.
  int PollTimeoutMs(int launcher_period_ms, int64_t stop_deadline) const;
  void Handle(const Command& cmd);
  void HandleMessage(const v1::CoordinatorMessage& msg);
  void Kill(const v1::Kill& kill);
  void Timers();

  const WorkerConfig config_;
  ProcessLauncher& launcher_;
  const Clock& clock_;

  Mutex cmd_mu_;
  std::deque<Command> commands_ GUARDED_BY(cmd_mu_);
  int wake_fd_[2] = {-1, -1};  // a byte in it wakes the supervisor thread
  std::atomic<bool> stopping_{false};

  // The table and its controllers: supervisor thread only (but what their headers say).
  AttemptTable table_;
  Reporter reporter_;
  MetricsRelay metrics_;
  OffLoop files_thread_{"files"};
  OffLoop cgroups_thread_{"cgroups"};
  CodeUnpacker unpacker_;
  RankRunner runner_;
  LaunchAdmission admission_;
  AttemptPorts ports_;
  LogReads logs_;
  FileCleanup cleanup_;
  CheckpointReports checkpoints_;
  std::thread thread_;
};

}  // namespace convoy
