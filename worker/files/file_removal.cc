#include "worker/files/file_removal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>
#include "common/strings.h"

namespace convoy {
namespace {

// Deeper trees than this are refused (one descriptor is open per level).
constexpr int kMaxDepth = 256;

// Removes the entry `name` of the directory `dir_fd` (shown as `path` in errors).
Status RemoveAt(int dir_fd, const std::string& name, const std::string& path, int depth,
                int64_t* removed) {
  struct stat st {};
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : Status::Internal(ErrnoText(path));
  }
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return Status::Internal(ErrnoText(path));
    }
    ++*removed;
    return Status::Ok();
  }
  if (depth >= kMaxDepth) return Status::Internal(path + ": nested too deeply");
  const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? Status::Ok() : Status::Internal(ErrnoText(path));
  // A directory a rank made read-only: writable again (ours, or we are root).
  if ((st.st_mode & S_IWUSR) == 0 || (st.st_mode & S_IXUSR) == 0) fchmod(fd, st.st_mode | S_IRWXU);
  DIR* d = fdopendir(fd);  // owns fd from here
  if (d == nullptr) {
    close(fd);
    return Status::Internal(ErrnoText(path));
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string child = e->d_name;
    if (child != "." && child != "..") names.push_back(child);
  }
  Status first;
  for (const std::string& child : names) {
    Status st_child = RemoveAt(dirfd(d), child, path + "/" + child, depth + 1, removed);
    if (!st_child.ok() && first.ok()) first = st_child;
  }
  closedir(d);
  if (!first.ok()) return first;
  if (unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return Status::Internal(ErrnoText(path));
  }
  ++*removed;
  return Status::Ok();
}

}  // namespace

Status RemoveEntryAt(int dir_fd, const std::string& name, const std::string& shown,
                     int64_t* removed) {
  int64_t count = 0;
  if (removed == nullptr) removed = &count;
  *removed = 0;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return Status::InvalidArgument("refusing to remove '" + name + "' in " + shown);
  }
  return RemoveAt(dir_fd, name, shown, 0, removed);
}

int OpenDirNoFollow(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    errno = EINVAL;
    return -1;
  }
  int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  size_t at = 1;
  while (fd >= 0 && at < path.size()) {
    size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(at, end - at);
    at = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {  // canonical paths have none
      close(fd);
      errno = EINVAL;
      return -1;
    }
    const int next = openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int saved = errno;
    close(fd);
    errno = saved;
    fd = next;
  }
  return fd;
}

Status RemoveUnder(const std::string& root, const std::string& name, int64_t* removed) {
  int64_t count = 0;
  if (removed == nullptr) removed = &count;
  *removed = 0;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      root.empty() || root[0] != '/') {
    return Status::InvalidArgument("refusing to remove '" + name + "' under '" + root + "'");
  }
  const int root_fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root_fd < 0) return errno == ENOENT ? Status::Ok() : Status::Internal(ErrnoText(root));
  Status st = RemoveAt(root_fd, name, root + "/" + name, 0, removed);
  close(root_fd);
  return st;
}

}  // namespace convoy
