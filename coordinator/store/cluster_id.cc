#include "coordinator/store/cluster_id.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/util.h"

namespace convoy {

StatusOr<std::string> LoadOrMakeClusterId(const std::string& state_dir, bool* made) {
  const std::string path = state_dir + "/cluster-id";
  *made = false;
  {
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      std::string id = text.str();
      while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
      if (!IsHexId(id)) {
        return Status::FailedPrecondition(path +
                                          ": not a cluster id (expected 32 lower-case hex "
                                          "characters); restore it from a backup of this state "
                                          "directory");
      }
      return id;
    }
  }
  const std::string id = RandomHexId();
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Internal(tmp + ": " + std::strerror(errno));
  const std::string line = id + "\n";
  const bool wrote =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!wrote || rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(wrote ? errno : err);
    unlink(tmp.c_str());
    return Status::Internal(path + ": " + why);
  }
  *made = true;
  return id;
}

}  // namespace convoy
