#include "worker/files/checkpoint_copy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/rank_contract.h"

namespace convoy {

StatusOr<std::string> CopyCheckpoints(const std::string& from, const std::string& to, int64_t uid,
                                      int64_t gid) {
  struct stat st {};
  if (lstat(to.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return Status::Internal(to + ": not a directory");
    return to;
  }
  // None here (it ran on another worker, without a shared job root): an empty copy, and the
  // trainer says it found no checkpoint there, as it would in `from`.
  DIR* d = opendir(from.c_str());
  if (d == nullptr && errno != ENOENT) {
    return Status::NotFound("cannot read its checkpoints in " + from + ": " + strerror(errno));
  }
  const std::string tmp = to + ".tmp";
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  if (mkdir(tmp.c_str(), 0700) != 0) {
    if (d != nullptr) closedir(d);
    return Status::Internal("cannot create " + tmp + ": " + strerror(errno));
  }
  Status result = Status::Ok();
  int copied = 0;
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    const std::string name = e->d_name;
    if (!rank_contract::IsCheckpointName(name)) continue;
    const int in = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat fst {};
    if (in < 0 || fstat(in, &fst) != 0 || !S_ISREG(fst.st_mode)) {
      if (in >= 0) close(in);
      continue;
    }
    const std::string dst = tmp + "/" + name;
    const int out = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = out >= 0;
    char buf[1 << 16];
    ssize_t n = 0;
    while (ok && (n = read(in, buf, sizeof(buf))) > 0) {
      ok = write(out, buf, static_cast<size_t>(n)) == n;
    }
    ok = ok && n == 0 &&
         (uid < 0 || fchown(out, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) == 0);
    close(in);
    if (out >= 0) close(out);
    if (!ok) {
      result = Status::Internal("cannot copy " + from + "/" + name + " to " + dst);
      break;
    }
    ++copied;
  }
  if (d != nullptr) closedir(d);
  if (result.ok() && uid >= 0 &&
      chown(tmp.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0) {
    result = Status::Internal("cannot give " + tmp + " to uid " + std::to_string(uid));
  }
  if (result.ok() && rename(tmp.c_str(), to.c_str()) != 0) {
    result = Status::Internal("cannot rename " + tmp + ": " + strerror(errno));
  }
  if (!result.ok()) {
    std::filesystem::remove_all(tmp, ec);
    return result;
  }
  spdlog::info("copied {} checkpoint(s) of {} into {}", copied, from, to);
  return to;
}

}  // namespace convoy
