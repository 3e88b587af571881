#include "worker/files/snapshot_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/util.h"
#include "worker/files/file_removal.h"

namespace convoy {
namespace {

// Makes `path` a real directory with `mode` owned by uid:gid (a symlink is refused).
Status MakeDir(const std::string& path, mode_t mode, uid_t uid, gid_t gid) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Status::Internal(path + ": " + std::strerror(errno));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::Internal(path + ": not a directory (" + std::strerror(errno) + ")");
  Status st = Status::Ok();
  struct stat sb {};
  // The mode before the owner: a worker without CAP_FOWNER (the shipped systemd unit) cannot
  // change the mode of a directory it has given away (its ranks' snapshots were then off).
  if (fstat(fd, &sb) != 0) {
    st = Status::Internal(path + ": " + std::strerror(errno));
  } else if ((sb.st_mode & 07777) != mode && fchmod(fd, mode) != 0) {
    st = Status::Internal(path + ": " + std::strerror(errno));
  } else if ((sb.st_uid != uid || sb.st_gid != gid) && fchown(fd, uid, gid) != 0) {
    st = Status::Internal(path + ": cannot give it to uid " + std::to_string(uid) + ": " +
                          std::strerror(errno));
  }
  close(fd);
  return st;
}

// The newest modification time of `dir` and the entries directly in it (unix seconds).
time_t NewestMtime(const std::string& dir) {
  struct stat sb {};
  time_t newest = stat(dir.c_str(), &sb) == 0 ? sb.st_mtime : 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (lstat((dir + "/" + name).c_str(), &sb) == 0 && sb.st_mtime > newest) {
        newest = sb.st_mtime;
      }
    }
    closedir(d);
  }
  return newest;
}

}  // namespace

bool IsSnapshotKey(const std::string& name) {
  if (name.size() == 65 && name[32] == '-') {
    return IsHexId(name.substr(0, 32)) && IsHexId(name.substr(33));
  }
  return IsValidName(name) && name != "." && name != "..";
}

std::vector<std::string> ListSnapshotKeys(const std::string& root) {
  std::vector<std::string> keys;
  if (DIR* d = opendir(root.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (IsSnapshotKey(name)) keys.push_back(name);
    }
    closedir(d);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

int64_t SnapshotDirBytes(const std::string& dir) {
  int64_t total = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      struct stat sb {};
      if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) {
        total += static_cast<int64_t>(sb.st_size);
      }
    }
    closedir(d);
  }
  return total;
}

std::string SnapshotKey(const std::string& job_id, const std::string& cluster_id,
                        const std::string& job_uid) {
  if (IsHexId(cluster_id) && IsHexId(job_uid)) return cluster_id + "-" + job_uid;
  return job_id;
}

std::string DefaultSnapshotRoot(const std::string& worker_name, const std::string& work_dir) {
  struct stat sb {};
  if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK | X_OK) == 0) {
    return "/dev/shm/convoy-" + worker_name;
  }
  return work_dir + "/snapshots";
}

StatusOr<std::string> PrepareSnapshotDir(const std::string& root, const std::string& key,
                                         const std::optional<RunAsUser>& user) {
  if (!IsSnapshotKey(key)) return Status::InvalidArgument("invalid snapshot key '" + key + "'");
  CONVOY_RETURN_IF_ERROR(MakeDir(root, 0711, geteuid(), getegid()));
  const std::string dir = root + "/" + key;
  CONVOY_RETURN_IF_ERROR(
      MakeDir(dir, 0700, user ? user->uid : geteuid(), user ? user->gid : getegid()));
  return dir;
}

Status RemoveSnapshotDir(const std::string& root, const std::string& key) {
  return RemoveUnder(root, key);
}

std::set<std::string> ExpireSnapshotDirs(const std::string& root, int64_t idle_ms,
                                         const std::set<std::string>& keep) {
  std::set<std::string> removed;
  std::vector<std::string> jobs;
  if (DIR* d = opendir(root.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && IsSnapshotKey(name) && keep.count(name) == 0) {
        jobs.push_back(name);
      }
    }
    closedir(d);
  }
  const time_t now = time(nullptr);
  for (const std::string& job : jobs) {
    if ((now - NewestMtime(root + "/" + job)) * 1000 < idle_ms) continue;
    if (RemoveUnder(root, job).ok()) removed.insert(job);
  }
  return removed;
}

}  // namespace convoy
