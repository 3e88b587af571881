// A launcher that starts convoy-trainer ranks from a warm trainer (trainer/zygote_protocol.h)
// and everything else, cold, through the launcher it wraps.
//
// A rank is forked from the warm trainer when its argv[0] is the trainer the warm one was
// started from, that binary is unchanged since (device, inode, size, mtime), and the rank's
// environment agrees with the warm trainer's on every variable read while libraries load
// (LD_*, GLIBC_TUNABLES, MALLOC_*, OMP_* but OMP_NUM_THREADS, GOMP_*, KMP_*, MKL_*,
// OPENBLAS_*, CUDA_*); else it starts cold. The warm trainer runs as the worker and never
// touches a GPU; each rank drops to the request's user after the fork, as a cold rank does,
// so no process of one run-as user is ever shared with another. It is the parent of the
// ranks it forks (they die with it, and it with the worker: PR_SET_PDEATHSIG); one serves
// every slot (a fork server is not used up). When it dies, its ranks are reported as killed
// and a new one is started at the next launch; a stale one (the binary changed) is replaced
// once none of its ranks runs.
//
// Threading: like the launcher it wraps, called from the supervisor thread only.
#pragma once

#include <sys/stat.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "trainer/zygote_protocol.h"
#include "worker/process_launcher.h"

namespace convoy {

class WarmTrainerLauncher : public ProcessLauncher {
 public:
  // `env`: the warm trainer's environment (the worker's base environment of ranks).
  WarmTrainerLauncher(ProcessLauncher& cold, std::string trainer_path,
                      std::map<std::string, std::string> env);
  ~WarmTrainerLauncher() override;

  // Starts the warm trainer now (it loads in the background). Logs and returns false when
  // it cannot; launches then start cold.
  bool Start();

  StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;
  void SignalGroup(pid_t pgid, int signal) override { cold_.SignalGroup(pgid, signal); }
  std::vector<ReapedProcess> PollExits() override;
  // The cold launcher's, and the warm trainer's socket (its ranks' exits, its readiness).
  int ExitWakeFds(std::vector<int>* fds) override;
  bool IsStopped(pid_t pid) override { return cold_.IsStopped(pid); }

  // For tests and logs: the warm trainer's pid (-1: none), how many ranks it started.
  pid_t warm_pid() const { return zygote_.pid; }
  int warm_launches() const { return warm_launches_; }

 private:
  // Why `request` must start cold; "" when the warm trainer may fork it.
  std::string ColdReason(const LaunchRequest& request) const;
  // The warm trainer is gone or being replaced: forget it (its ranks die with it).
  // `reaped`: it has exited and been waited for already.
  void Drop(const std::string& why, bool reaped);

  ProcessLauncher& cold_;
  const std::string trainer_path_;
  const std::map<std::string, std::string> env_;
  zygote::Process zygote_;
  struct stat binary_ {};  // the trainer as it was when the warm one started
  bool stale_ = false;
  bool ready_ = false;         // it said 'R': loaded, serving
  std::set<pid_t> warm_pids_;  // ranks it forked that have not been reported ended
  std::vector<ReapedProcess> pending_;
  int warm_launches_ = 0;
};

}  // namespace convoy
