#include "worker/link/code_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "common/code_archive.h"
#include "common/pki.h"
#include "common/strings.h"

namespace convoy {

Status FetchCodeArchive(v1::WorkerService::Stub& stub, const std::string& work_dir,
                        const std::string& sha256) {
  if (!IsSha256Hex(sha256)) return Status::InvalidArgument("code_sha256: not a SHA-256");
  const std::string path = CodeArchivePath(work_dir, sha256);
  if (access(path.c_str(), R_OK) == 0) {
    utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // used now: kept another idle period
    return Status::Ok();
  }
  const std::string dir = work_dir + "/code";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  chmod(dir.c_str(), 0700);
  std::string archive;
  int64_t total = -1;
  while (total < 0 || static_cast<int64_t>(archive.size()) < total) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::FetchCodeRequest req;
    req.set_sha256(sha256);
    req.set_offset(static_cast<int64_t>(archive.size()));
    v1::CodeChunk chunk;
    const grpc::Status st = stub.FetchCode(&ctx, req, &chunk);
    if (!st.ok()) return Status::Unavailable("FetchCode: " + st.error_message());
    total = chunk.total_size();
    if (total > kMaxCodeArchiveBytes) return Status::InvalidArgument("code archive too large");
    if (chunk.data().empty() && static_cast<int64_t>(archive.size()) < total) {
      return Status::Unavailable("FetchCode: no progress");
    }
    archive += chunk.data();
  }
  if (Sha256Hex(archive) != sha256) {
    return Status::InvalidArgument("the fetched archive does not hash to " + sha256);
  }
  const std::string part = path + ".part";
  FILE* f = std::fopen(part.c_str(), "wb");
  if (f == nullptr) return Status::Internal("cannot write " + part);
  fchmod(fileno(f), 0600);
  const bool ok = std::fwrite(archive.data(), 1, archive.size(), f) == archive.size();
  if (std::fclose(f) != 0 || !ok || std::rename(part.c_str(), path.c_str()) != 0) {
    return Status::Internal("cannot write " + path);
  }
  CollectCodeCache(work_dir, kCodeCacheIdleS, false);
  return Status::Ok();
}

int CollectCodeCache(const std::string& work_dir, int64_t max_idle_s, bool at_start) {
  namespace fs = std::filesystem;
  const auto now = fs::file_time_type::clock::now();
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(work_dir + "/code", ec)) {
    const std::string name = e.path().filename().string();
    const bool part = HasSuffix(name, ".part");
    const bool archive = HasSuffix(name, ".tar.gz");
    if (!part && !archive) continue;
    std::error_code tec;
    const auto t = fs::last_write_time(e.path(), tec);
    const bool idle = !tec && now - t > std::chrono::seconds(max_idle_s);
    if ((part && (at_start || idle)) || (archive && idle)) {
      std::error_code rec;
      if (fs::remove(e.path(), rec) && archive) ++removed;
    }
  }
  return removed;
}

}  // namespace convoy
