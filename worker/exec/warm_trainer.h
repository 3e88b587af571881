// A launcher that starts ranks from warm servers (rank_process/zygote_protocol.h: processes that
// have loaded what ranks load, and fork one on request) where it may, and everything else,
// cold, through the launcher it wraps. Two kinds of warm server speak the same protocol:
//
//  - The warm trainer, `convoy-trainer --zygote`: LibTorch loaded and registered. A rank is
//    forked from it when its argv[0] is the trainer the warm one was started from, that
//    binary is unchanged since (device, inode, size, mtime), and the rank's environment
//    agrees with the warm trainer's on every variable read while libraries load (LD_*,
//    GLIBC_TUNABLES, MALLOC_*, OMP_* but OMP_NUM_THREADS, GOMP_*, KMP_*, MKL_*, OPENBLAS_*,
//    CUDA_*).
//  - The warm Python (--warm-python PYTHON, off by default): `PYTHON convoy-forkserver.py`,
//    torch imported. A rank is forked from it when its argv is `PYTHON [-u] SCRIPT ...` with
//    SCRIPT a regular file, or `PYTHON [-u] -m MODULE ...`, where PYTHON, looked up in the
//    rank's PATH, is the forkserver's interpreter (the same path, directories resolved: a
//    virtualenv's python is another interpreter) and unchanged, and the rank's environment
//    agrees with the forkserver's on every variable read while the interpreter and torch load
//    (those above but CUDA_VISIBLE_DEVICES, plus PYTHON*, PYTORCH_*, TORCH_*, LANG, LC_*,
//    but HOME). There is one, run as the worker, as the warm trainer is (issue 45: one per
//    user made the first job of every new identity start cold): `PYTHON -I -u
//    convoy-forkserver.py` (isolated: no PYTHON* variable, no user site, nothing on sys.path
//    a job can write) with HOME set to /nonexistent, so that nothing a job plants in a home
//    directory (a .pth, a sitecustomize) runs in it. It runs nothing of a job: each rank is
//    forked, joins its cgroup, drops to its job's identity (groups, gid, uid, verified) and
//    gets its own HOME, USER and LOGNAME before the job's script is even decoded, so ranks
//    of different jobs share nothing but the modules imported before the fork.
//    `-c`, other options, another interpreter or program, a PYTHON* variable the forkserver
//    does not have, and anything it cannot show in /proc start cold.
//
// The warm trainer runs as the worker and never touches a GPU; its ranks drop to the
// request's user after the fork (rank_process/rank_child.h), as a cold rank does. A
// server is the parent of the ranks it forks (they die with it, and it with the worker:
// PR_SET_PDEATHSIG); one serves every slot (a fork server is not used up). Until it has
// loaded, ranks start cold (nothing waits for it). When it dies, its ranks are reported as
// killed and a new one is started at the next launch (one that died before it had loaded is
// not, until its binary or script changes); a stale one (its binary or script changed) is
// replaced once none of its ranks runs.
//
// Threading: like the launcher it wraps, called from the supervisor thread only (Start and
// StartPython also from main before the supervisor starts).
#pragma once

#include <sys/stat.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rank_process/zygote_protocol.h"
#include "worker/exec/process_launcher.h"

namespace convoy {

class WarmTrainerLauncher : public ProcessLauncher {
 public:
  // `env`: the warm servers' environment (the worker's base environment of ranks).
  WarmTrainerLauncher(ProcessLauncher& cold, std::string trainer_path,
                      std::map<std::string, std::string> env);
  ~WarmTrainerLauncher() override;

  // Starts the warm trainer now (it loads in the background). Logs and returns false when
  // it cannot; launches of trainer ranks then start cold. Without it, every trainer rank
  // starts cold.
  bool Start();
  // Turns the warm Python on: `python` (an absolute path) runs `forkserver` (the script), as
  // the worker; it starts now (it loads in the background). Logs and returns false when it
  // cannot start it.
  bool StartPython(const std::string& python, const std::string& forkserver);

  StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;
  void SignalGroup(pid_t pgid, int signal) override { cold_.SignalGroup(pgid, signal); }
  std::vector<ReapedProcess> PollExits() override;
  // The cold launcher's, and every warm server's socket (its ranks' exits, its readiness).
  int ExitWakeFds(std::vector<int>* fds) override;
  bool IsStopped(pid_t pid) override { return cold_.IsStopped(pid); }

  // For tests and logs: the warm trainer's pid (-1: none), how many ranks it started; the
  // same of the warm Python.
  pid_t warm_pid() const { return trainer_.z.pid; }
  int warm_launches() const { return trainer_.launches; }
  pid_t python_pid() const { return python_server_.z.pid; }
  bool python_ready() const { return python_server_.z.pid > 0 && python_server_.ready; }
  int python_launches() const { return python_server_.launches; }

 private:
  // One warm server process and the ranks it forked.
  struct Server {
    std::string what;                  // "warm trainer", "warm Python"
    std::vector<std::string> command;  // what zygote::Start runs
    std::map<std::string, std::string> env;
    std::vector<std::string> watched;  // files whose change makes it stale
    std::vector<struct stat> watched_at_start;
    zygote::Process z;
    bool stale = false;
    bool ready = false;  // it said 'R': loaded, serving
    // It died before it was ready (it cannot load: no torch for that interpreter, a broken
    // binary): not started again until one of `watched` changes.
    bool broken = false;
    std::set<pid_t> warm_pids;  // ranks it forked that have not been reported ended
    int launches = 0;
  };

  bool StartServer(Server& s);
  // Reads what `s` sent (exits, readiness), notices that it died or is stale.
  void DrainServer(Server& s);
  // `s` is gone or being replaced: forget it (its ranks die with it). `reaped`: it has
  // exited and been waited for already.
  void Drop(Server& s, const std::string& why, bool reaped);
  bool Changed(const Server& s) const;
  // Starts `s` again if it is gone, unless it is stale or broken (and unchanged).
  void Revive(Server& s);
  // Forks `request` from `s` (ready); a server that fails is dropped and the rank starts cold.
  StatusOr<LaunchedProcess> SpawnOn(Server& s, const LaunchRequest& request);
  // Why `request` must not fork from the warm trainer; "" when it may.
  std::string TrainerColdReason(const LaunchRequest& request) const;
  // The warm Python for `request`, or null (with `why`) when it must start cold.
  Server* PythonFor(const LaunchRequest& request, std::string* why);

  ProcessLauncher& cold_;
  const std::string trainer_path_;
  const std::map<std::string, std::string> env_;
  Server trainer_;
  bool trainer_on_ = false;  // Start succeeded: trainer ranks fork from it from now on
  // The warm Python, when on: the interpreter (as given, and its path with directories
  // resolved), the script, and its server.
  std::string python_;
  std::string python_key_;
  std::string forkserver_;
  Server python_server_;
  std::vector<ReapedProcess> pending_;
};

// The path of `path` with its directory resolved (symlinks followed) and its last component
// kept: two names of one interpreter compare equal (/bin/python3, /usr/bin/python3 on a
// merged /usr), a virtualenv's python (a symlink in another directory) does not.
std::string InterpreterKey(const std::string& path);

// Where convoy-forkserver.py is: next to the worker's binary (the build tree), else in
// ../lib/convoy (the package: /usr/lib/convoy). Empty when neither exists.
std::string FindForkserverScript(const std::string& self_dir);

}  // namespace convoy
