#include "worker/exec/warm_trainer.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>

#include "worker/exec/posix_process_launcher.h"

namespace convoy {
namespace {

bool HasPrefix(const std::string& name, std::initializer_list<const char*> prefixes) {
  for (const char* prefix : prefixes) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Variables read while the libraries load (by the dynamic loader, glibc, OpenMP, BLAS, CUDA):
// a rank that sets them differently from the warm trainer must load its own.
bool ReadAtLoad(const std::string& name) {
  if (name == "OMP_NUM_THREADS") return false;  // the trainer sets its thread count itself
  return HasPrefix(name, {"LD_", "GLIBC_TUNABLES", "MALLOC_", "OMP_", "GOMP_", "KMP_", "MKL_",
                          "OPENBLAS_", "CUDA_"});
}

// The same for an interpreter that has imported torch: also what Python reads at start (its
// PYTHON* settings, the locale, HOME for the user's site-packages) and what torch reads at
// import. OMP_NUM_THREADS is applied after the fork (torch.set_num_threads), and
// CUDA_VISIBLE_DEVICES when CUDA initialises, which the forkserver never does.
bool ReadAtPythonLoad(const std::string& name) {
  if (name == "OMP_NUM_THREADS" || name == "CUDA_VISIBLE_DEVICES") return false;
  // Not HOME: the forkserver runs isolated (-I: no user site), with a HOME of its own.
  return ReadAtLoad(name) || name == "LANG" ||
         HasPrefix(name, {"PYTHON", "PYTORCH_", "TORCH_", "LC_"});
}

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

// The environment a rank gets from the launcher (HOME, USER, LOGNAME are the user's).
std::map<std::string, std::string> WithUser(std::map<std::string, std::string> env,
                                            const std::optional<RunAsUser>& user) {
  if (user) {
    env["HOME"] = user->home;
    env["USER"] = user->name;
    env["LOGNAME"] = user->name;
  }
  return env;
}

// Where two environments differ in a variable `read_at_load` names; "" when they agree.
template <typename Pred>
std::string LoadTimeDifference(const std::map<std::string, std::string>& rank,
                               const std::map<std::string, std::string>& server,
                               Pred read_at_load) {
  for (const auto& [k, v] : rank) {
    if (!read_at_load(k)) continue;
    auto it = server.find(k);
    if (it == server.end() || it->second != v) return k + " differs";
  }
  for (const auto& [k, v] : server) {
    if (read_at_load(k) && rank.count(k) == 0) return k + " differs";
  }
  return "";
}

}  // namespace

std::string InterpreterKey(const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  const auto dir = std::filesystem::canonical(p.parent_path().empty() ? "." : p.parent_path(), ec);
  return (ec ? p.parent_path() : dir).string() + "/" + p.filename().string();
}

std::string FindForkserverScript(const std::string& self_dir) {
  for (const std::string& candidate :
       {self_dir + "/convoy-forkserver.py", self_dir + "/../lib/convoy/convoy-forkserver.py"}) {
    if (access(candidate.c_str(), R_OK) == 0) {
      std::error_code ec;
      const auto canonical = std::filesystem::canonical(candidate, ec);
      return ec ? candidate : canonical.string();
    }
  }
  return "";
}

WarmTrainerLauncher::WarmTrainerLauncher(ProcessLauncher& cold, std::string trainer_path,
                                         std::map<std::string, std::string> env)
    : cold_(cold), trainer_path_(std::move(trainer_path)), env_(std::move(env)) {
  trainer_.what = "warm trainer";
  trainer_.command = {trainer_path_, "--zygote", "3"};
  trainer_.env = env_;
  trainer_.watched = {trainer_path_};
}

WarmTrainerLauncher::~WarmTrainerLauncher() {
  auto stop = [](Server& s) {
    if (s.z.pid > 0) {
      kill(s.z.pid, SIGKILL);
      waitpid(s.z.pid, nullptr, 0);
    }
    if (s.z.sock >= 0) close(s.z.sock);
  };
  stop(trainer_);
  stop(python_server_);
}

bool WarmTrainerLauncher::Start() {
  trainer_on_ = StartServer(trainer_);
  return trainer_on_;
}

bool WarmTrainerLauncher::StartPython(const std::string& python, const std::string& forkserver) {
  python_ = python;
  python_key_ = InterpreterKey(python);
  forkserver_ = forkserver;
  Server& s = python_server_;
  s.what = "warm Python";
  // Isolated (-I: PYTHON* variables and the user site ignored, the script's directory not on
  // sys.path) and unbuffered (-u, what PYTHONUNBUFFERED=1 gives every rank).
  s.command = {python_, "-I", "-u", forkserver_, "3"};
  std::map<std::string, std::string> env = env_;
  // A home no job can write: nothing planted in a home directory runs in it.
  env["HOME"] = "/nonexistent";
  // What -I ignores is not the forkserver's: a rank that sets one starts cold.
  for (auto it = env.begin(); it != env.end();) {
    it = it->first.rfind("PYTHON", 0) == 0 ? env.erase(it) : std::next(it);
  }
  env["PYTHONUNBUFFERED"] = "1";  // as every rank has it (rank_env.cc), and -u does
  env.erase("OMP_NUM_THREADS");   // each rank's own is applied after the fork
  s.env = env;
  s.watched = {python_, forkserver_};
  return StartServer(s);
}

bool WarmTrainerLauncher::StartServer(Server& s) {
  if (s.z.pid > 0) return true;
  s.watched_at_start.clear();
  for (const std::string& f : s.watched) {
    struct stat st {};
    if (stat(f.c_str(), &st) != 0) {
      spdlog::warn("{}: {}: {}; ranks start cold", s.what, f, strerror(errno));
      return false;
    }
    s.watched_at_start.push_back(st);
  }
  std::vector<std::string> env;
  for (const auto& [k, v] : s.env) env.push_back(k + "=" + v);
  std::string error;
  if (!zygote::Start(s.command, env, &s.z, &error, nullptr)) {
    spdlog::warn("{}: cannot start {}: {}; ranks start cold", s.what, s.command[0], error);
    s.z = {};
    return false;
  }
  s.stale = false;
  s.ready = false;
  std::string line;
  for (const std::string& c : s.command) line += (line.empty() ? "" : " ") + c;
  spdlog::info("{} started: {} (pid {})", s.what, line, s.z.pid);
  return true;
}

void WarmTrainerLauncher::Revive(Server& s) {
  if (s.z.pid > 0 || s.stale) return;
  if (s.broken) {
    if (!Changed(s)) return;
    s.broken = false;
  }
  StartServer(s);
}

bool WarmTrainerLauncher::Changed(const Server& s) const {
  for (size_t i = 0; i < s.watched.size() && i < s.watched_at_start.size(); ++i) {
    struct stat now {};
    if (stat(s.watched[i].c_str(), &now) != 0 || !SameFile(now, s.watched_at_start[i])) {
      return true;
    }
  }
  return false;
}

void WarmTrainerLauncher::Drop(Server& s, const std::string& why, bool reaped) {
  if (s.z.pid <= 0) return;
  spdlog::warn("{} (pid {}) {}; {} of its rank(s) end with it", s.what, s.z.pid, why,
               s.warm_pids.size());
  if (!s.ready && !s.stale) {
    s.broken = true;
    spdlog::warn(
        "{} ended before it had loaded (its own messages are in this log); its ranks "
        "start cold until {} changes",
        s.what, s.command[0]);
  }
  if (!reaped) {
    kill(s.z.pid, SIGKILL);
    waitpid(s.z.pid, nullptr, 0);
  }
  close(s.z.sock);
  s.z = {};
  // Its ranks die with it (PR_SET_PDEATHSIG); they were its children, not ours.
  for (pid_t pid : s.warm_pids) {
    kill(-pid, SIGKILL);
    pending_.push_back({pid, SIGKILL});
  }
  s.warm_pids.clear();
}

void WarmTrainerLauncher::DrainServer(Server& s) {
  if (s.z.pid <= 0) return;
  std::vector<std::pair<pid_t, int>> exits;
  const bool was_ready = s.ready;
  const bool alive = zygote::Drain(s.z, &exits, &s.ready);
  if (s.ready && !was_ready) spdlog::info("{} ready (pid {})", s.what, s.z.pid);
  for (const auto& [p, status] : exits) {
    if (s.warm_pids.erase(p) != 0) pending_.push_back({p, status});
  }
  int status = 0;
  if (waitpid(s.z.pid, &status, WNOHANG) == s.z.pid) {
    Drop(s, "exited", true);
  } else if (!alive) {
    Drop(s, "closed its socket", false);
  } else if (s.stale && s.warm_pids.empty()) {
    Drop(s, "is replaced: " + s.command[0] + " or its script changed", false);
    StartServer(s);
  }
}

std::string WarmTrainerLauncher::TrainerColdReason(const LaunchRequest& request) const {
  if (request.argv.empty() || request.argv[0] != trainer_path_) return "not the trainer";
  if (Changed(trainer_)) return "the trainer binary changed";
  return LoadTimeDifference(request.env, trainer_.env, ReadAtLoad);
}

WarmTrainerLauncher::Server* WarmTrainerLauncher::PythonFor(const LaunchRequest& request,
                                                            std::string* why) {
  auto path_it = request.env.find("PATH");
  const std::string program =
      ResolveProgram(request.argv[0], path_it == request.env.end() ? "" : path_it->second);
  if (program.empty() || InterpreterKey(program) != python_key_) {
    *why = "not the warm Python's interpreter";
    return nullptr;
  }
  // `PYTHON [-u] SCRIPT ...` or `PYTHON [-u] -m MODULE ...`; nothing else.
  size_t i = 1;
  if (i < request.argv.size() && request.argv[i] == "-u") ++i;
  if (i >= request.argv.size()) {
    *why = "no script";
    return nullptr;
  }
  const std::string& first = request.argv[i];
  if (first == "-m") {
    if (i + 1 >= request.argv.size() || request.argv[i + 1].empty() ||
        request.argv[i + 1][0] == '-') {
      *why = "-m without a module";
      return nullptr;
    }
  } else if (first.empty() || first[0] == '-') {
    *why = "interpreter option " + first;
    return nullptr;
  } else {
    const std::string script =
        first[0] == '/' || request.working_dir.empty() ? first : request.working_dir + "/" + first;
    struct stat st {};
    if (stat(script.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      *why = "the script is not a regular file";  // the interpreter's own error, cold
      return nullptr;
    }
  }
  Server& s = python_server_;
  Revive(s);
  if (s.z.pid > 0 && !s.ready) DrainServer(s);
  if (s.z.pid <= 0) {
    *why = "no warm Python";
    return nullptr;
  }
  if (!s.ready) {
    *why = "the warm Python is still loading";
    return nullptr;
  }
  if (Changed(s)) {
    if (!s.stale) {
      spdlog::info("{}: {} or {} changed; its ranks start cold until it is replaced", s.what,
                   python_, forkserver_);
    }
    s.stale = true;
  }
  if (s.stale) {
    *why = "the warm Python is stale";
    return nullptr;
  }
  *why = LoadTimeDifference(WithUser(request.env, request.user), s.env, ReadAtPythonLoad);
  return why->empty() ? &s : nullptr;
}

StatusOr<LaunchedProcess> WarmTrainerLauncher::Launch(const LaunchRequest& request) {
  if (request.argv.empty()) return cold_.Launch(request);
  if (!python_.empty() && request.argv[0] != trainer_path_) {
    std::string why;
    Server* s = PythonFor(request, &why);
    if (s != nullptr) return SpawnOn(*s, request);
    if (why != "not the warm Python's interpreter") {
      spdlog::info("a Python rank starts cold: {}", why);
    }
    return cold_.Launch(request);
  }
  if (!trainer_on_) return cold_.Launch(request);
  Server& t = trainer_;
  Revive(t);
  // Still loading? Never wait for it on the supervisor's thread: start cold meanwhile.
  if (t.z.pid > 0 && !t.ready) DrainServer(t);
  std::string cold = t.z.pid <= 0 ? "no warm trainer"
                     : !t.ready   ? "the warm trainer is still loading"
                                  : TrainerColdReason(request);
  if (cold == "the trainer binary changed" && !t.stale) {
    spdlog::info("warm trainer: {} changed; ranks start cold until its ranks are done",
                 trainer_path_);
    t.stale = true;
  }
  if (t.stale && cold.empty()) cold = "the warm trainer is stale";
  if (!cold.empty()) return cold_.Launch(request);
  return SpawnOn(t, request);
}

StatusOr<LaunchedProcess> WarmTrainerLauncher::SpawnOn(Server& s, const LaunchRequest& request) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return cold_.Launch(request);
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return cold_.Launch(request);
  }
  zygote::SpawnRequest req;
  req.argv = request.argv;
  if (request.user) {  // as the POSIX launcher does: dropped in the child, before anything runs
    req.drop = true;
    req.uid = request.user->uid;
    req.gid = request.user->gid;
  }
  for (const auto& [k, v] : WithUser(request.env, request.user)) req.env.push_back(k + "=" + v);
  req.working_dir = request.working_dir;
  req.cgroup_join_files = request.cgroup_join_files;
  if (zygote::ProcBytes(req.argv) > zygote::kArgRoom ||
      zygote::ProcBytes(req.env) > zygote::kEnvRoom) {
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    return cold_.Launch(request);  // too large to show in the warm server's /proc entries
  }
  pid_t pid = -1;
  std::vector<std::pair<pid_t, int>> exits;
  std::string error;
  bool gone = false;
  const bool ok = zygote::Spawn(s.z, req, out[1], err[1], 10000, &pid, &exits, &error, &gone);
  close(out[1]);
  close(err[1]);
  for (const auto& [p, status] : exits) {
    if (s.warm_pids.erase(p) != 0) pending_.push_back({p, status});
  }
  if (!ok) {
    close(out[0]);
    close(err[0]);
    if (gone) {
      Drop(s, "failed: " + error, false);
      return cold_.Launch(request);
    }
    return Status::FailedPrecondition(error);  // as a cold start of the same request fails
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  s.warm_pids.insert(pid);
  ++s.launches;
  return LaunchedProcess{pid, out[0], err[0]};
}

std::vector<ReapedProcess> WarmTrainerLauncher::PollExits() {
  std::vector<ReapedProcess> out = cold_.PollExits();
  DrainServer(trainer_);
  DrainServer(python_server_);
  out.insert(out.end(), pending_.begin(), pending_.end());
  pending_.clear();
  return out;
}

int WarmTrainerLauncher::ExitWakeFds(std::vector<int>* fds) {
  const int period = cold_.ExitWakeFds(fds);
  if (trainer_.z.sock >= 0) fds->push_back(trainer_.z.sock);
  if (python_server_.z.sock >= 0) fds->push_back(python_server_.z.sock);
  return period;
}

}  // namespace convoy
