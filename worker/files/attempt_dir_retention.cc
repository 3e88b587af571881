#include "worker/files/attempt_dir_retention.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "common/util.h"
#include "worker/files/file_removal.h"

namespace convoy {
namespace {

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

int64_t MtimeMs(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// The newest modification time of `dir` and its direct entries (not followed); -1 when
// `dir` is not a directory.
int64_t NewestMtimeMs(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return -1;
  int64_t newest = MtimeMs(st);
  for (const std::string& name : Entries(dir)) {
    if (lstat((dir + "/" + name).c_str(), &st) == 0) newest = std::max(newest, MtimeMs(st));
  }
  return newest;
}

// "attempt-12" -> 12; -1 otherwise.
int AttemptNumber(const std::string& name) {
  constexpr const char kPrefix[] = "attempt-";
  if (name.compare(0, sizeof(kPrefix) - 1, kPrefix) != 0) return -1;
  const std::string digits = name.substr(sizeof(kPrefix) - 1);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::atoi(digits.c_str());
}

}  // namespace

std::string AttemptTombstonePath(const std::string& work_dir, const std::string& job_id,
                                 int attempt) {
  return work_dir + "/jobs/" + job_id + "/attempt-" + std::to_string(attempt) + ".removed";
}

AttemptDirRetention::AttemptDirRetention(std::string work_dir, int64_t retention_ms,
                                         const Clock& clock, RunningFn running)
    : work_dir_(std::move(work_dir)),
      retention_ms_(retention_ms),
      clock_(clock),
      running_(std::move(running)) {}

AttemptDirRetention::~AttemptDirRetention() { Stop(); }

int AttemptDirRetention::Sweep() {
  const std::string jobs = work_dir_ + "/jobs";
  const std::set<std::pair<std::string, int>> running = running_();
  const int64_t now = clock_.NowUnixMs();
  int removed = 0;
  for (const std::string& job : Entries(jobs)) {
    if (!IsValidName(job) || job == "." || job == "..") continue;
    const std::string job_dir = jobs + "/" + job;
    for (const std::string& name : Entries(job_dir)) {
      const int attempt = AttemptNumber(name);
      if (attempt < 0 || running.count({job, attempt}) != 0) continue;
      const int64_t ended = NewestMtimeMs(job_dir + "/" + name);
      if (ended < 0 || now - ended <= retention_ms_) continue;
      // The tombstone first: a log reader that finds neither would say "no log".
      const int fd = open(AttemptTombstonePath(work_dir_, job, attempt).c_str(),
                          O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0) close(fd);
      int64_t entries = 0;
      Status st = RemoveUnder(job_dir, name, &entries);
      if (!st.ok()) {
        spdlog::warn("--attempt-dir-retention: cannot remove {}/{}: {}", job_dir, name,
                     st.message());
        continue;
      }
      ++removed;
      spdlog::info("job {} attempt {}: removed its directory ({} entries): it ended {} h ago", job,
                   attempt, entries, (now - ended) / 3600000);
    }
  }
  return removed;
}

void AttemptDirRetention::Start(int64_t interval_ms) {
  thread_ = std::thread([this, interval_ms] {
    for (;;) {
      Sweep();
      MutexLock lock(mu_);
      if (stop_) return;
      cv_.WaitFor(mu_, std::chrono::milliseconds(interval_ms));
      if (stop_) return;
    }
  });
}

void AttemptDirRetention::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace convoy
