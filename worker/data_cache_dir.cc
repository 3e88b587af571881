#include "worker/data_cache_dir.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "worker/posix_process_launcher.h"

namespace convoy {
namespace {

// `path` as a real directory (made with `mode` when missing), owned by uid:gid with exactly
// `mode`. Never follows a symlink.
Status MakePrivateDir(const std::string& path, mode_t mode, uid_t uid, gid_t gid) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Status::Internal("cannot create " + path + ": " + std::strerror(errno));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return Status::Internal(path + " is not a directory (or a symlink): " + std::strerror(errno));
  }
  struct stat st {};
  Status result = Status::Ok();
  if (fstat(fd, &st) != 0) {
    result = Status::Internal("cannot stat " + path + ": " + std::strerror(errno));
  } else if ((st.st_mode & 07777) != mode && fchmod(fd, mode) != 0) {
    // The mode before the owner (without CAP_FOWNER it cannot be changed once given away).
    result = Status::Internal("cannot chmod " + path + ": " + std::strerror(errno));
  } else if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) != 0) {
    result = Status::Internal("cannot give " + path + " to uid " + std::to_string(uid) + ": " +
                              std::strerror(errno));
  }
  close(fd);
  return result;
}

}  // namespace

int RemoveDeadWritersCacheTemporaries(const std::string& work_dir) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code ec;
  for (const auto& user_dir : fs::directory_iterator(work_dir + "/data-cache", ec)) {
    std::error_code tec;
    if (user_dir.is_symlink(tec) || !user_dir.is_directory(tec)) continue;
    for (const auto& e : fs::directory_iterator(user_dir.path(), tec)) {
      const std::string name = e.path().filename().string();
      const size_t at = name.rfind(".tmp.");
      if (at == std::string::npos || at == 0) continue;
      const std::string digits = name.substr(at + 5);
      if (digits.empty() || digits.size() > 9 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        continue;
      }
      const pid_t pid = static_cast<pid_t>(std::stol(digits));
      if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer lives
      std::error_code rec;
      if (fs::remove(e.path(), rec)) ++removed;
    }
  }
  return removed;
}

StatusOr<std::string> PrepareDataCacheDir(const std::string& work_dir,
                                          const std::optional<RunAsUser>& user) {
  const std::string parent = work_dir + "/data-cache";
  CONVOY_RETURN_IF_ERROR(MakePrivateDir(parent, 0711, geteuid(), getegid()));
  const uid_t uid = user ? user->uid : geteuid();
  const gid_t gid = user ? user->gid : getegid();
  const std::string dir = parent + "/" + std::to_string(uid);
  CONVOY_RETURN_IF_ERROR(MakePrivateDir(dir, 0700, uid, gid));
  return dir;
}

std::unique_ptr<DataCacheFiller> DataCacheFiller::Start(const std::string& trainer_path,
                                                        const std::string& cache_dir,
                                                        const std::optional<RunAsUser>& user,
                                                        std::map<std::string, std::string> env) {
  if (cache_dir.empty() || access(trainer_path.c_str(), X_OK) != 0) return nullptr;
  std::unique_ptr<DataCacheFiller> filler(new DataCacheFiller());
  DataCacheFiller* self = filler.get();
  filler->thread_ = std::thread([self, trainer_path, cache_dir, user, env = std::move(env)] {
    self->Run(trainer_path, cache_dir, user, env);
  });
  return filler;
}

DataCacheFiller::~DataCacheFiller() {
  stopping_ = true;
  // The thread polls stopping_ at least once a second; the kill ends its reads at once.
  {
    MutexLock lock(mu_);
    if (pid_ > 0) kill(-pid_, SIGKILL);
  }
  if (thread_.joinable()) thread_.join();
}

void DataCacheFiller::Run(const std::string& trainer_path, const std::string& cache_dir,
                          const std::optional<RunAsUser>& user,
                          std::map<std::string, std::string> env) {
  // Its own launcher: the supervisor's reaps only what it started.
  PosixProcessLauncher launcher;
  LaunchRequest req;
  req.argv = {trainer_path, "--fill-data-cache"};
  env["CONVOY_CACHE_DIR"] = cache_dir;
  env["OMP_NUM_THREADS"] = "1";
  req.env = std::move(env);
  req.user = user;
  auto started = launcher.Launch(req);
  if (!started.ok()) {
    spdlog::warn("data cache: cannot start {}: {}", trainer_path, started.status().message());
    return;
  }
  {
    MutexLock lock(mu_);
    pid_ = started->pid;
    // A destructor that ran before pid_ was set has not killed it: do it here.
    if (stopping_) launcher.SignalGroup(started->pid, SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string output;
  int fds[2] = {started->stdout_fd, started->stderr_fd};
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (poll(p, 2, 1000) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || (p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i], buf, sizeof(buf));
      if (n > 0 && output.size() < 64 * 1024) output.append(buf, static_cast<size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) close(fds[i]);
  }
  int status = -1;
  while (true) {
    {
      MutexLock lock(mu_);
      auto exits = launcher.PollExits();
      if (!exits.empty()) {
        status = exits[0].wait_status;
        pid_ = 0;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  while (!output.empty() && output.back() == '\n') output.pop_back();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    spdlog::info("data cache filled in {:.2f} s: {}", secs, output);
  } else if (stopping_) {
    spdlog::info("data cache: the filler was stopped with the worker");
  } else {
    spdlog::warn("data cache: {} --fill-data-cache failed (status {}): {}", trainer_path, status,
                 output);
  }
}

}  // namespace convoy
