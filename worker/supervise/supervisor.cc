// The supervisor thread: its loop, its timers and the dispatch of commands to the
// controllers (supervisor.h).
#include "worker/supervise/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/job_paths.h"
#include "common/unique_fd.h"
#include "worker/files/worker_dirs.h"

namespace convoy {
namespace {

// How long Stop waits beyond the kill grace for ranks that ignore SIGKILL (stuck in the
// kernel); after it the worker exits and PR_SET_PDEATHSIG has the last word.
constexpr int64_t kStopSlackMs = 5000;

WorkerConfig WithDefaults(WorkerConfig c) {
  if (c.job_root.empty()) c.job_root = c.work_dir + "/job-root";
  auto root = PrepareRoot("job root", c.job_root);  // main made --job-root already
  if (root.ok()) c.job_root = *root;
  return c;
}

// Who the ranks are, for the checks at the start: a job identity stands for them all (each
// is only "other" to the worker's directories). Says so in the log.
std::optional<RunAsUser> DescribeRanksUser(const WorkerConfig& config) {
  std::optional<RunAsUser> u = config.run_as;
  if (config.run_as_owner) {
    spdlog::info(
        "ranks run as their job owner's account (--run-as owner): jobs of different owners are "
        "isolated from each other, one owner's jobs are not; job directories under {}",
        config.job_root);
    return OwnerRepresentative();
  }
  if (config.identities != nullptr) {
    const UidRange& pool = config.identities->range();
    spdlog::info(
        "ranks run as an identity of their own per job: a uid and gid from the pool {}-{} ({} "
        "held by jobs here); job directories under {}",
        pool.first, pool.last, config.identities->Jobs().size(), config.job_root);
    return PoolRepresentative(pool);
  }
  if (u) {
    spdlog::info("ranks run as {} (uid {}, gid {}); job directories under {}", u->name, u->uid,
                 u->gid, config.job_root);
    spdlog::warn(
        "every job's ranks run as the one user {}: jobs are not isolated from each other (any "
        "job can read, write and signal another's); --run-as pool gives each job its own",
        u->name);
  } else {
    spdlog::info("ranks run as the worker's own user (uid {}, gid {}){}; job directories under {}",
                 getuid(), getgid(), geteuid() == 0 ? "" : ": only a root worker can switch users",
                 config.job_root);
  }
  return u;
}

}  // namespace

Supervisor::Supervisor(WorkerConfig config, ProcessLauncher& launcher, Outbox& outbox,
                       const Clock& clock)
    : config_(WithDefaults(std::move(config))),
      launcher_(launcher),
      clock_(clock),
      reporter_(table_, outbox, clock, config_.orphan_timeout_ms),
      metrics_(reporter_, clock),
      unpacker_(config_.work_dir, config_.before_unpack),
      runner_(config_, launcher, table_, reporter_, metrics_, cgroups_thread_, clock),
      admission_(
          config_, table_, reporter_, runner_, metrics_, files_thread_, unpacker_,
          [this](std::function<void()> then) { ToLoop(std::move(then)); }, stopping_),
      ports_(config_.address, clock, table_, reporter_,
             [this](const AttemptKey& key) { return admission_.Preparing(key); }),
      logs_(config_, table_, reporter_, clock),
      cleanup_(config_, table_, reporter_, files_thread_,
               [this](std::function<void()> then) { ToLoop(std::move(then)); }),
      checkpoints_(config_, table_, reporter_, files_thread_,
                   [this](std::function<void()> then) { ToLoop(std::move(then)); }) {
  metrics_.Observe([this](const AttemptKey& key, const v1::MetricRecord& rec) {
    checkpoints_.OnRecord(key, rec);
  });
  if (pipe2(wake_fd_, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::critical("pipe: {}", strerror(errno));
    std::abort();
  }
}

Supervisor::~Supervisor() {
  Stop();
  CloseFd(wake_fd_[0]);
  CloseFd(wake_fd_[1]);
}

void Supervisor::Start() {
  const std::optional<RunAsUser> u = DescribeRanksUser(config_);
  // What a rank must reach is searchable by its user, nothing is listable by others.
  const bool other_user = u.has_value() && u->uid != geteuid();
  for (const std::string& d :
       {config_.work_dir, config_.work_dir + "/run", config_.work_dir + "/jobs"}) {
    MakeWorkerDir(d, other_user);
  }
  // No attempt runs yet (ranks die with their worker): every metrics socket there was left
  // by an earlier run of this worker that was killed.
  const std::string run_dir = config_.work_dir + "/run";
  if (const int stale = RemoveStaleSockets(run_dir); stale > 0) {
    spdlog::info("removed {} metrics socket(s) an earlier run of this worker left in {}", stale,
                 run_dir);
  }
  for (const std::string& d : {config_.job_root, run_dir}) {
    const std::string bad = FirstUnsearchableDir(d, u ? u->uid : geteuid(), u ? u->gid : getegid());
    if (!bad.empty()) spdlog::warn("ranks cannot reach {}: {} is not searchable for them", d, bad);
  }
  std::string data;
  for (const std::string& p : config_.data_paths) data += (data.empty() ? "" : ", ") + p;
  spdlog::info("trainer.data_dir may also name: {}", data.empty() ? "nothing else" : data);
  files_thread_.Start();
  // Deletions of checkpoints an earlier run was killed in the middle of are finished first.
  checkpoints_.Start();
  cgroups_thread_.Start();
  thread_ = std::thread([this] { Run(); });
  unpacker_.Start();
}

void Supervisor::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  Wake('s');
  thread_.join();
  unpacker_.Stop();
  // A copy or a removal in hand finishes; what is queued is dropped (the coordinator asks
  // for a deletion again). Every rank's cgroup is gone before the worker's own goes.
  files_thread_.Stop(/*finish_queued=*/false);
  cgroups_thread_.Stop(/*finish_queued=*/true);
}

// ---- Other threads

void Supervisor::Post(const v1::CoordinatorMessage& msg) {
  Command cmd;
  cmd.msg = msg;
  Enqueue(std::move(cmd));
}

void Supervisor::ToLoop(std::function<void()> then) {
  Command cmd;
  cmd.kind = Command::Kind::kThen;
  cmd.then = std::move(then);
  Enqueue(std::move(cmd));
}

void Supervisor::Enqueue(Command cmd) {
  {
    MutexLock lock(cmd_mu_);
    commands_.push_back(std::move(cmd));
  }
  Wake('c');
}

void Supervisor::Wake(char why) {
  ssize_t ignored = write(wake_fd_[1], &why, 1);
  (void)ignored;
}

v1::Register Supervisor::BuildRegister() {
  std::shared_ptr<const AttemptSnapshot> snap = table_.Published();
  reporter_.RegisterBuilt(snap->seq);
  return MakeRegister(config_, *snap, reporter_.health());
}

void Supervisor::HealthChanged() {
  ToLoop([this] {
    if (reporter_.LinkUp())
      reporter_.SendHeartbeat(clock_.NowMonotonicMs(), runner_.StoppedRanks());
  });
}

void Supervisor::OnConnected(int heartbeat_interval_ms,
                             std::vector<std::string> stale_snapshot_keys) {
  Command cmd;
  cmd.kind = Command::Kind::kResync;
  cmd.heartbeat_ms = std::clamp(heartbeat_interval_ms, 50, 60000);
  cmd.stale_snapshot_keys = std::move(stale_snapshot_keys);
  cmd.since_seq = reporter_.register_seq();
  cmd.link_gen = reporter_.Connected();
  Enqueue(std::move(cmd));
}

void Supervisor::OnDisconnected() {
  reporter_.Disconnected();
  // The orphan timeout starts now: the supervisor thread must count it from here.
  Wake('d');
}

std::vector<Supervisor::RankSample> Supervisor::RankSamples() const {
  std::vector<RankSample> out;
  std::shared_ptr<const AttemptSnapshot> snap = table_.Published();
  for (const v1::AttemptStatus& a : snap->attempts) {
    for (const v1::RankStatus& r : a.ranks()) {
      out.push_back({a.job_id(), a.attempt(), r.rank(), r.pid(), r.running()});
    }
  }
  return out;
}

Supervisor::Counters Supervisor::counters() const {
  Counters c;
  c.log_bytes = runner_.log_bytes_total();
  c.records_received = metrics_.received_total();
  c.records_dropped = metrics_.dropped_total();
  c.restarts_seen = admission_.restarts_seen_total();
  return c;
}

// ---- The loop

void Supervisor::Run() {
  int64_t stop_deadline = 0;
  while (Turn(&stop_deadline)) {
  }
  metrics_.Flush(true);
  for (auto& [key, a] : table_.attempts()) metrics_.Close(a);
  ports_.ReleaseAll();
}

bool Supervisor::Turn(int64_t* stop_deadline) {
  if (stopping_) {
    const int64_t now = clock_.NowMonotonicMs();
    if (*stop_deadline == 0) {
      *stop_deadline = now + config_.kill_grace_ms + kStopSlackMs;
      runner_.KillEverything("the worker is shutting down");
    }
    if (!table_.AnyRunning()) return false;
    if (now >= *stop_deadline) {
      spdlog::error("some ranks outlived SIGKILL by {} ms; exiting without them", kStopSlackMs);
      return false;
    }
  }
  // What each pollfd is for; rebuilt every turn (attempts and descriptors come and go).
  struct Target {
    Attempt* attempt = nullptr;  // metrics socket descriptor when rank is null
    Rank* rank = nullptr;        // a rank's output pipe
    bool is_stderr = false;
  };
  std::vector<pollfd> fds{{wake_fd_[0], POLLIN, 0}};
  std::vector<Target> targets{{}};
  for (auto& [key, a] : table_.attempts()) {
    if (a.metrics != nullptr) {
      for (int fd : a.metrics->PollFds()) {
        fds.push_back({fd, POLLIN, 0});
        targets.push_back({&a, nullptr, false});
      }
    }
    for (auto& r : a.ranks) {
      if (r->out_fd >= 0) {
        fds.push_back({r->out_fd, POLLIN, 0});
        targets.push_back({&a, r.get(), false});
      }
      if (r->err_fd >= 0) {
        fds.push_back({r->err_fd, POLLIN, 0});
        targets.push_back({&a, r.get(), true});
      }
    }
  }
  // Rank exits wake the loop too (pidfds, the warm trainer's socket): Reap below.
  const size_t first_exit_fd = fds.size();
  std::vector<int> exit_fds;
  const int launcher_period_ms = launcher_.ExitWakeFds(&exit_fds);
  for (int fd : exit_fds) fds.push_back({fd, POLLIN, 0});
  // No tick: the wait ends at an event or when the next timer is due.
  const int n = poll(fds.data(), fds.size(), PollTimeoutMs(launcher_period_ms, *stop_deadline));
  if (n < 0 && errno != EINTR) spdlog::error("poll: {}", strerror(errno));
  if (n > 0) {
    // Attempts are erased only in Timers and ranks never, so the pointers in `targets` are
    // valid here; commands run last because a Launch adds attempts.
    for (size_t i = 1; i < first_exit_fd; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const Target& t = targets[i];
      if (t.rank != nullptr) {
        runner_.Pump(*t.rank, t.is_stderr);
      } else {
        metrics_.OnReadable(*t.attempt, fds[i].fd);
      }
    }
    if (fds[0].revents & POLLIN) {
      char buf[256];
      while (read(wake_fd_[0], buf, sizeof(buf)) > 0) {
      }
      std::deque<Command> cmds;
      {
        MutexLock cmd_lock(cmd_mu_);
        cmds.swap(commands_);
      }
      for (const Command& c : cmds) Handle(c);
    }
  }
  runner_.Reap();
  Timers();
  ports_.ReleaseUnused();
  logs_.RetryHeld();  // bytes just written, a rank that exited, a wait that is over
  table_.Publish();
  return true;
}

int Supervisor::PollTimeoutMs(int launcher_period_ms, int64_t stop_deadline) const {
  const int64_t now = clock_.NowMonotonicMs();
  int64_t due = Reporter::kNever;
  auto at = [&due](int64_t t) { due = std::min(due, t); };
  if (stop_deadline != 0) at(stop_deadline);
  at(runner_.NextKillMs());
  for (const auto& [key, a] : table_.attempts()) {
    // Exit records go when forgotten, or kKeepExitedMs after the attempt ended (Timers).
    if (!a.AnyRunning() && (a.forgotten || a.ended_ms != 0)) {
      at(a.forgotten ? now : a.ended_ms + kKeepExitedMs + 1);
    }
  }
  at(reporter_.NextHeartbeatMs());
  at(metrics_.NextDueMs());
  at(reporter_.OrphanDueMs());
  at(ports_.NextExpiryMs());
  at(logs_.NextDeadlineMs());
  int64_t wait = due == Reporter::kNever ? -1 : std::max<int64_t>(0, due - now);
  if (launcher_period_ms >= 0 && (wait < 0 || wait > launcher_period_ms)) {
    wait = launcher_period_ms;
  }
  return static_cast<int>(std::min<int64_t>(wait, std::numeric_limits<int>::max()));
}

void Supervisor::Handle(const Command& cmd) {
  switch (cmd.kind) {
    case Command::Kind::kResync:
      if (reporter_.Resync(cmd.link_gen, cmd.since_seq, cmd.heartbeat_ms)) {
        cleanup_.RemoveStaleSnapshots(cmd.stale_snapshot_keys);
        metrics_.Flush(true);
        checkpoints_.Resync();
      }
      return;
    case Command::Kind::kThen:
      cmd.then();
      return;
    case Command::Kind::kMessage:
      HandleMessage(cmd.msg);
      return;
  }
}

void Supervisor::HandleMessage(const v1::CoordinatorMessage& msg) {
  switch (msg.msg_case()) {
    case v1::CoordinatorMessage::kLaunch:
      admission_.Admit(msg.launch());
      break;
    case v1::CoordinatorMessage::kKill:
      Kill(msg.kill());
      break;
    case v1::CoordinatorMessage::kReservePort:
      ports_.Reserve(msg.reserve_port());
      break;
    case v1::CoordinatorMessage::kReadLogs:
      logs_.Read(msg.read_logs());
      break;
    case v1::CoordinatorMessage::kForgetAttempt: {
      const v1::ForgetAttempt& forget = msg.forget_attempt();
      Attempt* a = table_.Find({forget.job_id(), forget.attempt(), forget.job_uid()});
      if (a != nullptr) a->forgotten = true;
      table_.Changed();
      break;
    }
    case v1::CoordinatorMessage::kJobFinished:
      cleanup_.JobFinished(msg.job_finished());
      break;
    case v1::CoordinatorMessage::kDeleteJobFiles:
      cleanup_.DeleteJobFiles(msg.delete_job_files());
      break;
    case v1::CoordinatorMessage::kRegisterAck:
      break;  // a repeated ack changes nothing
    default:
      spdlog::warn("unknown message from the coordinator (case {}); ignored",
                   static_cast<int>(msg.msg_case()));
  }
}

void Supervisor::Kill(const v1::Kill& kill) {
  const AttemptKey key{kill.job_id(), kill.attempt(), kill.job_uid()};
  if (admission_.Drop(key)) {  // nothing started yet: it never will
    spdlog::info("job {} attempt {}: killed while it was being prepared; not started",
                 kill.job_id(), kill.attempt());
  }
  Attempt* a = table_.Find(key);
  if (a == nullptr) {  // never launched here: nothing runs, its port goes
    ports_.Release(key);
    return;
  }
  if (!a->AnyRunning()) return;  // idempotent
  spdlog::info("job {} attempt {}: {} its ranks: {}", kill.job_id(), kill.attempt(),
               kill.preempt() ? "asking to checkpoint and stop" : "killing",
               kill.reason().empty() ? "asked by the coordinator" : kill.reason());
  if (kill.preempt()) runner_.WritePreemptFile(*a, kill.reason());
  runner_.Kill(*a, kill.grace_ms() > 0 ? kill.grace_ms() : config_.kill_grace_ms);
}

void Supervisor::Timers() {
  const int64_t now = clock_.NowMonotonicMs();
  runner_.KillOverdue(now);
  if (now >= reporter_.NextHeartbeatMs()) reporter_.SendHeartbeat(now, runner_.StoppedRanks());
  metrics_.Flush(false);
  cleanup_.Tick(now);
  if (reporter_.TakeOrphaned(now)) {
    runner_.KillEverything("no coordinator for " +
                           std::to_string(config_.orphan_timeout_ms / 1000) +
                           " s (--orphan-timeout)");
  }
  for (auto it = table_.attempts().begin(); it != table_.attempts().end();) {
    Attempt& a = it->second;
    const bool old = a.ended_ms != 0 && now - a.ended_ms > kKeepExitedMs;
    if (!a.AnyRunning() && (a.forgotten || old)) {
      metrics_.Close(a);
      it = table_.Erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace convoy
