#include "worker/warm_trainer.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace convoy {
namespace {

// Variables read while the libraries load (by the dynamic loader, glibc, OpenMP, BLAS, CUDA):
// a rank that sets them differently from the warm trainer must load its own.
bool ReadAtLoad(const std::string& name) {
  if (name == "OMP_NUM_THREADS") return false;  // the trainer sets its thread count itself
  for (const char* prefix : {"LD_", "GLIBC_TUNABLES", "MALLOC_", "OMP_", "GOMP_", "KMP_", "MKL_",
                             "OPENBLAS_", "CUDA_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

WarmTrainerLauncher::WarmTrainerLauncher(ProcessLauncher& cold, std::string trainer_path,
                                         std::map<std::string, std::string> env)
    : cold_(cold), trainer_path_(std::move(trainer_path)), env_(std::move(env)) {}

WarmTrainerLauncher::~WarmTrainerLauncher() {
  if (zygote_.pid > 0) {
    kill(zygote_.pid, SIGKILL);
    waitpid(zygote_.pid, nullptr, 0);
  }
  if (zygote_.sock >= 0) close(zygote_.sock);
}

bool WarmTrainerLauncher::Start() {
  if (zygote_.pid > 0) return true;
  if (stat(trainer_path_.c_str(), &binary_) != 0) {
    spdlog::warn("warm trainer: {}: {}; ranks start cold", trainer_path_, strerror(errno));
    return false;
  }
  std::vector<std::string> env;
  for (const auto& [k, v] : env_) env.push_back(k + "=" + v);
  std::string error;
  if (!zygote::Start(trainer_path_, env, &zygote_, &error)) {
    spdlog::warn("warm trainer: cannot start {}: {}; ranks start cold", trainer_path_, error);
    zygote_ = {};
    return false;
  }
  stale_ = false;
  ready_ = false;
  spdlog::info("warm trainer started: {} --zygote (pid {})", trainer_path_, zygote_.pid);
  return true;
}

void WarmTrainerLauncher::Drop(const std::string& why, bool reaped) {
  if (zygote_.pid <= 0) return;
  spdlog::warn("warm trainer (pid {}) {}; {} of its rank(s) end with it", zygote_.pid, why,
               warm_pids_.size());
  if (!reaped) {
    kill(zygote_.pid, SIGKILL);
    waitpid(zygote_.pid, nullptr, 0);
  }
  close(zygote_.sock);
  zygote_ = {};
  // Its ranks die with it (PR_SET_PDEATHSIG); they were its children, not ours.
  for (pid_t pid : warm_pids_) {
    kill(-pid, SIGKILL);
    pending_.push_back({pid, SIGKILL});
  }
  warm_pids_.clear();
}

std::string WarmTrainerLauncher::ColdReason(const LaunchRequest& request) const {
  if (request.argv.empty() || request.argv[0] != trainer_path_) return "not the trainer";
  struct stat now {};
  if (stat(trainer_path_.c_str(), &now) != 0 || !SameFile(now, binary_)) {
    return "the trainer binary changed";
  }
  for (const auto& [k, v] : request.env) {
    if (!ReadAtLoad(k)) continue;
    auto it = env_.find(k);
    if (it == env_.end() || it->second != v) return k + " differs";
  }
  for (const auto& [k, v] : env_) {
    if (ReadAtLoad(k) && request.env.count(k) == 0) return k + " differs";
  }
  return "";
}

StatusOr<LaunchedProcess> WarmTrainerLauncher::Launch(const LaunchRequest& request) {
  if (zygote_.pid <= 0 && !stale_) Start();
  if (zygote_.pid > 0 && !ready_) {
    // Still loading? Never wait for it on the supervisor's thread: start cold meanwhile.
    std::vector<std::pair<pid_t, int>> exits;
    const bool alive = zygote::Drain(zygote_, &exits, &ready_);
    for (const auto& [p, status] : exits) {
      if (warm_pids_.erase(p) != 0) pending_.push_back({p, status});
    }
    if (!alive) Drop("closed its socket", false);
  }
  std::string cold = zygote_.pid <= 0 ? "no warm trainer"
                     : !ready_        ? "the warm trainer is still loading"
                                      : ColdReason(request);
  if (cold == "the trainer binary changed" && !stale_) {
    spdlog::info("warm trainer: {} changed; ranks start cold until its ranks are done",
                 trainer_path_);
    stale_ = true;
  }
  if (stale_ && cold.empty()) cold = "the warm trainer is stale";
  if (!cold.empty()) return cold_.Launch(request);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return cold_.Launch(request);
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return cold_.Launch(request);
  }
  zygote::SpawnRequest req;
  req.argv = request.argv;
  std::map<std::string, std::string> env = request.env;
  if (request.user) {  // as the POSIX launcher does
    env["HOME"] = request.user->home;
    env["USER"] = request.user->name;
    env["LOGNAME"] = request.user->name;
    req.drop = true;
    req.uid = request.user->uid;
    req.gid = request.user->gid;
  }
  for (const auto& [k, v] : env) req.env.push_back(k + "=" + v);
  req.working_dir = request.working_dir;
  if (zygote::ProcBytes(req.argv) > zygote::kArgRoom ||
      zygote::ProcBytes(req.env) > zygote::kEnvRoom) {
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    return cold_.Launch(request);  // too large to show in the warm trainer's /proc entries
  }
  pid_t pid = -1;
  std::vector<std::pair<pid_t, int>> exits;
  std::string error;
  bool gone = false;
  const bool ok = zygote::Spawn(zygote_, req, out[1], err[1], 10000, &pid, &exits, &error, &gone);
  close(out[1]);
  close(err[1]);
  for (const auto& [p, status] : exits) {
    if (warm_pids_.erase(p) != 0) pending_.push_back({p, status});
  }
  if (!ok) {
    close(out[0]);
    close(err[0]);
    if (gone) {
      Drop("failed: " + error, false);
      return cold_.Launch(request);
    }
    return Status::FailedPrecondition(error);  // as a cold start of the same request fails
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  warm_pids_.insert(pid);
  ++warm_launches_;
  return LaunchedProcess{pid, out[0], err[0]};
}

std::vector<ReapedProcess> WarmTrainerLauncher::PollExits() {
  std::vector<ReapedProcess> out = cold_.PollExits();
  if (zygote_.pid > 0) {
    std::vector<std::pair<pid_t, int>> exits;
    const bool was_ready = ready_;
    const bool alive = zygote::Drain(zygote_, &exits, &ready_);
    if (ready_ && !was_ready) spdlog::info("warm trainer ready (pid {})", zygote_.pid);
    for (const auto& [p, status] : exits) {
      if (warm_pids_.erase(p) != 0) pending_.push_back({p, status});
    }
    int status = 0;
    if (waitpid(zygote_.pid, &status, WNOHANG) == zygote_.pid) {
      Drop("exited", true);
    } else if (!alive) {
      Drop("closed its socket", false);
    } else if (stale_ && warm_pids_.empty()) {
      Drop("is replaced: the trainer binary changed", false);
      Start();
    }
  }
  out.insert(out.end(), pending_.begin(), pending_.end());
  pending_.clear();
  return out;
}

int WarmTrainerLauncher::ExitWakeFds(std::vector<int>* fds) {
  const int period = cold_.ExitWakeFds(fds);
  if (zygote_.sock >= 0) fds->push_back(zygote_.sock);
  return period;
}

}  // namespace convoy
