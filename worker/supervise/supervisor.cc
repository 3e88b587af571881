// The supervisor thread: its loop, launching, killing, reaping and timers. Requests that
// only read state (ReservePort, ReadLogs, Register) and metric batching live in
// supervisor_requests.cc.
#include "worker/supervise/supervisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/code_archive.h"
#include "common/job_paths.h"
#include "common/process_exit.h"
#include "common/rank_contract.h"
#include "common/strings.h"
#include "common/util.h"
#include "spec/trainer_argv.h"
#include "worker/exec/posix_process_launcher.h"
#include "worker/exec/rank_env.h"
#include "worker/files/file_removal.h"
#include "worker/files/snapshot_dir.h"

namespace convoy {
namespace {

// How long Stop waits beyond the kill grace for ranks that ignore SIGKILL (stuck in the
// kernel); after it the worker exits and PR_SET_PDEATHSIG has the last word.
constexpr int64_t kStopSlackMs = 5000;
constexpr size_t kMaxLocalWorldSize = 1024;

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

WorkerConfig WithDefaults(WorkerConfig c) {
  if (c.job_root.empty()) c.job_root = c.work_dir + "/job-root";
  auto root = PrepareRoot("job root", c.job_root);  // main made --job-root already
  if (root.ok()) c.job_root = *root;
  return c;
}

// The worker's own directories: 0700, or 0711 when ranks run as another user and must reach
// a file inside (their metrics socket, their error file): search, never listing.
void MakeWorkerDir(const std::string& dir, bool searchable) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    spdlog::warn("cannot create {}: {}", dir, ec.message());
    return;
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return;
  const mode_t want = searchable ? 0711 : 0700;
  if ((st.st_mode & 07777) != want) chmod(dir.c_str(), want);
}

// Copies the checkpoint files (ckpt-*.pt, regular files, links not followed) of `from` into
// `to` (made 0700, owner uid:gid, as are the copies) and returns `to`. An existing `to` (an
// earlier attempt's copy) is used as it is.
StatusOr<std::string> CopyCheckpoints(const std::string& from, const std::string& to, int64_t uid,
                                      int64_t gid) {
  struct stat st {};
  if (lstat(to.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return Status::Internal(to + ": not a directory");
    return to;
  }
  // None here (it ran on another worker, without a shared job root): an empty copy, and the
  // trainer says it found no checkpoint there, as it would in `from`.
  DIR* d = opendir(from.c_str());
  if (d == nullptr && errno != ENOENT) {
    return Status::NotFound("cannot read its checkpoints in " + from + ": " + strerror(errno));
  }
  const std::string tmp = to + ".tmp";
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  if (mkdir(tmp.c_str(), 0700) != 0) {
    if (d != nullptr) closedir(d);
    return Status::Internal("cannot create " + tmp + ": " + strerror(errno));
  }
  Status result = Status::Ok();
  int copied = 0;
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    const std::string name = e->d_name;
    if (!rank_contract::IsCheckpointName(name)) continue;
    const int in = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat fst {};
    if (in < 0 || fstat(in, &fst) != 0 || !S_ISREG(fst.st_mode)) {
      if (in >= 0) close(in);
      continue;
    }
    const std::string dst = tmp + "/" + name;
    const int out = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = out >= 0;
    char buf[1 << 16];
    ssize_t n = 0;
    while (ok && (n = read(in, buf, sizeof(buf))) > 0) {
      ok = write(out, buf, static_cast<size_t>(n)) == n;
    }
    ok = ok && n == 0 &&
         (uid < 0 || fchown(out, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) == 0);
    close(in);
    if (out >= 0) close(out);
    if (!ok) {
      result = Status::Internal("cannot copy " + from + "/" + name + " to " + dst);
      break;
    }
    ++copied;
  }
  if (d != nullptr) closedir(d);
  if (result.ok() && uid >= 0 &&
      chown(tmp.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0) {
    result = Status::Internal("cannot give " + tmp + " to uid " + std::to_string(uid));
  }
  if (result.ok() && rename(tmp.c_str(), to.c_str()) != 0) {
    result = Status::Internal("cannot rename " + tmp + ": " + strerror(errno));
  }
  if (!result.ok()) {
    std::filesystem::remove_all(tmp, ec);
    return result;
  }
  spdlog::info("copied {} checkpoint(s) of {} into {}", copied, from, to);
  return to;
}

}  // namespace

bool Supervisor::Attempt::AnyRunning() const {
  for (const auto& r : ranks) {
    if (r->running) return true;
  }
  return false;
}

MetricsSocket::RankOf Supervisor::RankOfPeer(const Attempt& a) {
  return [&a](pid_t pid, pid_t pgid) {
    for (const auto& r : a.ranks) {
      if (r->pid > 0 && (r->pid == pid || r->pid == pgid)) return r->rank;
    }
    return -1;
  };
}

Supervisor::Supervisor(WorkerConfig config, ProcessLauncher& launcher, Outbox& outbox,
                       const Clock& clock)
    : config_(WithDefaults(std::move(config))),
      launcher_(launcher),
      outbox_(outbox),
      clock_(clock),
      ports_(config_.address, clock),
      unpacker_(config_.work_dir, config_.before_unpack) {
  disconnected_since_ms_ = clock_.NowMonotonicMs();
  {
    MutexLock lock(snap_mu_);
    snapshot_ = std::make_shared<const Snapshot>();
  }
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
  // Who the ranks are, for the checks below: a job identity stands for them all (each is
  // only "other" to the worker's directories).
  std::optional<RunAsUser> u = config_.run_as;
  if (config_.run_as_owner) {
    spdlog::info(
        "ranks run as their job owner's account (--run-as owner): jobs of different owners are "
        "isolated from each other, one owner's jobs are not; job directories under {}",
        config_.job_root);
    u = OwnerRepresentative();
  } else if (config_.identities != nullptr) {
    const UidRange& pool = config_.identities->range();
    u = PoolRepresentative(pool);
    spdlog::info(
        "ranks run as an identity of their own per job: a uid and gid from the pool {}-{} ({} "
        "held by jobs here); job directories under {}",
        pool.first, pool.last, config_.identities->Jobs().size(), config_.job_root);
  } else if (u) {
    spdlog::info("ranks run as {} (uid {}, gid {}); job directories under {}", u->name, u->uid,
                 u->gid, config_.job_root);
    spdlog::warn(
        "every job's ranks run as the one user {}: jobs are not isolated from each other (any "
        "job can read, write and signal another's); --run-as pool gives each job its own",
        u->name);
  } else {
    spdlog::info("ranks run as the worker's own user (uid {}, gid {}){}; job directories under {}",
                 getuid(), getgid(), geteuid() == 0 ? "" : ": only a root worker can switch users",
                 config_.job_root);
  }
  // What a rank must reach is searchable by its user, nothing is listable by others.
  const bool other_user = u.has_value() && u->uid != geteuid();
  for (const std::string& d :
       {config_.work_dir, config_.work_dir + "/run", config_.work_dir + "/jobs"}) {
    MakeWorkerDir(d, other_user);
  }
  // No attempt runs yet (ranks die with their worker): every metrics socket there was left
  // by an earlier run of this worker that was killed.
  int stale_sockets = 0;
  const std::string run_dir = config_.work_dir + "/run";
  if (DIR* d = opendir(run_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (HasSuffix(name, ".sock") && unlinkat(dirfd(d), e->d_name, 0) == 0) {
        ++stale_sockets;
      }
    }
    closedir(d);
  }
  if (stale_sockets > 0) {
    spdlog::info("removed {} metrics socket(s) an earlier run of this worker left in {}",
                 stale_sockets, run_dir);
  }
  for (const std::string& d : {config_.job_root, config_.work_dir + "/run"}) {
    const std::string bad = FirstUnsearchableDir(d, u ? u->uid : geteuid(), u ? u->gid : getegid());
    if (!bad.empty()) spdlog::warn("ranks cannot reach {}: {} is not searchable for them", d, bad);
  }
  std::string data;
  for (const std::string& p : config_.data_paths) data += (data.empty() ? "" : ", ") + p;
  spdlog::info("trainer.data_dir may also name: {}", data.empty() ? "nothing else" : data);
  thread_ = std::thread([this] { Run(); });
  unpacker_.Start();
}

void Supervisor::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  char c = 's';
  ssize_t ignored = write(wake_fd_[1], &c, 1);
  (void)ignored;
  thread_.join();
  unpacker_.Stop();
  if (!socket_fallback_dir_.empty()) rmdir(socket_fallback_dir_.c_str());
}

void Supervisor::Post(const v1::CoordinatorMessage& msg) {
  Command cmd;
  cmd.msg = msg;
  Enqueue(std::move(cmd));
}

void Supervisor::Enqueue(Command cmd) {
  {
    MutexLock lock(cmd_mu_);
    commands_.push_back(std::move(cmd));
  }
  char c = 'c';
  ssize_t ignored = write(wake_fd_[1], &c, 1);
  (void)ignored;
}

void Supervisor::OnConnected(int heartbeat_interval_ms,
                             std::vector<std::string> stale_snapshot_keys) {
  Command cmd;
  cmd.resync = true;
  cmd.heartbeat_ms = std::clamp(heartbeat_interval_ms, 50, 60000);
  cmd.stale_snapshot_keys = std::move(stale_snapshot_keys);
  {
    MutexLock lock(snap_mu_);
    cmd.since_seq = register_seq_;
  }
  cmd.link_gen = ++link_gen_;
  connected_ = true;
  Enqueue(std::move(cmd));
}

void Supervisor::OnDisconnected() {
  if (connected_.exchange(false)) disconnected_since_ms_ = clock_.NowMonotonicMs();
  ++link_gen_;
  // The orphan timeout starts now: the supervisor thread must count it from here.
  char c = 'd';
  ssize_t ignored = write(wake_fd_[1], &c, 1);
  (void)ignored;
}

bool Supervisor::Send(const v1::WorkerMessage& msg) {
  // A report never leaves before the snapshot that BuildRegister reads reflects it.
  PublishSnapshot();
  if (!LinkUp()) return false;
  return outbox_.Send(msg);
}

// ---- The loop

void Supervisor::Run() {
  // What each pollfd is for; rebuilt every turn (attempts and descriptors come and go).
  struct Target {
    Attempt* attempt = nullptr;  // metrics socket descriptor when rank is null
    Rank* rank = nullptr;        // a rank's output pipe
    bool is_stderr = false;
  };
  std::vector<pollfd> fds;
  std::vector<Target> targets;
  std::vector<int> exit_fds;
  int64_t stop_deadline = 0;
  while (true) {
    {
      if (stopping_) {
        const int64_t now = clock_.NowMonotonicMs();
        if (stop_deadline == 0) {
          stop_deadline = now + config_.kill_grace_ms + kStopSlackMs;
          KillEverything("the worker is shutting down");
        }
        bool any = false;
        for (const auto& [key, a] : attempts_) any = any || a.AnyRunning();
        if (!any) break;
        if (now >= stop_deadline) {
          spdlog::error("some ranks outlived SIGKILL by {} ms; exiting without them", kStopSlackMs);
          break;
        }
      }
      fds.clear();
      targets.clear();
      fds.push_back({wake_fd_[0], POLLIN, 0});
      targets.push_back({});
      for (auto& [key, a] : attempts_) {
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
    }
    // Rank exits wake the loop too (pidfds, the warm trainer's socket): Reap below.
    const size_t first_exit_fd = fds.size();
    exit_fds.clear();
    const int launcher_period_ms = launcher_.ExitWakeFds(&exit_fds);
    for (int fd : exit_fds) fds.push_back({fd, POLLIN, 0});
    // No tick: the wait ends at an event or when the next timer is due.
    const int n = poll(fds.data(), fds.size(), PollTimeoutMs(launcher_period_ms, stop_deadline));
    if (n < 0 && errno != EINTR) spdlog::error("poll: {}", strerror(errno));
    if (n > 0) {
      // Attempts are erased only in Timers and ranks never, so the pointers in `targets` are
      // valid here; commands run last because a Launch adds attempts.
      for (size_t i = 1; i < first_exit_fd; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const Target& t = targets[i];
        if (t.rank != nullptr) {
          PumpOutput(*t.rank, t.is_stderr);
        } else if (t.attempt->metrics != nullptr) {
          std::vector<v1::MetricRecord> records;
          const int64_t dropped_before = t.attempt->metrics->dropped();
          t.attempt->metrics->OnReadable(fds[i].fd, RankOfPeer(*t.attempt), clock_.NowUnixMs(),
                                         &records);
          records_dropped_total_.fetch_add(t.attempt->metrics->dropped() - dropped_before,
                                           std::memory_order_relaxed);
          AddRecords({t.attempt->job_id, t.attempt->attempt, t.attempt->job_uid}, &records);
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
    Reap();
    Timers();
    ports_.ReleaseUnused([this](const Key& key) { return PortUse(key); });
    RetryHeldLogs();  // bytes just written, a rank that exited, a wait that is over
    PublishSnapshot();
  }
  FlushMetrics(true);
  for (auto& [key, a] : attempts_) CloseMetrics(a);
  ports_.ReleaseAll();
}

int Supervisor::PollTimeoutMs(int launcher_period_ms, int64_t stop_deadline) const {
  const int64_t now = clock_.NowMonotonicMs();
  int64_t due = std::numeric_limits<int64_t>::max();
  auto at = [&due](int64_t t) { due = std::min(due, t); };
  if (stop_deadline != 0) at(stop_deadline);
  for (const auto& [key, a] : attempts_) {
    for (const auto& r : a.ranks) {
      if (r->running && r->kill_at_ms != 0) at(r->kill_at_ms);
    }
    // Exit records go when forgotten, or kKeepExitedMs after the attempt ended (Timers).
    if (!a.AnyRunning() && (a.forgotten || a.ended_ms != 0)) {
      at(a.forgotten ? now : a.ended_ms + kKeepExitedMs + 1);
    }
  }
  if (LinkUp()) {
    at(next_heartbeat_ms_);
    if (!pending_.empty()) at(next_flush_ms_);
  }
  if (!connected_ && !orphaned_) at(disconnected_since_ms_ + config_.orphan_timeout_ms + 1);
  at(ports_.NextExpiryMs([this](const Key& key) { return PortUse(key); }));
  for (const HeldLogRead& h : held_logs_) at(h.deadline_ms);
  int64_t wait = due == std::numeric_limits<int64_t>::max() ? -1 : std::max<int64_t>(0, due - now);
  if (launcher_period_ms >= 0 && (wait < 0 || wait > launcher_period_ms)) {
    wait = launcher_period_ms;
  }
  return static_cast<int>(std::min<int64_t>(wait, std::numeric_limits<int>::max()));
}

void Supervisor::Handle(const Command& cmd) {
  if (cmd.resync) {
    Resync(cmd);
    return;
  }
  if (cmd.unpacked) {
    CodeUnpacked(cmd);
    return;
  }
  const v1::CoordinatorMessage& msg = cmd.msg;
  switch (msg.msg_case()) {
    case v1::CoordinatorMessage::kLaunch:
      Launch(msg.launch());
      break;
    case v1::CoordinatorMessage::kKill: {
      const v1::Kill& kill = msg.kill();
      const Key key{kill.job_id(), kill.attempt(), kill.job_uid()};
      if (unpacking_.erase(key) > 0) {  // nothing started yet: it never will
        spdlog::info("job {} attempt {}: killed while its code was being unpacked; not started",
                     kill.job_id(), kill.attempt());
      }
      auto it = attempts_.find(key);
      if (it == attempts_.end()) {  // never launched here: nothing runs, its port goes
        ports_.Release(key);
        return;
      }
      if (!it->second.AnyRunning()) return;  // idempotent
      spdlog::info("job {} attempt {}: {} its ranks: {}", kill.job_id(), kill.attempt(),
                   kill.preempt() ? "asking to checkpoint and stop" : "killing",
                   kill.reason().empty() ? "asked by the coordinator" : kill.reason());
      if (kill.preempt()) WritePreemptFile(it->second, kill.reason());
      KillAttempt(it->second, kill.grace_ms() > 0 ? kill.grace_ms() : config_.kill_grace_ms);
      break;
    }
    case v1::CoordinatorMessage::kReservePort:
      ReservePort(msg.reserve_port());
      break;
    case v1::CoordinatorMessage::kReadLogs:
      ReadLogs(msg.read_logs());
      break;
    case v1::CoordinatorMessage::kForgetAttempt: {
      const v1::ForgetAttempt& forget = msg.forget_attempt();
      auto it = attempts_.find({forget.job_id(), forget.attempt(), forget.job_uid()});
      if (it != attempts_.end()) it->second.forgotten = true;
      snapshot_dirty_ = true;
      break;
    }
    case v1::CoordinatorMessage::kJobFinished:
      JobFinished(msg.job_finished());
      break;
    case v1::CoordinatorMessage::kDeleteJobFiles:
      DeleteJobFiles(msg.delete_job_files());
      break;
    case v1::CoordinatorMessage::kRegisterAck:
      break;  // a repeated ack changes nothing
    default:
      spdlog::warn("unknown message from the coordinator (case {}); ignored",
                   static_cast<int>(msg.msg_case()));
  }
}

void Supervisor::Resync(const Command& cmd) {
  if (cmd.link_gen != link_gen_) return;  // that connection is gone already
  RemoveStaleSnapshots(cmd.stale_snapshot_keys);
  sending_gen_ = cmd.link_gen;
  // What happened after the Register's snapshot, which therefore it did not carry.
  for (const auto& [key, a] : attempts_) {
    for (const auto& r : a.ranks) {
      if (r->start_seq > cmd.since_seq) {
        if (r->launch_failed) {
          v1::WorkerMessage out;
          v1::LaunchFailed* f = out.mutable_launch_failed();
          f->set_job_id(a.job_id);
          f->set_job_uid(a.job_uid);
          f->set_attempt(a.attempt);
          f->set_rank(r->rank);
          f->set_error(r->launch_error);
          Send(out);
        } else {
          SendStarted(a, *r);
        }
      }
      if (r->exit_seq > cmd.since_seq) SendExited(a, *r);
    }
  }
  heartbeat_ms_ = cmd.heartbeat_ms;
  next_heartbeat_ms_ = clock_.NowMonotonicMs() + heartbeat_ms_;
  if (orphaned_) spdlog::info("the coordinator is reachable again");
  orphaned_ = false;
  FlushMetrics(true);
}

// ---- Launch

void Supervisor::Launch(const v1::Launch& launch) {
  const int64_t lws = launch.local_world_size();
  const int64_t first_rank_wide = int64_t{launch.group_rank()} * std::max<int64_t>(lws, 1);
  const int first_rank =
      static_cast<int>(std::clamp<int64_t>(first_rank_wide, 0, int64_t{1} << 30));
  auto refuse = [&](int rank, const std::string& why) { RefuseLaunch(launch, rank, why); };
  if (!IsValidName(launch.job_id()) || launch.attempt() < 0) {
    refuse(first_rank, "invalid job id '" + launch.job_id() + "' or attempt " +
                           std::to_string(launch.attempt()));
    return;
  }
  const int64_t max_lws =
      std::min<int64_t>(kMaxLocalWorldSize, int64_t{std::max(1, config_.slots)} * 4);
  if (lws < 1 || lws > max_lws) {
    refuse(first_rank, "local_world_size " + std::to_string(lws) + " is impossible on worker " +
                           config_.name + " (" + std::to_string(config_.slots) + " slots)");
    return;
  }
  if (launch.group_rank() < 0 || launch.num_nodes() < 1 ||
      launch.group_rank() >= launch.num_nodes() || first_rank_wide + lws > launch.world_size()) {
    refuse(first_rank, "inconsistent rank plan: group_rank " + std::to_string(launch.group_rank()) +
                           " of " + std::to_string(launch.num_nodes()) +
                           " nodes, local_world_size " + std::to_string(lws) + ", world_size " +
                           std::to_string(launch.world_size()));
    return;
  }
  // RANK comes from the coordinator's plan (Launch.ranks), never computed here.
  if (launch.ranks_size() != lws) {
    refuse(first_rank, "launch.ranks: " + std::to_string(launch.ranks_size()) +
                           " ranks for local_world_size " + std::to_string(lws));
    return;
  }
  for (int l = 0; l < lws; ++l) {
    const int rank = launch.ranks(l);
    bool repeated = false;
    for (int k = 0; k < l; ++k) repeated = repeated || launch.ranks(k) == rank;
    if (rank < 0 || rank >= launch.world_size() || repeated) {
      refuse(first_rank, "launch.ranks[" + std::to_string(l) + "]: rank " + std::to_string(rank) +
                             " is out of the world of " + std::to_string(launch.world_size()) +
                             " or repeated");
      return;
    }
  }
  // Limits are enforced or the job does not run: never accounted and silently exceeded.
  if (config_.cgroups == nullptr) {
    for (const v1::RankResources& res : launch.resources()) {
      if (res.memory_bytes() > 0 || res.cpus() > 0) {
        refuse(first_rank,
               std::string(res.memory_bytes() > 0 ? "memory_per_proc" : "cpus_per_proc") +
                   ": worker " + config_.name + " cannot enforce limits (" +
                   config_.cgroups_missing +
                   "); run the job where workers have cgroups, or drop the limit");
        return;
      }
    }
  }
  const Key key{launch.job_id(), launch.attempt(), launch.job_uid()};
  if (attempts_.count(key) > 0 || unpacking_.count(key) > 0) {
    spdlog::warn("job {} attempt {}: launched already; the repeated Launch is ignored",
                 launch.job_id(), launch.attempt());
    return;
  }
  // The same attempt of another job with the same id (its uid differs) still here: its
  // attempt directory, ports and metrics socket are named by the id and attempt.
  auto held = attempts_.lower_bound(Key{launch.job_id(), launch.attempt(), ""});
  if (held != attempts_.end() && held->first.job_id == launch.job_id() &&
      held->first.attempt == launch.attempt()) {
    Attempt& other = held->second;
    // Another job with the same id (another cluster's, or this one's after a fresh state
    // directory: ids restart at j-000001): it is never taken for this one.
    if (other.AnyRunning()) {
      KillAttempt(other, config_.kill_grace_ms);
      refuse(first_rank, "attempt " + std::to_string(launch.attempt()) +
                             " of another job with the same id (uid " + other.job_uid +
                             ") is still being stopped on worker " + config_.name);
      return;
    }
    spdlog::warn(
        "job {} attempt {}: forgetting the ended attempt of another job with that id "
        "(uid {}) for job uid {}",
        launch.job_id(), launch.attempt(), other.job_uid, launch.job_uid());
    CloseMetrics(other);
    attempts_.erase(held);
    snapshot_dirty_ = true;
  }
  // A later attempt of a job is a restart (attempt 0 is the first).
  if (launch.attempt() > 0) restarts_seen_total_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::string> argv = BuildArgv(launch.spec(), config_.trainer_path);
  if (argv.empty() || argv[0].empty()) {
    refuse(first_rank, "the job has an empty command");
    return;
  }
  if (launch.spec().has_trainer() && access(config_.trainer_path.c_str(), X_OK) != 0) {
    refuse(first_rank, "convoy-trainer not found at " + config_.trainer_path + " (" +
                           strerror(errno) + "; see --trainer)");
    return;
  }
  // The spec's paths must resolve under the job root: else no rank starts and the job
  // fails with the field named. The worker's own files (logs) stay under --work-dir.
  const v1::JobSpec& given = launch.spec();
  // Its directories are named by its identity, never by the job id alone (JobDirName).
  const std::string dir_name = JobDirName(launch.job_id(), launch.job_uid());
  // The user its ranks run as: the job's own identity (the same for each of its attempts
  // here), or the one --run-as user.
  std::optional<RunAsUser> user = config_.run_as;
  if (config_.identities != nullptr) {
    auto id = config_.identities->For(dir_name, config_.job_root + "/" + dir_name,
                                      launch.identity(), launch.cluster_id());
    if (id.status().code() == StatusCode::kAlreadyExists) {
      // Held for a job of another cluster this worker served before: that cluster will never
      // delete its files here, and they must not go to this job with the uid.
      const std::string holder = id.status().message();
      int64_t n = 0;
      Status gone = RemoveUnder(config_.work_dir + "/jobs", holder, &n);
      if (gone.ok()) gone = RemoveUnder(config_.job_root, holder, &n);
      if (!gone.ok()) {
        refuse(first_rank,
               "its identity is held by job " + holder +
                   " of another cluster, whose files cannot be removed: " + gone.message());
        return;
      }
      auto uid = config_.identities->Release(holder);
      spdlog::warn(
          "job {}: removed job {} of another cluster ({} entries) and released its uid "
          "{}, the identity the coordinator gave this job",
          launch.job_id(), holder, n, uid ? *uid : 0);
      id = config_.identities->For(dir_name, config_.job_root + "/" + dir_name, launch.identity(),
                                   launch.cluster_id());
    }
    if (!id.ok()) {
      refuse(first_rank, "no identity for the job on this worker: " + id.status().message());
      return;
    }
    user = *id;
  } else if (config_.run_as_owner) {
    auto account = OwnerAccount(launch.owner(), config_.name);
    if (!account.ok()) {
      refuse(first_rank, account.status().message());
      return;
    }
    user = *account;
  }
  const int64_t uid = user ? int64_t{user->uid} : -1;
  const int64_t gid = user ? int64_t{user->gid} : -1;
  auto dirs = PrepareJobDirs(
      config_.job_root, config_.data_paths, dir_name, given.checkpoint_dir(), given.working_dir(),
      given.has_trainer() ? given.trainer().data_dir() : "", uid, gid, config_.shared_paths);
  if (!dirs.ok()) {
    refuse(first_rank, dirs.status().message());
    return;
  }
  // resume_from: the named job's checkpoints (its directory under this job root, where its
  // checkpoint_dir resolved), or a path under this job's directory.
  std::string resume_from;
  if (launch.has_resume_source() && !launch.resume_source().job_id().empty()) {
    const v1::ResumeSource& from = launch.resume_source();
    if (!IsValidName(from.job_id()) || from.job_id() == "." || from.job_id() == "..") {
      refuse(first_rank, "resume_from: invalid job id '" + from.job_id() + "'");
      return;
    }
    const std::string from_dir = config_.job_root + "/" + JobDirName(from.job_id(), from.uid());
    if (from.checkpoint_dir().empty()) {
      resume_from = from_dir + "/checkpoints";
    } else {
      auto p = ResolveJobPath("resume_from (job " + from.job_id() + "'s checkpoint_dir)",
                              from.checkpoint_dir(), from_dir, config_.job_root);
      if (!p.ok()) {
        refuse(first_rank, p.status().message());
        return;
      }
      resume_from = *p;
    }
    // Another job's directory is its identity's alone: this job (another identity) gets a
    // copy of its checkpoints in its own directory.
    if (config_.identities != nullptr) {
      auto copied = CopyCheckpoints(
          resume_from, dirs->job_dir + "/resume-from-" + JobDirName(from.job_id(), from.uid()), uid,
          gid);
      if (!copied.ok()) {
        refuse(first_rank, "resume_from " + from.job_id() + ": " + copied.status().message());
        return;
      }
      resume_from = *copied;
    }
  } else if (!given.resume_from().empty()) {
    auto p = ResolveJobPath("resume_from", given.resume_from(), dirs->job_dir, config_.job_root);
    if (!p.ok()) {
      refuse(first_rank, p.status().message());
      return;
    }
    resume_from = *p;
  }
  LaunchPlan plan;
  plan.launch = launch;
  plan.first_rank = first_rank;
  plan.argv = std::move(argv);
  plan.dirs = std::move(*dirs);
  plan.dir_name = dir_name;
  plan.user = user;
  plan.resume_from = std::move(resume_from);
  if (given.code_sha256().empty()) {
    StartAttempt(plan);
    return;
  }
  // The connection fetched the archive before posting this Launch (worker/link/code_fetch.h).
  const std::string dest = plan.dirs.job_dir;
  unpacking_.emplace(key, std::move(plan));
  unpacker_.Unpack(given.code_sha256(), dest, uid, gid, [this, key](StatusOr<int64_t> unpacked) {
    Command cmd;
    cmd.unpacked = true;
    cmd.key = key;
    if (unpacked.ok()) {
      cmd.unpacked_files = *unpacked;
    } else {
      cmd.unpack = unpacked.status();
    }
    Enqueue(std::move(cmd));
  });
}

void Supervisor::CodeUnpacked(const Command& cmd) {
  auto it = unpacking_.find(cmd.key);
  if (it == unpacking_.end()) return;  // killed meanwhile, or the worker is stopping
  const LaunchPlan plan = std::move(it->second);
  unpacking_.erase(it);
  const std::string& sha = plan.launch.spec().code_sha256();
  if (cmd.unpack.code() == StatusCode::kNotFound) {
    RefuseLaunch(plan.launch, plan.first_rank,
                 "the job's code archive " + sha + " could not be fetched from the coordinator");
    return;
  }
  if (!cmd.unpack.ok()) {
    RefuseLaunch(plan.launch, plan.first_rank, "unpacking the job's code: " + cmd.unpack.message());
    return;
  }
  spdlog::info("job {}: unpacked {} file(s) of code {} into {}", plan.launch.job_id(),
               cmd.unpacked_files, sha.substr(0, 12), plan.dirs.job_dir);
  if (stopping_) return;
  StartAttempt(plan);
}

void Supervisor::RefuseLaunch(const v1::Launch& launch, int rank, const std::string& why) {
  spdlog::error("job {} attempt {}: cannot launch rank {}: {}", launch.job_id(), launch.attempt(),
                rank, why);
  v1::WorkerMessage out;
  v1::LaunchFailed* f = out.mutable_launch_failed();
  f->set_job_id(launch.job_id());
  f->set_job_uid(launch.job_uid());
  f->set_attempt(launch.attempt());
  f->set_rank(rank);
  f->set_error(why);
  Send(out);
}

void Supervisor::StartAttempt(const LaunchPlan& plan) {
  const v1::Launch& launch = plan.launch;
  const v1::JobSpec& given = launch.spec();
  const int64_t lws = launch.local_world_size();
  const int first_rank = plan.first_rank;
  auto refuse = [&](int rank, const std::string& why) { RefuseLaunch(launch, rank, why); };
  const Key key{launch.job_id(), launch.attempt(), launch.job_uid()};
  const JobDirs* dirs = &plan.dirs;
  const std::string& dir_name = plan.dir_name;
  const std::optional<RunAsUser>& user = plan.user;
  const std::string& resume_from = plan.resume_from;
  const std::string& checkpoint_dir = plan.dirs.checkpoint_dir;
  const std::vector<std::string>& argv = plan.argv;
  const std::string job_files = config_.work_dir + "/jobs/" + dir_name;
  const std::string dir = job_files + "/attempt-" + std::to_string(launch.attempt());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    refuse(first_rank, "cannot create " + dir + ": " + ec.message());
    return;
  }
  // The ranks write their error files in it (the worker makes them, 0600, theirs).
  const bool other_user = user.has_value() && user->uid != geteuid();
  MakeWorkerDir(job_files, other_user);
  MakeWorkerDir(dir, other_user);

  Attempt& a = attempts_[key];
  snapshot_dirty_ = true;
  a.job_id = launch.job_id();
  a.job_uid = launch.job_uid();
  a.attempt = launch.attempt();
  a.snapshot_key = SnapshotKey(launch.job_id(), launch.cluster_id(), launch.job_uid());
  a.dir = dir;
  a.user = user;
  const std::string label = "job " + a.job_id + " attempt " + std::to_string(a.attempt);
  std::string socket_path = MetricsSocketPath(config_.work_dir, "", dir_name, a.attempt);
  if (socket_path.empty()) {  // --work-dir is too deep for sun_path
    if (socket_fallback_dir_.empty()) {
      auto made = MakeSocketFallbackDir(other_user);
      if (made.ok()) socket_fallback_dir_ = *made;
      if (!made.ok()) spdlog::warn("{}", made.status().message());
    }
    socket_path = MetricsSocketPath(config_.work_dir, socket_fallback_dir_, dir_name, a.attempt);
  }
  auto socket = MetricsSocket::Open(socket_path, label, user ? user->uid : geteuid(),
                                    user ? user->gid : getegid());
  if (socket.ok()) {
    a.metrics = std::move(*socket);
  } else {
    spdlog::warn("{}: no metrics socket ({}); its ranks can report no metrics", label,
                 socket.status().message());
  }
  const std::string metrics_path = a.metrics != nullptr ? a.metrics->path() : "";
  std::string snapshot_dir;
  if (!config_.snapshot_root.empty()) {
    auto made = PrepareSnapshotDir(config_.snapshot_root, a.snapshot_key, user);
    if (made.ok()) {
      snapshot_dir = *made;
    } else {
      spdlog::warn("{}: no snapshot directory ({}); its ranks restart from their checkpoints",
                   label, made.status().message());
    }
  }

  // The worker's data cache, which only the worker writes: every job reads the same entries,
  // none can change what another reads. A trainer job's data set is cached now unless it is
  // (a rank started meanwhile waits for the fill).
  std::string cache_dir;
  if (config_.data_cache != nullptr) {
    cache_dir = config_.data_cache->dir();
    if (given.has_trainer()) config_.data_cache->Ensure(dirs->data_dir);
  }
  for (int l = 0; l < lws; ++l) {
    auto r = std::make_unique<Rank>();
    r->local_rank = l;
    r->rank = launch.ranks(l);
    r->log = std::make_unique<RankLog>(
        a.dir + "/rank-" + std::to_string(r->rank) + ".log", config_.log_max_bytes,
        user ? static_cast<int>(user->uid) : -1, user ? static_cast<int>(user->gid) : -1);
    if (!r->log->ok()) {
      spdlog::warn("{}: cannot write {}: {}", label, r->log->path(), strerror(errno));
    }
    // Where torch's @record writes a failing rank's exception: made here, empty, 0600 and
    // the rank's own, since the rank cannot create files in the attempt's directory.
    r->error_file = a.dir + "/rank-" + std::to_string(r->rank) + ".error.json";
    const int efd =
        open(r->error_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (efd >= 0) {
      if (user && fchown(efd, user->uid, user->gid) != 0) {
        spdlog::warn("{}: cannot give {} to uid {}", label, r->error_file, user->uid);
      }
      close(efd);
    }
    LaunchRequest req;
    req.argv = argv;
    RankFiles files;
    files.metrics_socket = metrics_path;
    files.checkpoint_dir = checkpoint_dir;
    files.error_file = r->error_file;
    files.snapshot_dir = snapshot_dir;
    files.preempt_file = a.dir + "/preempt";
    files.resume_from = resume_from;
    files.resume_from_uid = launch.has_resume_source() ? launch.resume_source().uid() : "";
    files.data_dir = dirs->data_dir;
    files.cache_dir = cache_dir;
    req.env = BuildRankEnv(config_.env, launch, l, config_.cores, files);
    req.working_dir = dirs->working_dir;
    req.user = user;
    const Status grouped = PrepareRankCgroup(
        *r, dir_name + "/attempt-" + std::to_string(a.attempt) + "/rank-" + std::to_string(r->rank),
        l < launch.resources_size() ? launch.resources(l) : v1::RankResources(), user, label, &req);
    auto started = grouped.ok() ? launcher_.Launch(req)
                                : StatusOr<LaunchedProcess>(Status::FailedPrecondition(
                                      "no cgroup for the rank: " + grouped.message()));
    if (!started.ok()) RemoveCgroup(*r, label);
    r->start_seq = ++seq_;
    snapshot_dirty_ = true;
    if (!started.ok()) {
      r->launch_failed = true;
      r->launch_error = started.status().message();
      r->log->Note("cannot start rank " + std::to_string(r->rank) + ": " + r->launch_error);
      r->log->Close();
      r->exit.set_exit_code(127);  // what a shell says for a command it cannot run
      for (const auto& line : r->log->StderrTail()) r->exit.add_stderr_tail(line);
      Rank& ref = *r;
      a.ranks.push_back(std::move(r));
      refuse(ref.rank, ref.launch_error);
      continue;
    }
    r->pid = started->pid;
    r->out_fd = started->stdout_fd;
    r->err_fd = started->stderr_fd;
    r->running = true;
    spdlog::info("{}: rank {} started, pid {}", label, r->rank, r->pid);
    Rank& ref = *r;
    a.ranks.push_back(std::move(r));
    SendStarted(a, ref);
  }
  if (!a.AnyRunning()) {
    a.ended_ms = clock_.NowMonotonicMs();
    CloseMetrics(a);
  }
}

void Supervisor::SendStarted(const Attempt& a, const Rank& r) {
  v1::WorkerMessage out;
  v1::ProcessStarted* s = out.mutable_process_started();
  s->set_job_id(a.job_id);
  s->set_job_uid(a.job_uid);
  s->set_attempt(a.attempt);
  s->set_rank(r.rank);
  s->set_local_rank(r.local_rank);
  s->set_pid(r.pid);
  Send(out);
}

void Supervisor::SendExited(const Attempt& a, const Rank& r) {
  v1::WorkerMessage out;
  v1::ProcessExited* e = out.mutable_process_exited();
  e->set_job_id(a.job_id);
  e->set_job_uid(a.job_uid);
  e->set_attempt(a.attempt);
  e->set_rank(r.rank);
  e->set_local_rank(r.local_rank);
  e->set_pid(r.pid);
  *e->mutable_exit() = r.exit;
  Send(out);
}

// ---- Kill, reap

void Supervisor::KillAttempt(Attempt& a, int64_t grace_ms) {
  const int64_t at = clock_.NowMonotonicMs() + grace_ms;
  for (auto& r : a.ranks) {
    if (!r->running) continue;
    r->signalled = true;
    launcher_.SignalGroup(r->pid, SIGTERM);
    launcher_.SignalGroup(r->pid, SIGCONT);  // a stopped rank must see its SIGTERM
    if (r->kill_at_ms == 0 || at < r->kill_at_ms) r->kill_at_ms = at;
  }
}

void Supervisor::KillEverything(const std::string& why) {
  bool any = false;
  for (auto& [key, a] : attempts_) {
    if (!a.AnyRunning()) continue;
    any = true;
    KillAttempt(a, config_.kill_grace_ms);
  }
  if (any) spdlog::warn("stopping every rank: {}", why);
}

void Supervisor::PumpOutput(Rank& r, bool is_stderr) {
  int& fd = is_stderr ? r.err_fd : r.out_fd;
  char buf[65536];
  // Bounded per wake-up so that one rank's flood cannot starve the others.
  for (int i = 0; i < 16 && fd >= 0; ++i) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      r.log->Append(buf, static_cast<size_t>(n), is_stderr);
      log_bytes_total_.fetch_add(n, std::memory_order_relaxed);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // EOF: the rank and everything that inherited the pipe closed it. EAGAIN: drained.
    if (n == 0 || errno != EAGAIN) CloseFd(fd);
    return;
  }
}

void Supervisor::Reap() {
  for (const ReapedProcess& p : launcher_.PollExits()) {
    for (auto& [key, a] : attempts_) {
      for (auto& r : a.ranks) {
        if (r->running && r->pid == p.pid) OnExit(a, *r, p.wait_status);
      }
    }
  }
}

void Supervisor::OnExit(Attempt& a, Rank& r, int wait_status) {
  r.running = false;
  r.exit_seq = ++seq_;
  snapshot_dirty_ = true;
  // Whatever is left in the pipes belongs to the log and the stderr tail. (Output that a
  // child of the rank writes later is lost: the group is killed just below.)
  for (int i = 0; i < 64 && r.out_fd >= 0; ++i) PumpOutput(r, false);
  for (int i = 0; i < 64 && r.err_fd >= 0; ++i) PumpOutput(r, true);
  CloseFd(r.out_fd);
  CloseFd(r.err_fd);
  r.log->Close();
  // Children the rank left behind in its process group go with it.
  launcher_.SignalGroup(r.pid, SIGKILL);
  r.exit.Clear();
  if (WIFSIGNALED(wait_status)) {
    r.exit.set_signal(WTERMSIG(wait_status));
    r.exit.set_signal_name(SignalName(WTERMSIG(wait_status)));
  } else {
    r.exit.set_exit_code(WEXITSTATUS(wait_status));
  }
  r.exit.set_killed_by_worker(r.signalled);
  for (const auto& line : r.log->StderrTail()) r.exit.add_stderr_tail(line);
  const bool failed = r.exit.signal() != 0 || r.exit.exit_code() != 0;
  // The kernel killed a process of its group at its memory limit: that is why it failed
  // (the rank itself, SIGKILL, or a child it could not do without).
  if (r.cgroup != nullptr && r.cgroup->OomKills() > 0 && failed) {
    r.exit.set_oom_killed(true);
    r.exit.set_memory_limit_bytes(r.cgroup->MemoryLimit());
  }
  RemoveCgroup(r, "job " + a.job_id + " attempt " + std::to_string(a.attempt));
  if (failed && !r.error_file.empty() && ReadTorchErrorFile(r.error_file, &r.exit)) {
    spdlog::info("job {} attempt {}: rank {} raised {}: {}", a.job_id, a.attempt, r.rank,
                 r.exit.error_type(), r.exit.error_message());
  }
  spdlog::info("job {} attempt {}: rank {} (pid {}) {}{}", a.job_id, a.attempt, r.rank, r.pid,
               DescribeExit(r.exit), r.signalled ? " (killed by the worker)" : "");
  const bool all_done = !a.AnyRunning();
  if (all_done) {
    a.ended_ms = clock_.NowMonotonicMs();
    CloseMetrics(a);  // reads what the ranks wrote before they went
  }
  SendExited(a, r);
}

Status Supervisor::PrepareRankCgroup(Rank& r, const std::string& name,
                                     const v1::RankResources& resources,
                                     const std::optional<RunAsUser>& user, const std::string& label,
                                     LaunchRequest* req) {
  if (config_.cgroups == nullptr) return Status::Ok();
  // Its own group, with what its job asked: a rank past its memory is killed by the kernel
  // there, and never takes a neighbour job's memory.
  CgroupLimits limits;
  limits.memory_bytes = resources.memory_bytes();
  limits.cpus = resources.cpus();
  limits.pids = config_.pids_per_rank;
  auto group = config_.cgroups->Create(name, limits);
  if (!group.ok()) return group.status();
  r.cgroup = std::move(*group);
  req->cgroup_join_files = r.cgroup->JoinFiles();
  // The rank's user may move its own processes in (a warm Python runs as that user); v1 lets
  // a process of that uid write them, v2 wants root's common ancestor too.
  for (const std::string& f : req->cgroup_join_files) {
    if (user && chown(f.c_str(), user->uid, user->gid) != 0) {
      spdlog::warn("{}: cannot give {} to uid {}: {}", label, f, user->uid, strerror(errno));
    }
  }
  req->cgroup_join_needs_root = config_.cgroups->version() == 2;
  return Status::Ok();
}

void Supervisor::RemoveCgroup(Rank& r, const std::string& label) {
  if (r.cgroup == nullptr) return;
  // What the rank left in it (a daemon it started in another process group) goes with it.
  if (!r.cgroup->Pids().empty()) r.cgroup->KillAll();
  Status st = r.cgroup->Remove();
  if (!st.ok()) {
    spdlog::warn("{}: rank {}'s cgroup stays: {}; the next worker start removes it", label, r.rank,
                 st.message());
  }
  r.cgroup.reset();
}

void Supervisor::CloseMetrics(Attempt& a) {
  if (a.metrics == nullptr) return;
  std::vector<v1::MetricRecord> records;
  const int64_t dropped_before = a.metrics->dropped();
  a.metrics->Drain(RankOfPeer(a), clock_.NowUnixMs(), &records);
  records_dropped_total_.fetch_add(a.metrics->dropped() - dropped_before,
                                   std::memory_order_relaxed);
  AddRecords({a.job_id, a.attempt, a.job_uid}, &records);
  a.metrics.reset();  // closes and removes the socket file
  FlushMetrics(true);
}

// ---- Timers

void Supervisor::Timers() {
  const int64_t now = clock_.NowMonotonicMs();
  for (auto& [key, a] : attempts_) {
    for (auto& r : a.ranks) {
      if (r->running && r->kill_at_ms != 0 && now >= r->kill_at_ms) {
        spdlog::warn("job {} attempt {}: rank {} outlived its grace; SIGKILL", a.job_id, a.attempt,
                     r->rank);
        launcher_.SignalGroup(r->pid, SIGKILL);
        r->kill_at_ms = now + 1000;  // again later if it is still there
      }
    }
  }
  if (LinkUp() && now >= next_heartbeat_ms_) {
    next_heartbeat_ms_ = now + heartbeat_ms_;
    v1::WorkerMessage hb;
    hb.mutable_heartbeat()->set_time_unix_ms(clock_.NowUnixMs());
    for (const auto& [key, a] : attempts_) {
      for (const auto& r : a.ranks) {
        if (r->running && r->pid > 0 && launcher_.IsStopped(r->pid)) {
          v1::StoppedRank* s = hb.mutable_heartbeat()->add_stopped();
          s->set_job_id(a.job_id);
          s->set_job_uid(a.job_uid);
          s->set_attempt(a.attempt);
          s->set_rank(r->rank);
        }
      }
    }
    Send(hb);
  }
  FlushMetrics(false);
  ExpireSnapshots(now);
  if (!finished_jobs_with_snapshots_.empty()) RemoveFinishedJobsSnapshots();
  // No coordinator for too long: ranks running on their own would never be reported or
  // stopped, and would hold their slots and their peers in collectives forever.
  if (!connected_ && !orphaned_ && now - disconnected_since_ms_ > config_.orphan_timeout_ms) {
    KillEverything("no coordinator for " + std::to_string(config_.orphan_timeout_ms / 1000) +
                   " s (--orphan-timeout)");
    orphaned_ = true;
  }
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    const Attempt& a = it->second;
    const bool old = a.ended_ms != 0 && now - a.ended_ms > kKeepExitedMs;
    if (!a.AnyRunning() && (a.forgotten || old)) {
      CloseMetrics(it->second);
      it = attempts_.erase(it);
      snapshot_dirty_ = true;
    } else {
      ++it;
    }
  }
}

}  // namespace convoy
