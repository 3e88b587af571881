#include "trainer/snapshot_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/data_cache.h"
#include "common/unique_fd.h"

namespace convoy::trainer {
namespace fs = std::filesystem;
namespace {

constexpr char kMagicLine[] = "convoy-snapshot 1";

// The header lines that the checksum covers (everything but the checksum line itself).
std::string HeaderBody(const SnapshotMeta& m, size_t bytes) {
  std::ostringstream h;
  h << kMagicLine << "\njob " << m.job;
  // Absent without a uid, so that files from before uids keep their checksums.
  if (!m.job_uid.empty()) h << "\nuid " << m.job_uid << "\ncluster " << m.cluster_id;
  h << "\nmodel " << m.model << "\nseed " << m.seed << "\nsamples " << m.samples << "\nstep "
    << m.step << "\nepoch " << m.epoch << "\nsample " << m.sample << "\nbytes " << bytes << "\n";
  return h.str();
}

uint64_t Mixed(const std::string& header, const char* payload, size_t size) {
  const uint64_t h = Checksum64(reinterpret_cast<const uint8_t*>(header.data()), header.size());
  const uint64_t p = Checksum64(reinterpret_cast<const uint8_t*>(payload), size);
  return p ^ (h * 0x9E3779B97F4A7C15ULL);
}

// "snap-000000000287.bin" -> 287; -1 for any other name.
int64_t StepOfName(const std::string& name) {
  constexpr size_t kDigits = 12;
  if (name.size() != 5 + kDigits + 4 || name.rfind("snap-", 0) != 0 ||
      name.compare(5 + kDigits, 4, ".bin") != 0) {
    return -1;
  }
  int64_t v = 0;
  for (size_t i = 5; i < 5 + kDigits; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// Snapshots in `dir` by step, newest first.
std::vector<std::pair<int64_t, std::string>> ListSnapshots(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> all;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = StepOfName(e.path().filename().string());
    if (step >= 0) all.emplace_back(step, e.path().string());
  }
  std::sort(all.rbegin(), all.rend());
  return all;
}

// A temporary ".snap-<step>.<seq>.<pid>.tmp" whose writer is gone (or that is older than 10
// minutes: a pid can be reused).
bool StaleTemporary(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  if (name.rfind(".snap-", 0) != 0 || name.size() < 5 ||
      name.compare(name.size() - 4, 4, ".tmp") != 0) {
    return false;
  }
  const size_t dot = name.rfind('.', name.size() - 5);
  const long pid = std::atol(name.c_str() + dot + 1);
  if (pid <= 0 || (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) return true;
  std::error_code ec;
  const auto age = fs::file_time_type::clock::now() - fs::last_write_time(e.path(), ec);
  return !ec && age > std::chrono::minutes(10);
}

void WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(path + ": write failed: " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string IdentityMismatch(const std::string& found_cluster, const std::string& found_uid,
                             const std::string& want_cluster, const std::string& want_uid) {
  if (want_uid.empty()) return "";  // a run by hand: no identity to check
  auto cluster = [](const std::string& id) { return id.empty() ? std::string("(none)") : id; };
  const std::string self =
      "not this job (" + want_uid + " of cluster " + cluster(want_cluster) + ")";
  if (found_uid.empty()) {
    return "it has no job identity (saved by an older version or by hand), " + self;
  }
  if (found_uid == want_uid && found_cluster == want_cluster) return "";
  return "it belongs to job " + found_uid + " of cluster " + cluster(found_cluster) + ", " + self;
}

std::string SnapshotPath(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "snap-%012lld.bin", static_cast<long long>(step));
  return dir + "/" + name;
}

std::string WriteSnapshotFile(const std::string& dir, const SnapshotMeta& meta,
                              std::string_view payload, int keep) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw std::runtime_error(dir +
                               ": cannot create the snapshot directory: " + std::strerror(errno));
    }
  }
  const std::string path = SnapshotPath(dir, meta.step);
  // The writer's own name: the periodic writer and a last will may write the same step at
  // once (the pid stays last, for StaleTemporary).
  static std::atomic<uint64_t> sequence{0};
  const std::string tmp = dir + "/.snap-" + std::to_string(meta.step) + "." +
                          std::to_string(sequence.fetch_add(1)) + "." + std::to_string(getpid()) +
                          ".tmp";
  const std::string body = HeaderBody(meta, payload.size());
  char sum[64];
  std::snprintf(sum, sizeof(sum), "checksum %016llx\n\n",
                static_cast<unsigned long long>(Mixed(body, payload.data(), payload.size())));
  const std::string header = body + sum;
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(tmp + ": cannot create: " + std::strerror(errno));
  try {
    WriteAll(fd, header.data(), header.size(), tmp);
    WriteAll(fd, payload.data(), payload.size(), tmp);
  } catch (...) {
    close(fd);
    unlink(tmp.c_str());
    throw;
  }
  fdatasync(fd);  // nothing on a tmpfs; on a disk, the rename then names whole bytes
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    unlink(tmp.c_str());
    throw std::runtime_error(path + ": rename failed: " + err);
  }
  const auto all = ListSnapshots(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) {
    fs::remove(all[i].second, ec);  // another rank may have removed it first
  }
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (StaleTemporary(e)) fs::remove(e.path(), ec);
  }
  return path;
}

bool ParseSnapshot(std::string_view bytes, FoundSnapshot* out, std::string* why) {
  const size_t end = bytes.find("\n\n");
  if (bytes.rfind(std::string(kMagicLine) + "\n", 0) != 0) {
    *why = "not a snapshot (no '" + std::string(kMagicLine) + "' line)";
    return false;
  }
  if (end == std::string::npos || end > 4096) {
    *why = "truncated header";
    return false;
  }
  std::map<std::string, std::string> kv;
  std::istringstream in(std::string(bytes.substr(0, end + 1)));
  std::string line;
  std::getline(in, line);  // the magic line
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    kv[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  SnapshotMeta m;
  size_t size = 0;
  unsigned long long checksum = 0;
  try {
    for (const char* key :
         {"job", "model", "seed", "samples", "step", "epoch", "sample", "bytes", "checksum"}) {
      if (kv.count(key) == 0) {
        *why = std::string("no '") + key + "' in the header";
        return false;
      }
    }
    m.job = kv["job"];
    m.job_uid = kv.count("uid") ? kv["uid"] : "";
    m.cluster_id = kv.count("cluster") ? kv["cluster"] : "";
    m.model = kv["model"];
    m.seed = std::stoll(kv["seed"]);
    m.samples = std::stoll(kv["samples"]);
    m.step = std::stoll(kv["step"]);
    m.epoch = std::stoll(kv["epoch"]);
    m.sample = std::stoll(kv["sample"]);
    size = static_cast<size_t>(std::stoull(kv["bytes"]));
    checksum = std::stoull(kv["checksum"], nullptr, 16);
  } catch (const std::exception&) {
    *why = "a header field is not a number";
    return false;
  }
  const size_t start = end + 2;
  if (bytes.size() != start + size) {
    *why = "truncated: " + std::to_string(bytes.size() - start) + " of " + std::to_string(size) +
           " payload bytes";
    return false;
  }
  if (Mixed(HeaderBody(m, size), bytes.data() + start, size) != checksum) {
    *why = "checksum mismatch";
    return false;
  }
  out->meta = m;
  out->payload = bytes.substr(start);
  return true;
}

namespace {

// The whole file at `path`, mapped; null when it cannot be opened or mapped.
std::shared_ptr<const Bytes> MapWholeFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (fd.fd < 0 || fstat(fd.fd, &st) != 0) return nullptr;
  return MapReadOnly(fd.fd, static_cast<size_t>(st.st_size));
}

}  // namespace

std::optional<FoundSnapshot> ReadNewestSnapshot(const std::string& dir, const SnapshotMeta& want) {
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return std::nullopt;
  for (const auto& [step, path] : ListSnapshots(dir)) {
    auto file = MapWholeFile(path);
    if (file == nullptr) continue;  // pruned by another rank meanwhile
    FoundSnapshot found;
    found.file = file;
    std::string why;
    if (!ParseSnapshot({reinterpret_cast<const char*>(file->data()), file->size()}, &found, &why)) {
      std::cerr << "warning: skipping snapshot " << path << ": " << why << std::endl;
      continue;
    }
    const SnapshotMeta& m = found.meta;
    const std::string foreign =
        IdentityMismatch(m.cluster_id, m.job_uid, want.cluster_id, want.job_uid);
    if (!foreign.empty()) {
      // One write: the rank log interleaves stdout and stderr by the chunk the worker reads.
      std::cerr << ("not resuming from " + path + ": " + foreign + "\n") << std::flush;
      continue;
    }
    if (m.job != want.job || m.model != want.model || m.seed != want.seed ||
        m.samples != want.samples || m.step != step) {
      std::cerr << "warning: skipping snapshot " << path << ": another job's or run's (job '"
                << m.job << "', model " << m.model << ", seed " << m.seed << ", " << m.samples
                << " samples, step " << m.step << "; this run: job '" << want.job << "', model "
                << want.model << ", seed " << want.seed << ", " << want.samples << " samples)"
                << std::endl;
      continue;
    }
    found.path = path;
    return found;
  }
  return std::nullopt;
}

bool ReadWholeFile(const std::string& path, std::string* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = fstat(fd, &st) == 0;
  if (ok) {
    out->resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (ok && done < out->size()) {
      const ssize_t n = read(fd, out->data() + done, out->size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) done += static_cast<size_t>(n);
    }
  }
  close(fd);
  return ok;
}

}  // namespace convoy::trainer
