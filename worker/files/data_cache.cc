#include "worker/files/data_cache.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "common/job_paths.h"
#include "common/rank_contract.h"

namespace convoy {

StatusOr<std::unique_ptr<WorkerDataCache>> WorkerDataCache::Open(const std::string& work_dir,
                                                                 std::vector<std::string> roots,
                                                                 int64_t max_content_bytes) {
  namespace fs = std::filesystem;
  const std::string parent = work_dir + "/data-cache";
  // Earlier versions kept one private cache per run-as user (<uid>/), filled by the ranks.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code tec;
    if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit) && !e.is_symlink(tec) &&
        e.is_directory(tec)) {
      fs::remove_all(e.path(), tec);
      if (tec) spdlog::warn("data cache: cannot remove {}: {}", e.path().string(), tec.message());
    }
  }
  const std::string dir = parent + "/shared";
  std::string bad = PrepareCacheDir(parent, 0711);
  if (bad.empty()) bad = PrepareCacheDir(dir, 0711);
  if (!bad.empty()) return Status::Internal("data cache: " + bad);
  std::unique_ptr<WorkerDataCache> cache(
      new WorkerDataCache(dir, std::move(roots), max_content_bytes));
  WorkerDataCache* self = cache.get();
  cache->thread_ = std::thread([self] { self->Loop(); });
  return cache;
}

WorkerDataCache::~WorkerDataCache() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

int WorkerDataCache::Ensure(const std::string& data_dir, int64_t owner_uid) {
  const std::string given = data_dir.empty() ? rank_contract::kDefaultDataDir : data_dir;
  char resolved[PATH_MAX];
  if (realpath(given.c_str(), resolved) == nullptr) return 0;
  const std::string dir = resolved;
  // A job's own data (shipped or written): cached by its bytes' hash, when this build can.
  const bool by_content = std::none_of(roots_.begin(), roots_.end(), [&](const std::string& root) {
    return IsPathUnder(dir, root);
  });
  if (by_content && !ContentEntries()) return 0;
  int queued = 0;
  for (const std::string& file : rank_contract::DataFiles(dir)) {
    struct stat st {};
    if (stat(file.c_str(), &st) != 0 || (!by_content && EntryLooksCurrent(file, dir_))) continue;
    if (by_content) {
      // Hashed before at its version (a restart, say), and its entry in place: nothing to do.
      const std::string sha = RecordedSha256(file, dir_, geteuid());
      struct stat est {};
      if (!sha.empty() && lstat(ContentEntryPath(dir_, file, sha).c_str(), &est) == 0) continue;
    }
    std::string why;
    EntryLock held = TryLockEntry(file, dir_, &why);
    if (!held.held()) {
      if (why != "a fill is under way") spdlog::warn("data cache: {}: {}", file, why);
      continue;
    }
    {
      MutexLock lock(mu_);
      if (stop_) return queued;
      queue_.push_back(Fill{file, std::move(held), by_content, owner_uid});
    }
    ++queued;
  }
  if (queued > 0) cv_.SignalAll();
  return queued;
}

WorkerDataCache::Counts WorkerDataCache::counts() {
  MutexLock lock(mu_);
  return counts_;
}

void WorkerDataCache::WaitIdle() {
  MutexLock lock(mu_);
  while (!queue_.empty() || busy_) cv_.Wait(mu_);
}

void WorkerDataCache::Loop() {
  for (;;) {
    Fill fill;
    {
      MutexLock lock(mu_);
      while (queue_.empty() && !stop_) cv_.Wait(mu_);
      if (stop_) return;
      fill = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    const auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    try {
      std::string note;
      if (fill.by_content) {
        const ContentFill done =
            FillGzContentEntry(fill.file, dir_, fill.owner_uid, max_content_bytes_);
        note = done.note + " by content (sha256 " + done.sha256.substr(0, 12) + ")";
        const int evicted = EvictContentEntries(dir_, max_content_bytes_, done.entry);
        if (evicted > 0) note += "; " + std::to_string(evicted) + " least recently used removed";
      } else {
        note = FillGzEntry(fill.file, dir_, std::move(fill.lock));
      }
      spdlog::info("data cache: {}: {} in {} ms", fill.file, note,
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - t0)
                       .count());
    } catch (const std::exception& e) {
      ok = false;
      spdlog::warn("data cache: cannot cache {} (its ranks decompress it themselves): {}",
                   fill.file, e.what());
    }
    // Ranks waiting on the path's lock now look for the content entry; the lock file goes
    // (a job's path has no entry of its own).
    if (fill.by_content) DropPathLock(fill.file, dir_, std::move(fill.lock));
    bool idle = false;
    Counts counts;
    {
      MutexLock lock(mu_);
      busy_ = false;
      (ok ? counts_.filled : counts_.failed) += 1;
      idle = queue_.empty();
      counts = counts_;
    }
    if (idle) {
      spdlog::info("data cache ready: nothing left to fill ({} filled, {} failed so far)",
                   counts.filled, counts.failed);
    }
    cv_.SignalAll();
  }
}

}  // namespace convoy
