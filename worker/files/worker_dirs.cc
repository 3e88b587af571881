#include "worker/files/worker_dirs.h"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/strings.h"

namespace convoy {

void MakeWorkerDir(const std::string& dir, bool searchable) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    spdlog::warn("cannot create {}: {}", dir, ec.message());
    return;
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return;
  const mode_t want = searchable ? 0711 : 0700;
  if ((st.st_mode & 07777) != want) chmod(dir.c_str(), want);
}

int RemoveStaleSockets(const std::string& run_dir) {
  int removed = 0;
  if (DIR* d = opendir(run_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (HasSuffix(name, ".sock") && unlinkat(dirfd(d), e->d_name, 0) == 0) ++removed;
    }
    closedir(d);
  }
  return removed;
}

}  // namespace convoy
