#include "worker/supervise/rank_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "common/process_exit.h"
#include "common/unique_fd.h"
#include "common/util.h"
#include "spec/checkpoint_spec.h"
#include "worker/files/snapshot_dir.h"
#include "worker/files/worker_dirs.h"

namespace convoy {
namespace {}  // namespace

RankRunner::RankRunner(const WorkerConfig& config, ProcessLauncher& launcher, AttemptTable& table,
                       Reporter& reporter, MetricsRelay& metrics, OffLoop& cgroups_thread,
                       const Clock& clock)
    : config_(config),
      launcher_(launcher),
      table_(table),
      reporter_(reporter),
      metrics_(metrics),
      cgroups_thread_(cgroups_thread),
      clock_(clock) {}

RankRunner::~RankRunner() {
  if (!socket_fallback_dir_.empty()) rmdir(socket_fallback_dir_.c_str());
}

// ---- Start

void RankRunner::Start(const LaunchPlan& plan) {
  Attempt* a = AddAttempt(plan);
  if (a == nullptr) return;
  const RankFiles shared = SharedFiles(plan, *a);
  for (int l = 0; l < plan.launch.local_world_size(); ++l) StartRank(plan, *a, l, shared);
  if (!a->AnyRunning()) {
    a->ended_ms = clock_.NowMonotonicMs();
    metrics_.Close(*a);
  }
}

Attempt* RankRunner::AddAttempt(const LaunchPlan& plan) {
  const v1::Launch& launch = plan.launch;
  const std::string job_files = config_.work_dir + "/jobs/" + plan.dir_name;
  const std::string dir = job_files + "/attempt-" + std::to_string(launch.attempt());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    reporter_.RefuseLaunch(launch, plan.first_rank, "cannot create " + dir + ": " + ec.message());
    return nullptr;
  }
  // The ranks write their error files in it (the worker makes them, 0600, theirs).
  const std::optional<RunAsUser>& user = plan.user;
  const bool other_user = user.has_value() && user->uid != geteuid();
  MakeWorkerDir(job_files, other_user);
  MakeWorkerDir(dir, other_user);

  Attempt& a = table_.Add({launch.job_id(), launch.attempt(), launch.job_uid()});
  a.snapshot_key = SnapshotKey(launch.job_id(), launch.cluster_id(), launch.job_uid());
  a.dir = dir;
  a.user = user;
  a.checkpoint_dir = plan.dirs.checkpoint_dir;
  if (HasCheckpointPolicy(launch.spec())) a.checkpoint_policy = launch.spec().checkpoint();
  std::string socket_path = MetricsSocketPath(config_.work_dir, "", plan.dir_name, a.attempt);
  if (socket_path.empty()) {  // --work-dir is too deep for sun_path
    if (socket_fallback_dir_.empty()) {
      auto made = MakeSocketFallbackDir(other_user);
      if (made.ok()) socket_fallback_dir_ = *made;
      if (!made.ok()) spdlog::warn("{}", made.status().message());
    }
    socket_path =
        MetricsSocketPath(config_.work_dir, socket_fallback_dir_, plan.dir_name, a.attempt);
  }
  auto socket = MetricsSocket::Open(socket_path, a.label(), user ? user->uid : geteuid(),
                                    user ? user->gid : getegid());
  if (socket.ok()) {
    a.metrics = std::move(*socket);
  } else {
    spdlog::warn("{}: no metrics socket ({}); its ranks can report no metrics", a.label(),
                 socket.status().message());
  }
  return &a;
}

RankFiles RankRunner::SharedFiles(const LaunchPlan& plan, const Attempt& a) {
  RankFiles files;
  files.metrics_socket = a.metrics != nullptr ? a.metrics->path() : "";
  files.checkpoint_dir = plan.dirs.checkpoint_dir;
  if (!config_.snapshot_root.empty()) {
    auto made = PrepareSnapshotDir(config_.snapshot_root, a.snapshot_key, plan.user);
    if (made.ok()) {
      files.snapshot_dir = *made;
    } else {
      spdlog::warn("{}: no snapshot directory ({}); its ranks restart from their checkpoints",
                   a.label(), made.status().message());
    }
  }
  files.preempt_file = a.dir + "/preempt";
  files.resume_from =
      plan.resume_file.empty() ? plan.resume_from : plan.resume_from + "/" + plan.resume_file;
  files.resume_from_uid = plan.launch.has_resume_source() ? plan.launch.resume_source().uid() : "";
  files.data_dir = plan.dirs.data_dir;
  // The worker's data cache, which only the worker writes: every job reads the same entries,
  // none can change what another reads. A trainer job's data set is cached now unless it is
  // (a rank started meanwhile waits for the fill); a job's own or shipped data by its hash.
  if (config_.data_cache != nullptr) {
    files.cache_dir = config_.data_cache->dir();
    if (plan.launch.spec().has_trainer()) {
      config_.data_cache->Ensure(plan.dirs.data_dir,
                                 plan.user ? int64_t{plan.user->uid} : int64_t{-1});
    }
  }
  return files;
}

void RankRunner::StartRank(const LaunchPlan& plan, Attempt& a, int l, const RankFiles& shared) {
  const v1::Launch& launch = plan.launch;
  const std::optional<RunAsUser>& user = plan.user;
  const std::string label = a.label();
  auto r = std::make_unique<Rank>();
  r->local_rank = l;
  r->rank = launch.ranks(l);
  r->log = std::make_unique<RankLog>(a.dir + "/rank-" + std::to_string(r->rank) + ".log",
                                     config_.log_max_bytes, user ? static_cast<int>(user->uid) : -1,
                                     user ? static_cast<int>(user->gid) : -1);
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
  req.argv = plan.argv;
  RankFiles files = shared;
  files.error_file = r->error_file;
  req.env = BuildRankEnv(config_.env, launch, l, config_.cores, files);
  req.working_dir = plan.dirs.working_dir;
  req.user = user;
  const Status grouped = PrepareRankCgroup(
      *r,
      plan.dir_name + "/attempt-" + std::to_string(a.attempt) + "/rank-" + std::to_string(r->rank),
      l < launch.resources_size() ? launch.resources(l) : v1::RankResources(), user, label, &req);
  auto started = grouped.ok() ? launcher_.Launch(req)
                              : StatusOr<LaunchedProcess>(Status::FailedPrecondition(
                                    "no cgroup for the rank: " + grouped.message()));
  if (!started.ok()) RemoveCgroup(*r, label);
  r->start_seq = table_.NextEvent();
  if (!started.ok()) {
    r->launch_failed = true;
    r->launch_error = started.status().message();
    r->log->Note("cannot start rank " + std::to_string(r->rank) + ": " + r->launch_error);
    r->log->Close();
    r->exit.set_exit_code(127);  // what a shell says for a command it cannot run
    for (const auto& line : r->log->StderrTail()) r->exit.add_stderr_tail(line);
    Rank& ref = *r;
    a.ranks.push_back(std::move(r));
    reporter_.RefuseLaunch(launch, ref.rank, ref.launch_error);
    return;
  }
  r->pid = started->pid;
  r->out_fd = started->stdout_fd;
  r->err_fd = started->stderr_fd;
  r->running = true;
  spdlog::info("{}: rank {} started, pid {}", label, r->rank, r->pid);
  Rank& ref = *r;
  a.ranks.push_back(std::move(r));
  reporter_.SendStarted(a, ref);
}

// ---- Output, exits

void RankRunner::Pump(Rank& r, bool is_stderr) {
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

void RankRunner::Reap() {
  for (const ReapedProcess& p : launcher_.PollExits()) {
    for (auto& [key, a] : table_.attempts()) {
      for (auto& r : a.ranks) {
        if (r->running && r->pid == p.pid) OnExit(a, *r, p.wait_status);
      }
    }
  }
}

void RankRunner::OnExit(Attempt& a, Rank& r, int wait_status) {
  r.running = false;
  r.exit_seq = table_.NextEvent();
  // Whatever is left in the pipes belongs to the log and the stderr tail. (Output that a
  // child of the rank writes later is lost: the group is killed just below.)
  for (int i = 0; i < 64 && r.out_fd >= 0; ++i) Pump(r, false);
  for (int i = 0; i < 64 && r.err_fd >= 0; ++i) Pump(r, true);
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
  RemoveCgroup(r, a.label());
  if (failed && !r.error_file.empty() && ReadTorchErrorFile(r.error_file, &r.exit)) {
    spdlog::info("job {} attempt {}: rank {} raised {}: {}", a.job_id, a.attempt, r.rank,
                 r.exit.error_type(), r.exit.error_message());
  }
  spdlog::info("job {} attempt {}: rank {} (pid {}) {}{}", a.job_id, a.attempt, r.rank, r.pid,
               DescribeExit(r.exit), r.signalled ? " (killed by the worker)" : "");
  if (!a.AnyRunning()) {
    a.ended_ms = clock_.NowMonotonicMs();
    metrics_.Close(a);  // reads what the ranks wrote before they went
  }
  reporter_.SendExited(a, r);
}

// ---- Cgroups

Status RankRunner::PrepareRankCgroup(Rank& r, const std::string& name,
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

void RankRunner::RemoveCgroup(Rank& r, const std::string& label) {
  if (r.cgroup == nullptr) return;
  // What the rank left in it (a daemon it started in another process group) goes with it;
  // KillAll polls until the group is empty, so off the loop.
  std::shared_ptr<Cgroup> group(std::move(r.cgroup));
  cgroups_thread_.Run([group, label, rank = r.rank] {
    if (!group->Pids().empty()) group->KillAll();
    Status st = group->Remove();
    if (!st.ok()) {
      spdlog::warn("{}: rank {}'s cgroup stays: {}; the next worker start removes it", label, rank,
                   st.message());
    }
  });
}

// ---- Kills

void RankRunner::Kill(Attempt& a, int64_t grace_ms) {
  const int64_t at = clock_.NowMonotonicMs() + grace_ms;
  for (auto& r : a.ranks) {
    if (!r->running) continue;
    r->signalled = true;
    launcher_.SignalGroup(r->pid, SIGTERM);
    launcher_.SignalGroup(r->pid, SIGCONT);  // a stopped rank must see its SIGTERM
    if (r->kill_at_ms == 0 || at < r->kill_at_ms) r->kill_at_ms = at;
  }
}

void RankRunner::KillEverything(const std::string& why) {
  bool any = false;
  for (auto& [key, a] : table_.attempts()) {
    if (!a.AnyRunning()) continue;
    any = true;
    Kill(a, config_.kill_grace_ms);
  }
  if (any) spdlog::warn("stopping every rank: {}", why);
}

void RankRunner::KillOverdue(int64_t now) {
  for (auto& [key, a] : table_.attempts()) {
    for (auto& r : a.ranks) {
      if (r->running && r->kill_at_ms != 0 && now >= r->kill_at_ms) {
        spdlog::warn("job {} attempt {}: rank {} outlived its grace; SIGKILL", a.job_id, a.attempt,
                     r->rank);
        launcher_.SignalGroup(r->pid, SIGKILL);
        r->kill_at_ms = now + 1000;  // again later if it is still there
      }
    }
  }
}

int64_t RankRunner::NextKillMs() const {
  int64_t due = Reporter::kNever;
  for (const auto& [key, a] : table_.attempts()) {
    for (const auto& r : a.ranks) {
      if (r->running && r->kill_at_ms != 0) due = std::min(due, r->kill_at_ms);
    }
  }
  return due;
}

void RankRunner::WritePreemptFile(const Attempt& a, const std::string& reason) {
  // In the attempt's directory (0711, the worker's): the ranks may read it, not make it. It
  // is the ranks' own and private like their other files there.
  const std::string path = a.dir + "/preempt";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::warn("job {} attempt {}: cannot write {}: {}", a.job_id, a.attempt, path,
                 std::strerror(errno));
    return;
  }
  const std::string text = (reason.empty() ? std::string("preempted") : reason) + "\n";
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (a.user && fchown(fd, a.user->uid, a.user->gid) != 0) ok = false;
  close(fd);
  if (!ok) spdlog::warn("job {} attempt {}: {} is incomplete", a.job_id, a.attempt, path);
}

std::vector<v1::StoppedRank> RankRunner::StoppedRanks() {
  std::vector<v1::StoppedRank> out;
  for (const auto& [key, a] : table_.attempts()) {
    for (const auto& r : a.ranks) {
      if (r->running && r->pid > 0 && launcher_.IsStopped(r->pid)) {
        v1::StoppedRank& s = out.emplace_back();
        s.set_job_id(a.job_id);
        s.set_job_uid(a.job_uid);
        s.set_attempt(a.attempt);
        s.set_rank(r->rank);
      }
    }
  }
  return out;
}

}  // namespace convoy
