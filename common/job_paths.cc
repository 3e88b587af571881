#include "common/job_paths.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/util.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;

std::string StripTrailingSlashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

std::string JobDirName(const std::string& job_id, const std::string& job_uid) {
  return IsHexId(job_uid) ? job_id + "-" + job_uid : job_id;
}

bool HasDotDotComponent(const std::string& path) {
  for (const std::string& c : Components(path)) {
    if (c == "..") return true;
  }
  return false;
}

bool IsPathUnder(const std::string& path, const std::string& root) {
  if (root.empty() || path.compare(0, root.size(), root) != 0) return false;
  return path.size() == root.size() || root == "/" || path[root.size()] == '/';
}

StatusOr<std::string> CanonicalPath(const std::string& dir) {
  std::error_code ec;
  const fs::path abs = fs::absolute(dir, ec);
  if (ec) return Status::InvalidArgument(dir + ": " + ec.message());
  const fs::path canonical = fs::weakly_canonical(abs, ec);
  if (ec) return Status::InvalidArgument(dir + ": " + ec.message());
  return StripTrailingSlashes(canonical.lexically_normal().string());
}

StatusOr<std::string> PrepareRoot(const std::string& flag, const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument(flag + ": must not be empty");
  auto abs = CanonicalPath(dir);
  if (!abs.ok()) return Status::InvalidArgument(flag + " " + abs.status().message());
  // Create the missing directories one by one, so that each gets 0711 whatever the umask:
  // ranks of another user can reach their job directories below, nobody can list them. Each
  // is made under a temporary name, given its mode, then renamed into place, so that another
  // daemon making the same root at the same time never sees it with the umask's mode.
  std::string sofar;
  for (const std::string& c : Components(*abs)) {
    const std::string parent = sofar.empty() ? "/" : sofar;
    sofar += "/" + c;
    struct stat existing {};
    if (stat(sofar.c_str(), &existing) == 0) continue;
    std::string tmp = parent + (parent == "/" ? "" : "/") + "." + c + ".convoy-XXXXXX";
    if (mkdtemp(tmp.data()) == nullptr) {
      if (errno == EEXIST) continue;
      return Status::InvalidArgument(flag + " " + dir + ": cannot create " + sofar + ": " +
                                     Errno(errno));
    }
    chmod(tmp.c_str(), 0711);
    if (rename(tmp.c_str(), sofar.c_str()) != 0) {
      const int err = errno;
      rmdir(tmp.c_str());
      if (err == EEXIST || err == ENOTEMPTY) continue;  // made meanwhile by someone else
      return Status::InvalidArgument(flag + " " + dir + ": cannot create " + sofar + ": " +
                                     Errno(err));
    }
  }
  struct stat st {};
  if (stat(abs->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(flag + " " + dir + ": not a directory");
  }
  if (access(abs->c_str(), W_OK | X_OK) != 0) {
    return Status::InvalidArgument(
        flag + " " + dir + ": the worker (uid " + std::to_string(geteuid()) +
        ") cannot create directories in it: " + Errno(errno) + "; pass " + flag + " DIR");
  }
  return CanonicalPath(*abs);  // the created part may have been reached through a symlink
}

StatusOr<std::string> ResolveJobPath(const std::string& field, const std::string& value,
                                     const std::string& job_dir, const std::string& job_root,
                                     const std::vector<std::string>& extra_roots,
                                     const std::string& root_name) {
  if (value.empty()) return Status::InvalidArgument(field + ": is empty");
  if (HasDotDotComponent(value)) {
    return Status::InvalidArgument(field + ": '" + value + "' must not contain '..'");
  }
  fs::path p(value);
  if (p.is_relative()) p = fs::path(job_dir) / p;
  const std::string shown = StripTrailingSlashes(p.lexically_normal().string());
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(shown, ec);
  if (ec) return Status::InvalidArgument(field + ": cannot resolve " + shown + ": " + ec.message());
  const std::string resolved = StripTrailingSlashes(canonical.lexically_normal().string());
  if (IsPathUnder(resolved, job_root)) return resolved;
  for (const std::string& root : extra_roots) {
    if (IsPathUnder(resolved, root)) return resolved;
  }
  std::string msg = field + ": " + shown;
  msg += resolved != shown ? " resolves to " + resolved + ", outside" : " is outside";
  msg += " " + root_name + " " + job_root;
  if (!extra_roots.empty()) {
    const bool data = root_name == "the job root";
    msg += extra_roots.size() == 1 ? (data ? " and the data path " : " and the shared path ")
                                   : (data ? " and the data paths " : " and the shared paths ");
    for (size_t i = 0; i < extra_roots.size(); ++i) msg += (i > 0 ? ", " : "") + extra_roots[i];
  }
  return Status::InvalidArgument(msg);
}

namespace {

// Creates `name` in the directory `parent_fd` with `mode` and owner `uid`:`gid` (uid < 0: the
// caller's) so that it appears under its name only once it has both. An existing entry is
// left as it is (the caller opens it with O_NOFOLLOW). Another worker on a shared job root may
// create the same directory at the same moment; it must never see, and hand to its ranks, a
// directory that still belongs to root (CI saw a rank's chdir refused so). The directory is made
// under a temporary name and renamed into place without replacing; whoever loses the race removes
// its own and uses the winner's. Returns 1 if created, 0 if it existed, -1 with errno on failure.
int MakeOwnedDirAt(int parent_fd, const std::string& name, mode_t mode, int64_t uid, int64_t gid) {
  struct stat st {};
  if (fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return 0;
  if (errno != ENOENT) return -1;
  const std::string tmp = "." + name + ".new-" + RandomHexId();
  if (mkdirat(parent_fd, tmp.c_str(), 0700) != 0) return -1;
  const int fd = openat(parent_fd, tmp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  // The mode first, while it is still ours: a worker without CAP_FOWNER (the shipped systemd
  // unit) cannot change the mode of a directory it gave away.
  bool ok = fd >= 0 && fchmod(fd, mode) == 0 &&
            (uid < 0 || fchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) == 0);
  int err = errno;
  if (fd >= 0) close(fd);
  int result = 1;
  if (ok && renameat2(parent_fd, tmp.c_str(), parent_fd, name.c_str(), RENAME_NOREPLACE) != 0) {
    err = errno;
    if (err == EEXIST) {
      result = 0;  // another worker made it first: use theirs
    } else if (err == EINVAL) {
      // The file system has no RENAME_NOREPLACE (some network file systems). A plain rename
      // would replace an empty directory another worker made a moment ago, so look first;
      // the window left is as small as such a file system allows.
      if (fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        result = 0;
      } else if (renameat(parent_fd, tmp.c_str(), parent_fd, name.c_str()) != 0) {
        err = errno;
        if (err == ENOTEMPTY || err == EEXIST) {
          result = 0;
        } else {
          ok = false;
        }
      }
    } else {
      ok = false;
    }
  }
  if (!ok || result == 0) unlinkat(parent_fd, tmp.c_str(), AT_REMOVEDIR);
  if (!ok) {
    errno = err;
    return -1;
  }
  return result;
}

}  // namespace

Status MakeJobDirs(const std::string& root, const std::string& path, int64_t uid, int64_t gid,
                   mode_t mode) {
  if (!IsPathUnder(path, root)) {
    return Status::InvalidArgument(path + " is not under " + root);
  }
  int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open " + root + ": " + Errno(errno));
  std::string sofar = root == "/" ? "" : root;
  for (const std::string& c : Components(path.substr(root.size()))) {
    sofar += "/" + c;
    const int made = MakeOwnedDirAt(fd, c, mode, uid, gid);
    if (made < 0) {
      const int err = errno;
      close(fd);
      return Status::Internal("cannot create " + sofar +
                              (uid >= 0 ? " for uid " + std::to_string(uid) : "") + ": " +
                              Errno(err));
    }
    const int next = openat(fd, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    close(fd);
    if (next < 0) {
      return Status::Internal(
          "cannot open " + sofar + ": " +
          (err == ELOOP || err == ENOTDIR ? "a symbolic link or not a directory" : Errno(err)));
    }
    fd = next;
  }
  close(fd);
  return Status::Ok();
}

StatusOr<JobDirs> PrepareJobDirs(const std::string& job_root,
                                 const std::vector<std::string>& data_paths,
                                 const std::string& job_id, const std::string& checkpoint_dir,
                                 const std::string& working_dir, const std::string& data_dir,
                                 int64_t uid, int64_t gid,
                                 const std::vector<std::string>& shared_paths) {
  if (job_id.empty() || job_id.find('/') != std::string::npos || job_id == "." || job_id == "..") {
    return Status::InvalidArgument("invalid job id '" + job_id + "'");
  }
  JobDirs d;
  d.job_dir = (job_root == "/" ? "" : job_root) + "/" + job_id;
  d.checkpoint_dir = d.job_dir + "/checkpoints";
  d.working_dir = d.job_dir;
  // Its own directory (or a shared path): never another job's, nor the job root itself.
  std::string checkpoint_root = job_root;
  if (!checkpoint_dir.empty()) {
    auto p = ResolveJobPath("checkpoint_dir", checkpoint_dir, d.job_dir, d.job_dir, shared_paths,
                            "the job's own directory");
    if (!p.ok()) return p.status();
    d.checkpoint_dir = *p;
    for (const std::string& shared : shared_paths) {
      if (!IsPathUnder(d.checkpoint_dir, d.job_dir) && IsPathUnder(d.checkpoint_dir, shared)) {
        checkpoint_root = shared;
      }
    }
  }
  if (!working_dir.empty()) {
    auto p = ResolveJobPath("working_dir", working_dir, d.job_dir, d.job_dir, shared_paths,
                            "the job's own directory");
    if (!p.ok()) return p.status();
    d.working_dir = *p;
  }
  if (!data_dir.empty()) {
    auto p = ResolveJobPath("trainer.data_dir", data_dir, d.job_dir, job_root, data_paths);
    if (!p.ok()) return p.status();
    d.data_dir = *p;
  }
  Status made = MakeJobDirs(job_root, d.job_dir, uid, gid, 0700);
  if (!made.ok()) return Status::Internal("job directory: " + made.message());
  made = MakeJobDirs(checkpoint_root, d.checkpoint_dir, uid, gid, 0700);
  if (!made.ok()) return Status::Internal("checkpoint_dir: " + made.message());
  return d;
}

std::string FirstUnsearchableDir(const std::string& path, uid_t uid, gid_t gid) {
  if (uid == 0) return "";
  std::string sofar;
  std::vector<std::string> dirs{"/"};
  for (const std::string& c : Components(path)) {
    sofar += "/" + c;
    dirs.push_back(sofar);
  }
  for (const std::string& d : dirs) {
    struct stat st {};
    if (stat(d.c_str(), &st) != 0) return "";  // not there yet: nothing to say
    const mode_t bit = st.st_uid == uid ? S_IXUSR : st.st_gid == gid ? S_IXGRP : S_IXOTH;
    if ((st.st_mode & bit) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return d + " (owner " + std::to_string(st.st_uid) + ", mode " + mode + ")";
    }
  }
  return "";
}

}  // namespace convoy
