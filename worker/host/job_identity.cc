#include "worker/host/job_identity.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace convoy {

namespace {

bool ParseUid(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *out = std::stoull(s);
  return true;
}

// The uids of every process now (the owners of /proc/PID).
std::set<uid_t> ProcessUids() {
  std::set<uid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, 0) == 0) out.insert(st.st_uid);
  }
  closedir(d);
  return out;
}

}  // namespace

StatusOr<UidRange> ParseUidRange(const std::string& flag, const std::string& text) {
  const size_t dash = text.find('-');
  uint64_t first = 0, last = 0;
  if (dash == std::string::npos || !ParseUid(text.substr(0, dash), &first) ||
      !ParseUid(text.substr(dash + 1), &last)) {
    return Status::InvalidArgument(flag + ": '" + text +
                                   "' is not a range of uids FIRST-LAST (e.g. 61184-65519)");
  }
  if (first < 1000 || first > last || last >= 0x7fffffff) {
    return Status::InvalidArgument(flag + ": '" + text +
                                   "' must have 1000 <= FIRST <= LAST < 2147483647 (system "
                                   "accounts live below 1000)");
  }
  return UidRange{static_cast<uid_t>(first), static_cast<uid_t>(last)};
}

Status CheckRangeFree(const std::string& flag, const UidRange& range) {
  const std::string shown =
      flag + " " + std::to_string(range.first) + "-" + std::to_string(range.last);
  setpwent();
  while (passwd* pw = getpwent()) {
    if (pw->pw_uid >= range.first && pw->pw_uid <= range.last) {
      const std::string name = pw->pw_name;
      const uid_t uid = pw->pw_uid;
      endpwent();
      return Status::FailedPrecondition(
          shown + ": account " + name + " has uid " + std::to_string(uid) +
          " in it, and a job given that uid would be that account; choose a range no account "
          "or group uses");
    }
  }
  endpwent();
  setgrent();
  while (group* gr = getgrent()) {
    if (gr->gr_gid >= range.first && gr->gr_gid <= range.last) {
      const std::string name = gr->gr_name;
      const gid_t gid = gr->gr_gid;
      endgrent();
      return Status::FailedPrecondition(shown + ": group " + name + " has gid " +
                                        std::to_string(gid) +
                                        " in it; choose a range no account or group uses");
    }
  }
  endgrent();
  return Status::Ok();
}

StatusOr<std::unique_ptr<JobIdentities>> JobIdentities::Open(const std::string& dir,
                                                             UidRange range) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Internal("cannot create " + dir + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return Status::FailedPrecondition(dir + ": not a directory of the worker's own");
  }
  chmod(dir.c_str(), 0700);
  std::unique_ptr<JobIdentities> ids(new JobIdentities(dir, range));
  ids->next_ = range.first;
  uint64_t highest = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    uint64_t uid = 0;
    if (!ParseUid(name, &uid)) continue;  // "next"
    std::ifstream in(e.path());
    std::string job;
    std::string line, cluster;
    std::getline(in, line);
    std::istringstream fields(line);
    fields >> job >> cluster;
    if (uid < range.first || uid > range.last || job.empty()) {
      spdlog::warn("job identities: dropping the record {} ({})", e.path().string(),
                   job.empty() ? "no job in it" : "outside the pool " + job);
      std::filesystem::remove(e.path(), ec);
      continue;
    }
    ids->by_job_[job] = static_cast<uid_t>(uid);
    ids->cluster_of_[static_cast<uid_t>(uid)] = cluster;
    ids->by_uid_[static_cast<uid_t>(uid)] = job;
    highest = std::max(highest, uid);
  }
  std::ifstream next(dir + "/next");
  uint64_t n = 0;
  std::string text;
  if (std::getline(next, text) && ParseUid(text, &n) && n >= range.first && n <= range.last) {
    ids->next_ = static_cast<uid_t>(n);
  } else if (highest != 0) {
    ids->next_ = highest == range.last ? range.first : static_cast<uid_t>(highest + 1);
  }
  return ids;
}

std::optional<uid_t> JobIdentities::Find(const std::string& job) const {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return std::nullopt;
  return it->second;
}

bool JobIdentities::Taken(uid_t uid) const {
  if (by_uid_.count(uid) != 0) return true;
  // Someone's account or group (made after the worker started: CheckRangeFree ran then).
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) return true;
  group gr{};
  group* gfound = nullptr;
  return getgrgid_r(uid, &gr, buf, sizeof(buf), &gfound) == 0 && gfound != nullptr;
}

Status JobIdentities::Record(const std::string& job, uid_t uid, const std::string& cluster) {
  const std::string path = dir_ + "/" + std::to_string(uid);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Status::Internal("cannot record job " + job + "'s identity in " + path + ": " +
                            std::strerror(errno));
  }
  const std::string line = job + (cluster.empty() ? "" : " " + cluster) + "\n";
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool synced = fsync(fd) == 0;
  close(fd);
  if (!written || !synced) {
    unlink(path.c_str());
    return Status::Internal("cannot record job " + job + "'s identity in " + path);
  }
  by_job_[job] = uid;
  by_uid_[uid] = job;
  cluster_of_[uid] = cluster;
  return Status::Ok();
}

StatusOr<RunAsUser> JobIdentities::For(const std::string& job, const std::string& home,
                                       int32_t number, const std::string& cluster) {
  auto make = [&](uid_t uid) {
    RunAsUser u;
    u.uid = uid;
    u.gid = uid;
    u.name = "convoy-job-" + std::to_string(uid);
    u.home = home;
    return u;
  };
  const std::string pool =
      "--run-as-pool " + std::to_string(range_.first) + "-" + std::to_string(range_.last);
  if (number > 0) {
    if (static_cast<size_t>(number) > range_.size()) {
      return Status::ResourceExhausted(
          "its identity " + std::to_string(number) + " is beyond " + pool + " (" +
          std::to_string(range_.size()) +
          " uids): more jobs hold identities than the pool has; delete finished jobs "
          "(--job-retention) or widen the pool on every worker");
    }
    const uid_t uid = range_.first + static_cast<uid_t>(number - 1);
    auto known = Find(job);
    if (known && *known == uid) return make(uid);
    auto holder = by_uid_.find(uid);
    if (holder != by_uid_.end() && !cluster.empty() && !cluster_of_[uid].empty() &&
        cluster_of_[uid] != cluster) {
      return Status::AlreadyExists(holder->second);  // another cluster's: see the header
    }
    if (holder != by_uid_.end()) {
      return Status::FailedPrecondition("uid " + std::to_string(uid) + " of " + pool +
                                        " is still held here by job " + holder->second +
                                        ", whose files are not deleted yet");
    }
    if (known) {
      return Status::FailedPrecondition("job " + job + " ran here as uid " +
                                        std::to_string(*known) + ", and is now given uid " +
                                        std::to_string(uid));
    }
    if (Taken(uid)) {
      return Status::FailedPrecondition("uid " + std::to_string(uid) + " of " + pool +
                                        " belongs to an account or group of this host");
    }
    CONVOY_RETURN_IF_ERROR(Record(job, uid, cluster));
    return make(uid);
  }
  if (auto known = Find(job)) return make(*known);
  const std::set<uid_t> running = ProcessUids();
  uid_t uid = next_;
  for (size_t tried = 0; tried < range_.size(); ++tried) {
    const uid_t candidate = uid;
    uid = uid == range_.last ? range_.first : uid + 1;
    if (Taken(candidate) || running.count(candidate) != 0) continue;
    if (access((dir_ + "/" + std::to_string(candidate)).c_str(), F_OK) == 0) continue;
    CONVOY_RETURN_IF_ERROR(Record(job, candidate, cluster));
    next_ = uid;
    std::ofstream(dir_ + "/next") << next_ << "\n";
    return make(candidate);
  }
  return Status::ResourceExhausted("no free uid in the pool " + std::to_string(range_.first) + "-" +
                                   std::to_string(range_.last) + " (" +
                                   std::to_string(by_uid_.size()) +
                                   " held by jobs on this worker): delete finished jobs or "
                                   "widen --run-as-pool");
}

void RemoveFilesOfUid(const std::string& job, uid_t uid, const std::vector<std::string>& tmp_dirs) {
  for (const std::string& d : tmp_dirs) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
      struct stat st {};
      if (lstat(e.path().c_str(), &st) != 0 || st.st_uid != uid) continue;
      std::error_code rm;
      std::filesystem::remove_all(e.path(), rm);
      if (rm) {
        spdlog::warn("job {}: cannot remove {} left by its uid {}: {}", job, e.path().string(), uid,
                     rm.message());
      } else {
        spdlog::info("job {}: removed {} left by its uid {}", job, e.path().string(), uid);
      }
    }
  }
}

std::optional<uid_t> JobIdentities::Release(const std::string& job,
                                            const std::vector<std::string>& tmp_dirs) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return std::nullopt;
  const uid_t uid = it->second;
  RemoveFilesOfUid(job, uid, tmp_dirs);
  unlink((dir_ + "/" + std::to_string(uid)).c_str());
  by_uid_.erase(uid);
  cluster_of_.erase(uid);
  by_job_.erase(it);
  return uid;
}

std::vector<std::string> JobIdentities::Jobs() const {
  std::vector<std::string> out;
  for (const auto& [job, uid] : by_job_) out.push_back(job);
  return out;
}

StatusOr<std::shared_ptr<JobIdentities>> PrepareJobIdentities(const std::string& pool_text,
                                                              const std::string& work_dir) {
  auto range = ParseUidRange("--run-as-pool", pool_text);
  if (!range.ok()) return range.status();
  CONVOY_RETURN_IF_ERROR(CheckRangeFree("--run-as-pool", *range));
  auto ids = JobIdentities::Open(work_dir + "/identities", *range);
  if (!ids.ok()) return ids.status();
  return std::shared_ptr<JobIdentities>(std::move(*ids));
}

}  // namespace convoy
