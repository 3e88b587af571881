#include "worker/exec/posix_process_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/proc_stat.h"
#include "rank_process/rank_child.h"

namespace convoy {

std::string ResolveProgram(const std::string& program, const std::string& path_env) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return program;
  const std::string path = path_env.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_env;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

StatusOr<LaunchedProcess> PosixProcessLauncher::Launch(const LaunchRequest& req) {
  if (req.argv.empty() || req.argv[0].empty()) {
    return Status::InvalidArgument("empty command");
  }
  auto path_it = req.env.find("PATH");
  const std::string program =
      ResolveProgram(req.argv[0], path_it == req.env.end() ? "" : path_it->second);
  if (program.empty()) {
    return Status::NotFound(req.argv[0] + ": not found in PATH");
  }
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::map<std::string, std::string> env = req.env;
  if (req.user) {
    env["HOME"] = req.user->home;
    env["USER"] = req.user->name;
    env["LOGNAME"] = req.user->name;
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  const bool drop = req.user.has_value();
  const uid_t uid = drop ? req.user->uid : 0;
  const gid_t gid = drop ? req.user->gid : 0;
  std::vector<char*> argv, envp;
  for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<const char*> join_files;
  for (const auto& f : req.cgroup_join_files) join_files.push_back(f.c_str());
  join_files.push_back(nullptr);

  // Highest descriptor to close in the child when close_range(2) is missing (kernel < 5.9).
  const long open_max = sysconf(_SC_OPEN_MAX);
  const int max_fd = open_max > 0 && open_max < (1 << 20) ? static_cast<int>(open_max) : 65536;

  int out[2], err[2], exec_err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status::Internal("pipe: " + std::string(strerror(errno)));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Status::Internal("pipe: " + std::string(strerror(errno)));
  }
  if (pipe2(exec_err, O_CLOEXEC) != 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return Status::Internal("pipe: " + std::string(strerror(errno)));
  }
  // The child's set-up (rank_process/rank_child.h), shared with the warm trainer.
  RankChildSetup setup;
  setup.stdout_fd = out[1];
  setup.stderr_fd = err[1];
  setup.report_fd = exec_err[1];
  setup.drop = drop;
  setup.uid = uid;
  setup.gid = gid;
  setup.parent = getpid();
  setup.working_dir = req.working_dir.c_str();
  setup.cgroup_join_files = join_files.data();
  setup.max_fd = max_fd;
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1], exec_err[0], exec_err[1]}) close(fd);
    return Status::Internal("fork: " + std::string(strerror(errno)));
  }
  if (pid == 0) {
    SetUpRankChild(setup);
    execve(program.c_str(), argv.data(), envp.data());
    FailRankChild(3, kRankChildExec);
  }
  close(out[1]);
  close(err[1]);
  close(exec_err[1]);
  setpgid(pid, pid);  // also in the parent, so that the group exists before we signal it
  int stage = 0, error = 0;
  const bool failed = ReadRankChildFailure(exec_err[0], &stage, &error);
  close(exec_err[0]);
  if (failed) {
    waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    const std::string what = RankChildFailureWhat(stage, program, req.working_dir, uid, gid);
    if (stage == kRankChildRegain) {
      return Status::FailedPrecondition(what + ": root could be regained");
    }
    return Status::FailedPrecondition(what + ": " + strerror(error));
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  // Readable once the process has ended: the supervisor waits on it (ExitWakeFds). The child
  // is not reaped before PollExits, so the pid cannot have been reused.
  // (pidfds are close-on-exec.)
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  pids_[pid] = pidfd;
  return LaunchedProcess{pid, out[0], err[0]};
}

void PosixProcessLauncher::SignalGroup(pid_t pgid, int signal) {
  if (pgid > 1) kill(-pgid, signal);  // never kill(-1) or kill(0)
}

PosixProcessLauncher::~PosixProcessLauncher() {
  for (const auto& [pid, pidfd] : pids_) {
    if (pidfd >= 0) close(pidfd);
  }
}

std::vector<ReapedProcess> PosixProcessLauncher::PollExits() {
  std::vector<ReapedProcess> out;
  for (auto it = pids_.begin(); it != pids_.end();) {
    int status = 0;
    const pid_t pid = it->first;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      out.push_back({pid, status});
    } else if (r < 0 && errno == ECHILD) {
      // Reaped by someone else (a waitpid(-1) elsewhere in the process): its status is lost.
      out.push_back({pid, W_EXITCODE(255, 0)});
    } else {
      ++it;
      continue;
    }
    if (it->second >= 0) close(it->second);
    it = pids_.erase(it);
  }
  return out;
}

int PosixProcessLauncher::ExitWakeFds(std::vector<int>* fds) {
  bool all = true;
  for (const auto& [pid, pidfd] : pids_) {
    if (pidfd >= 0) {
      fds->push_back(pidfd);
    } else {
      all = false;
    }
  }
  return all ? -1 : 50;
}

bool PosixProcessLauncher::IsStopped(pid_t pid) {
  ProcStat stat;
  return ReadProcStat(pid, &stat) && (stat.state == 'T' || stat.state == 't');
}

}  // namespace convoy
