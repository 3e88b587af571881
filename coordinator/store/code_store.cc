#include "coordinator/store/code_store.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "common/code_archive.h"
#include "common/pki.h"
#include "common/strings.h"
#include "coordinator/store/cluster_pki.h"

namespace convoy {

StatusOr<std::unique_ptr<CodeStore>> CodeStore::Open(const std::string& dir,
                                                     std::unique_ptr<CodeReplica> replica) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Internal("code store " + dir + ": " + ec.message());
  chmod(dir.c_str(), 0700);
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (HasSuffix(name, ".part")) {
      std::filesystem::remove(e.path(), ec);
    }
  }
  return std::unique_ptr<CodeStore>(new CodeStore(dir, std::move(replica)));
}

std::vector<std::string> CodeStore::Collect(const std::set<std::string>& referenced,
                                            int64_t grace_s) {
  std::vector<std::string> removed;
  const auto now = std::filesystem::file_time_type::clock::now();
  auto old = [&](const std::filesystem::path& p) {
    std::error_code ec;
    const auto t = std::filesystem::last_write_time(p, ec);
    return !ec && now - t > std::chrono::seconds(grace_s);
  };
  MutexLock lock(mu_);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    const std::string suffix = ".tar.gz";
    if (HasSuffix(name, ".part")) {
      if (old(e.path())) std::filesystem::remove(e.path(), ec);
      continue;
    }
    if (!HasSuffix(name, suffix)) continue;
    const std::string sha = name.substr(0, name.size() - suffix.size());
    if (!IsSha256Hex(sha) || referenced.count(sha) != 0 || !old(e.path())) continue;
    // The owners file goes first: an archive without owners is one nobody may name.
    std::filesystem::remove(OwnersOf(sha), ec);
    std::filesystem::remove(e.path(), ec);
    if (replica_ && !replica_->Remove(sha).ok()) continue;  // next time (List below)
    removed.push_back(sha);
  }
  if (replica_) {
    // Archives uploaded to an earlier leader and never asked for here.
    auto listed = replica_->List();
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    const std::vector<std::pair<std::string, int64_t>> none;
    for (const auto& [sha, stored_s] : listed.ok() ? *listed : none) {
      if (referenced.count(sha) != 0 || now_s - stored_s <= grace_s ||
          access(PathOf(sha).c_str(), F_OK) == 0) {
        continue;
      }
      if (replica_->Remove(sha).ok()) removed.push_back(sha);
    }
  }
  return removed;
}

bool CodeStore::PresentLocked(const std::string& sha256) {
  if (access(PathOf(sha256).c_str(), R_OK) == 0) return true;
  if (!replica_) return false;
  std::string bytes;
  std::vector<std::string> owners;
  if (Status got = replica_->Get(sha256, &bytes, &owners); !got.ok()) {
    if (got.code() != StatusCode::kNotFound) {
      spdlog::warn("code archive {}: cannot restore it from the store: {}", sha256, got.message());
    }
    return false;
  }
  std::string lines;
  for (const std::string& o : owners) lines += o + "\n";
  // The archive before its owners: one without owners is one nobody may name.
  if (!WriteFileAtomically(PathOf(sha256), bytes, 0600).ok() ||
      !WriteFileAtomically(OwnersOf(sha256), lines, 0600).ok()) {
    spdlog::warn("code archive {}: cannot write the copy restored from the store", sha256);
    return false;
  }
  spdlog::info("code archive {} ({} bytes) restored from the store", sha256, bytes.size());
  return true;
}

std::vector<std::string> CodeStore::OwnersLocked(const std::string& sha256) {
  std::vector<std::string> owners;
  std::ifstream in(OwnersOf(sha256));
  for (std::string line; std::getline(in, line);) owners.push_back(line);
  return owners;
}

bool CodeStore::Has(const std::string& sha256) {
  if (!IsSha256Hex(sha256)) return false;
  MutexLock lock(mu_);
  return PresentLocked(sha256);
}

bool CodeStore::OwnedBy(const std::string& sha256, const std::string& user) {
  if (!IsSha256Hex(sha256)) return false;
  MutexLock lock(mu_);
  return PresentLocked(sha256) && OwnedByLocked(sha256, user);
}

int CodeStore::CountOwnedBy(const std::string& user) {
  MutexLock lock(mu_);
  int n = 0;
  std::error_code ec;
  const std::string suffix = ".tar.gz";
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (!HasSuffix(name, suffix)) continue;
    const std::string sha = name.substr(0, name.size() - suffix.size());
    if (IsSha256Hex(sha) && OwnedByLocked(sha, user)) ++n;
  }
  return n;
}

bool CodeStore::OwnedByLocked(const std::string& sha256, const std::string& user) {
  std::ifstream in(OwnersOf(sha256));
  std::string line;
  while (std::getline(in, line)) {
    if (line == user) return true;
  }
  return false;
}

Status CodeStore::AddOwnerLocked(const std::string& sha256, const std::string& user) {
  if (OwnedByLocked(sha256, user)) return Status::Ok();
  const std::string path = OwnersOf(sha256);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const std::string line = user + "\n";
  const bool ok =
      fd >= 0 && write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) close(fd);
  if (!ok) return Status::Internal("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

StatusOr<CodeStore::Progress> CodeStore::Append(const std::string& sha256, int64_t total_size,
                                                int64_t offset, const std::string& data,
                                                const std::string& uploader) {
  std::promise<StatusOr<Progress>> answer;
  Append(sha256, total_size, offset, data, uploader,
         [&answer](StatusOr<Progress> progress) { answer.set_value(std::move(progress)); });
  return answer.get_future().get();
}

void CodeStore::Append(const std::string& sha256, int64_t total_size, int64_t offset,
                       const std::string& data, const std::string& uploader, AppendFn done) {
  if (!IsSha256Hex(sha256)) {
    return done(Status::InvalidArgument("sha256: want 64 lower-case hex digits"));
  }
  if (total_size < 1 || total_size > kMaxCodeArchiveBytes) {
    return done(Status::InvalidArgument("total_size: " + std::to_string(total_size) +
                                        " bytes; a code archive is at most 100 MB"));
  }
  if (uploader.find('\n') != std::string::npos) {
    return done(Status::InvalidArgument("uploader: a name has no line break"));
  }
  std::string whole;  // the upload's name while it is completed
  {
    MutexLock lock(mu_);
    const std::string stored_path = PathOf(sha256);
    // The replica is asked once per upload, at its first chunk (which restores a stored
    // archive to this disk); the chunks after it look here only.
    const bool stored =
        offset == 0 ? PresentLocked(sha256) : access(stored_path.c_str(), R_OK) == 0;
    if (stored && OwnedByLocked(sha256, uploader)) {
      utimensat(AT_FDCWD, stored_path.c_str(), nullptr, 0);  // uploaded again: Collect's grace
      return done(Progress{total_size, true});
    }
    const std::string part =
        dir_ + "/" + sha256 + "." + Sha256Hex(uploader).substr(0, 16) + ".part";
    struct stat st {};
    const int64_t have = stat(part.c_str(), &st) == 0 ? st.st_size : 0;
    if (offset != 0 && offset != have) {
      return done(Status::InvalidArgument("offset " + std::to_string(offset) +
                                          ": the coordinator has " + std::to_string(have) +
                                          " bytes of this archive"));
    }
    if (offset + static_cast<int64_t>(data.size()) > total_size) {
      return done(Status::InvalidArgument("chunk goes past total_size"));
    }
    const int fd = open(part.c_str(),
                        O_WRONLY | O_CREAT | O_CLOEXEC | (offset == 0 ? O_TRUNC : O_APPEND), 0600);
    if (fd < 0) return done(Status::Internal("cannot write " + part + ": " + std::strerror(errno)));
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = write(fd, data.data() + off, data.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fd);
    if (off != data.size()) {
      return done(Status::Internal("cannot write " + part + ": " + std::strerror(errno)));
    }
    const int64_t received = offset + static_cast<int64_t>(data.size());
    if (received < total_size) return done(Progress{received, false});
    // The whole upload, under a name of its own (still a .part, which Open and Collect
    // remove when left behind): a new upload of the same uploader starts a new .part.
    whole = part.substr(0, part.size() - 5) + "." + std::to_string(++completions_) + ".part";
    if (rename(part.c_str(), whole.c_str()) != 0) {
      return done(Status::Internal("cannot store " + part + ": " + std::strerror(errno)));
    }
    if (stored) utimensat(AT_FDCWD, stored_path.c_str(), nullptr, 0);  // Collect's grace anew
  }
  completer_.Post([this, sha256, total_size, whole, uploader, done = std::move(done)] {
    done(Complete(sha256, total_size, whole, uploader));
  });
}

StatusOr<CodeStore::Progress> CodeStore::Complete(const std::string& sha256, int64_t total_size,
                                                  const std::string& whole,
                                                  const std::string& uploader) {
  std::string bytes;
  {
    std::ifstream f(whole, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    bytes = s.str();
  }
  if (Sha256Hex(bytes) != sha256) {
    unlink(whole.c_str());
    return Status::InvalidArgument("the archive's bytes do not hash to " + sha256);
  }
  if (replica_) {
    // Kept there before it is acknowledged: the next leader has it. Completions run one at
    // a time on this thread, and only they add owners: the list read here is the one to keep.
    std::vector<std::string> owners;
    {
      MutexLock lock(mu_);
      if (access(PathOf(sha256).c_str(), R_OK) == 0) owners = OwnersLocked(sha256);
    }
    if (std::find(owners.begin(), owners.end(), uploader) == owners.end()) {
      owners.push_back(uploader);
    }
    if (Status put = replica_->Put(sha256, bytes, owners); !put.ok()) {
      unlink(whole.c_str());
      return Status::Unavailable("code archive " + sha256 + " not kept (" + put.message() +
                                 "); upload it again");
    }
  }
  MutexLock lock(mu_);
  const std::string stored_path = PathOf(sha256);
  if (access(stored_path.c_str(), R_OK) == 0) {
    unlink(whole.c_str());  // the same bytes are there: they proved they have them
    utimensat(AT_FDCWD, stored_path.c_str(), nullptr, 0);
  } else if (rename(whole.c_str(), stored_path.c_str()) != 0) {
    return Status::Internal("cannot store " + stored_path + ": " + std::strerror(errno));
  }
  CONVOY_RETURN_IF_ERROR(AddOwnerLocked(sha256, uploader));
  return Progress{total_size, true};
}

StatusOr<std::string> CodeStore::Read(const std::string& sha256, int64_t offset, int64_t max_bytes,
                                      int64_t* total_size) {
  if (!IsSha256Hex(sha256)) return Status::InvalidArgument("sha256: want 64 lower-case hex digits");
  MutexLock lock(mu_);
  if (!PresentLocked(sha256)) return Status::NotFound("no code archive " + sha256);
  const int fd = open(PathOf(sha256).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("no code archive " + sha256);
  struct stat st {};
  fstat(fd, &st);
  *total_size = st.st_size;
  if (offset < 0 || offset > st.st_size) {
    close(fd);
    return Status::InvalidArgument("offset " + std::to_string(offset) + " is past the end");
  }
  std::string out(static_cast<size_t>(std::min<int64_t>(max_bytes, st.st_size - offset)), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n =
        pread(fd, out.data() + got, out.size() - got, offset + static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(got);
  return out;
}

}  // namespace convoy
