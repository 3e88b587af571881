#include "worker/host/users.h"

#include <errno.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace convoy {

StatusOr<RunAsUser> LookupUser(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("empty user name");
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  int err = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (found == nullptr && err == 0 && name.find_first_not_of("0123456789") == std::string::npos &&
      name.size() < 10) {
    err = getpwuid_r(static_cast<uid_t>(std::strtoul(name.c_str(), nullptr, 10)), &pw, buf.data(),
                     buf.size(), &found);
  }
  if (found == nullptr) {
    return Status::NotFound("no user '" + name + "'" +
                            (err != 0 ? std::string(" (") + strerror(err) + ")" : ""));
  }
  return RunAsUser{pw.pw_uid, pw.pw_gid, pw.pw_name, pw.pw_dir != nullptr ? pw.pw_dir : "/"};
}

StatusOr<RunAsUser> OwnerAccount(const std::string& owner, const std::string& worker) {
  if (owner.empty()) {
    return Status::FailedPrecondition(
        "--run-as owner: the job has no owner (its coordinator is --insecure); run such jobs "
        "on a worker with --run-as pool");
  }
  if (owner.find_first_not_of("0123456789") == std::string::npos) {
    return Status::FailedPrecondition("--run-as owner: job owner '" + owner +
                                      "' is a number, never taken for a uid");
  }
  auto user = LookupUser(owner);
  if (!user.ok()) {
    return Status::FailedPrecondition("--run-as owner: job owner '" + owner +
                                      "' has no account on worker " + worker +
                                      " (create it, e.g. `useradd " + owner +
                                      "`, or run the job where workers use --run-as pool)");
  }
  if (user->uid == 0 || user->gid == 0) {
    return Status::FailedPrecondition("--run-as owner: job owner '" + owner + "' maps to uid " +
                                      std::to_string(user->uid) + ", gid " +
                                      std::to_string(user->gid) + ": jobs never run as root");
  }
  return user;
}

void GiveToUser(const std::optional<RunAsUser>& user, const std::string& path,
                bool parent_searchable) {
  if (!user) return;
  if (lchown(path.c_str(), user->uid, user->gid) != 0) {
    spdlog::warn("cannot give {} to uid {}: {}", path, user->uid, strerror(errno));
  }
  if (!parent_searchable) return;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  struct stat st {};
  if (lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
      (st.st_mode & 0111) != 0111) {
    chmod(dir.c_str(), (st.st_mode & 07777) | 0111);
  }
}

StatusOr<std::optional<RunAsUser>> ResolveRankUser(const std::string& run_as, bool allow_root,
                                                   uid_t euid) {
  if (euid != 0) return std::optional<RunAsUser>();
  auto user = LookupUser(run_as);
  if (!user.ok()) {
    return Status::InvalidArgument(
        "--run-as " + run_as + ": " + user.status().message() +
        ": the worker runs as root and runs jobs as this user; create it with `useradd "
        "--system --no-create-home --shell /usr/sbin/nologin " +
        run_as + "`, or pass --run-as USER");
  }
  if (user->uid == 0 && !allow_root) {
    return Status::InvalidArgument("--run-as " + run_as +
                                   " is uid 0: jobs would run as root; name an unprivileged "
                                   "user, or pass --allow-root-jobs if you really mean it");
  }
  return std::optional<RunAsUser>(*user);
}

}  // namespace convoy
