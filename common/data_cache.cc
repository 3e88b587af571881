#include "common/data_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#ifdef CONVOY_DATA_CACHE_SHA256
#include <openssl/evp.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "common/unique_fd.h"

namespace convoy {
namespace {

class OwnedBytes : public Bytes {
 public:
  explicit OwnedBytes(std::string s) : s_(std::move(s)) {}
  const uint8_t* data() const override { return reinterpret_cast<const uint8_t*>(s_.data()); }
  size_t size() const override { return s_.size(); }

 private:
  const std::string s_;
};

class MappedBytes : public Bytes {
 public:
  MappedBytes(void* addr, size_t size) : addr_(addr), size_(size) {}
  ~MappedBytes() override {
    if (size_ > 0) munmap(addr_, size_);
  }
  const uint8_t* data() const override { return static_cast<const uint8_t*>(addr_); }
  size_t size() const override { return size_; }

 private:
  void* const addr_;
  const size_t size_;
};

}  // namespace

std::shared_ptr<const Bytes> MapReadOnly(int fd, size_t size) {
  if (size == 0) return std::make_shared<OwnedBytes>("");
  void* addr = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) return nullptr;
  return std::make_shared<MappedBytes>(addr, size);
}

namespace {

int64_t MtimeNs(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

// Whether an entry file may be trusted: a regular file of `owner` that neither its group nor
// others may write.
bool Trusted(const struct stat& st, uid_t owner) {
  return S_ISREG(st.st_mode) && st.st_uid == owner && (st.st_mode & 022) == 0;
}

// FNV-1a: a stable name for a source path.
std::string PathHash(const std::string& path) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : path) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// An entry's name starts with its source's file name, less `.gz`.
std::string EntryBase(const std::string& source) {
  std::string base = source.substr(source.rfind('/') + 1);
  if (base.size() > 3 && base.compare(base.size() - 3, 3, ".gz") == 0) {
    base.resize(base.size() - 3);
  }
  return base;
}

// What the sidecar records.
struct Meta {
  std::string source;
  int64_t source_size = -1;
  int64_t source_mtime_ns = -1;
  int64_t size = -1;
  int64_t mtime_ns = -1;
  uint64_t inode = 0;
  uint64_t checksum = 0;
};

constexpr const char* kMetaMagic = "convoy-data-cache 1";

std::string FormatMeta(const Meta& m) {
  std::ostringstream out;
  out << kMetaMagic << "\nsource " << m.source << "\nsource_size " << m.source_size
      << "\nsource_mtime_ns " << m.source_mtime_ns << "\nsize " << m.size << "\nmtime_ns "
      << m.mtime_ns << "\ninode " << m.inode << "\nchecksum " << std::hex << m.checksum << "\n";
  return out.str();
}

// The `key value` lines after the first line `magic` of a sidecar, each key once; false when
// the text is not such.
bool ParseFields(const std::string& text, const char* magic,
                 std::map<std::string, std::string>* fields) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != magic) return false;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) return false;
    if (!fields->emplace(line.substr(0, sp), line.substr(sp + 1)).second) return false;
  }
  return true;
}

bool ParseMeta(const std::string& text, Meta* m) {
  std::map<std::string, std::string> fields;
  if (!ParseFields(text, kMetaMagic, &fields) || fields.size() != 7) return false;
  auto number = [&](const char* key, int base, uint64_t* out) {
    auto it = fields.find(key);
    if (it == fields.end()) return false;
    char* end = nullptr;
    errno = 0;
    *out = std::strtoull(it->second.c_str(), &end, base);
    return errno == 0 && end != it->second.c_str() && *end == '\0';
  };
  uint64_t source_size, source_mtime_ns, size, mtime_ns;
  auto source = fields.find("source");
  if (source == fields.end() || !number("source_size", 10, &source_size) ||
      !number("source_mtime_ns", 10, &source_mtime_ns) || !number("size", 10, &size) ||
      !number("mtime_ns", 10, &mtime_ns) || !number("inode", 10, &m->inode) ||
      !number("checksum", 16, &m->checksum)) {
    return false;
  }
  m->source = source->second;
  m->source_size = static_cast<int64_t>(source_size);
  m->source_mtime_ns = static_cast<int64_t>(source_mtime_ns);
  m->size = static_cast<int64_t>(size);
  m->mtime_ns = static_cast<int64_t>(mtime_ns);
  return true;
}

// Reads a small file of `owner` (Trusted) opened without following a symlink; false when it
// cannot.
bool ReadSmallFile(const std::string& path, uid_t owner, std::string* out) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (fd.fd < 0 || fstat(fd.fd, &st) != 0 || !Trusted(st, owner)) return false;
  char buf[4096];
  ssize_t n;
  out->clear();
  while ((n = read(fd.fd, buf, sizeof(buf))) > 0) {
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > (64 << 10)) return false;
  }
  return n == 0;
}

bool WriteAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Whether a reader may use `dir`: a real directory of root or of this process's effective
// user that neither its group nor others may write. Returns "" and its owner in `owner`, or
// why not.
std::string TrustDir(const std::string& dir, uid_t* owner) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return ErrnoText("cannot stat " + dir);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return dir + " belongs to uid " + std::to_string(st.st_uid) + ", neither root nor uid " +
           std::to_string(geteuid());
  }
  if ((st.st_mode & 022) != 0) return dir + " may be written by others";
  *owner = st.st_uid;
  return "";
}

// The entry at `data_path` when its sidecar says it is the decompressed `source` of
// `source_size` bytes last modified at `source_mtime_ns`: mapped, and "" in `why`; else null
// and why not.
std::shared_ptr<const Bytes> OpenEntry(const std::string& data_path, const std::string& source,
                                       int64_t source_size, int64_t source_mtime_ns, uid_t owner,
                                       std::string* why) {
  std::string text;
  Meta m;
  if (!ReadSmallFile(data_path + ".meta", owner, &text)) {
    *why = "no entry";
    return nullptr;
  }
  if (!ParseMeta(text, &m)) {
    *why = "the sidecar is malformed";
    return nullptr;
  }
  if (m.source != source || m.source_size != source_size || m.source_mtime_ns != source_mtime_ns) {
    *why = "the source changed";
    return nullptr;
  }
  UniqueFd fd(open(data_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (fd.fd < 0 || fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = "the cached file is missing";
    return nullptr;
  }
  if (st.st_size != m.size) {
    *why = "the cached file is " + std::to_string(st.st_size) + " bytes, not " +
           std::to_string(m.size) + " (truncated?)";
    return nullptr;
  }
  if (MtimeNs(st) != m.mtime_ns || st.st_ino != m.inode || !Trusted(st, owner)) {
    *why = "the cached file was modified or replaced";
    return nullptr;
  }
  const std::shared_ptr<const Bytes> bytes = MapReadOnly(fd.fd, static_cast<size_t>(st.st_size));
  if (bytes == nullptr) {
    *why = "cannot map the cached file: " + ErrnoMessage();
    return nullptr;
  }
  if (Checksum64(bytes->data(), bytes->size()) != m.checksum) {
    *why = "the cached file's checksum differs";
    return nullptr;
  }
  why->clear();
  return bytes;
}

std::shared_ptr<const Bytes> OpenEntry(const std::string& data_path, const std::string& source,
                                       const struct stat& src, uid_t owner, std::string* why) {
  return OpenEntry(data_path, source, src.st_size, MtimeNs(src), owner, why);
}

// Writes `bytes`, the decompressed source that `m`'s source fields name, as a new entry at
// `data_path` (temporary names, then renames). Returns "" or why it could not.
std::string WriteEntry(const Bytes& decompressed, Meta m, const std::string& data_path) {
  const Bytes* bytes = &decompressed;
  const std::string tmp = data_path + ".tmp." + std::to_string(getpid());
  {
    unlink(tmp.c_str());
    UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.fd < 0) return ErrnoText("cannot create " + tmp);
    fchmod(fd.fd, 0644);  // whatever the umask: every rank reads it
    if (!WriteAll(fd.fd, bytes->data(), bytes->size())) {
      const std::string err = ErrnoText("cannot write " + tmp);
      unlink(tmp.c_str());
      return err;
    }
    struct stat st {};
    if (fstat(fd.fd, &st) != 0) return ErrnoText("cannot stat " + tmp);
    m.size = st.st_size;
    m.mtime_ns = MtimeNs(st);
    m.inode = st.st_ino;
    m.checksum = Checksum64(bytes->data(), bytes->size());
  }
  const std::string meta_tmp = data_path + ".meta.tmp." + std::to_string(getpid());
  {
    unlink(meta_tmp.c_str());
    UniqueFd fd(open(meta_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.fd >= 0) fchmod(fd.fd, 0644);
    const std::string text = FormatMeta(m);
    if (fd.fd < 0 || !WriteAll(fd.fd, reinterpret_cast<const uint8_t*>(text.data()), text.size())) {
      const std::string err = ErrnoText("cannot write " + meta_tmp);
      unlink(tmp.c_str());
      unlink(meta_tmp.c_str());
      return err;
    }
  }
  // Data first: a reader that sees the new sidecar finds the new data (or, racing with a
  // later rebuild, data that fails the checks and is rebuilt again).
  if (rename(tmp.c_str(), data_path.c_str()) != 0 ||
      rename(meta_tmp.c_str(), (data_path + ".meta").c_str()) != 0) {
    const std::string err = ErrnoText("cannot rename into " + data_path);
    unlink(tmp.c_str());
    unlink(meta_tmp.c_str());
    return err;
  }
  return "";
}

// Decompresses `source` into a new entry at `data_path`. Returns "" or why it could not.
std::string BuildEntry(const std::string& source, const struct stat& src,
                       const std::string& data_path) {
  Meta m;
  m.source = source;
  m.source_size = src.st_size;
  m.source_mtime_ns = MtimeNs(src);
  return WriteEntry(*ReadGzFile(source), m, data_path);
}

// Takes a shared lock on `fd`, waiting; with `while_waiting`, polls instead and calls it about
// once a second until the lock is taken. False (errno set) when it cannot be taken at all.
bool WaitShared(int fd, const std::function<void()>& while_waiting) {
  if (!while_waiting) {
    while (flock(fd, LOCK_SH) != 0) {
      if (errno != EINTR) return false;
    }
    return true;
  }
  auto next_call = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (flock(fd, LOCK_SH | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() >= next_call) {
      while_waiting();
      next_call += std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Decompresses the gzip stream (every member) of `size` bytes at `data`, named `name` in
// errors, into at most `max` bytes. Throws std::runtime_error naming it when it is not gzip,
// is truncated or corrupt, or decompresses to more than `max`.
std::shared_ptr<const Bytes> InflateGz(const uint8_t* data, size_t size, const std::string& name,
                                       size_t max) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error(name + ": zlib init");
  std::string out;
  // The last member's ISIZE: the size, modulo 2^32, for one member (a hint only).
  if (size >= 18) {
    uint32_t isize;
    std::memcpy(&isize, data + size - 4, 4);
    if (isize <= max) out.reserve(isize);
  }
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(std::min<size_t>(size, UINT_MAX));
  size_t fed = zs.avail_in;
  char buf[1 << 16];
  int rc = Z_OK;
  std::string bad;
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (out.size() > max) {
      bad = "decompresses to more than " + std::to_string(max) + " bytes";
      break;
    }
    if (zs.avail_in == 0 && fed < size) {
      const size_t more = std::min<size_t>(size - fed, UINT_MAX);
      zs.next_in = const_cast<Bytef*>(data + fed);
      zs.avail_in = static_cast<uInt>(more);
      fed += more;
    }
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0 && fed == size) break;
      if (inflateReset(&zs) != Z_OK) {
        bad = "zlib reset";
        break;
      }
      continue;  // the next member
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && fed == size) {
      bad = "truncated gzip data";
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      bad = std::string("corrupt gzip data (") + (zs.msg != nullptr ? zs.msg : "zlib error") + ")";
      break;
    }
  }
  inflateEnd(&zs);
  if (!bad.empty()) throw std::runtime_error(name + ": " + bad);
  return std::make_shared<OwnedBytes>(std::move(out));
}

// The content entry's sidecar names its source so.
std::string ContentSource(const std::string& sha256) { return "sha256:" + sha256; }

// Looks for the content entry of the source `gz_path` whose `size` bytes hash to `sha`, waiting
// while the owner fills it. Null and why not when there is none.
std::shared_ptr<const Bytes> OpenContentEntry(const std::string& gz_path, const std::string& sha,
                                              int64_t size, const std::string& cache_dir,
                                              uid_t owner,
                                              const std::function<void()>& while_waiting,
                                              std::string* note) {
  const std::string path = ContentEntryPath(cache_dir, gz_path, sha);
  std::string why;
  if (auto hit = OpenEntry(path, ContentSource(sha), size, 0, owner, &why)) {
    *note = "cache hit (by content)";
    return hit;
  }
  UniqueFd lock(open((path + ".lock").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat lst {};
  if (lock.fd < 0 || fstat(lock.fd, &lst) != 0 || !Trusted(lst, owner) ||
      !WaitShared(lock.fd, while_waiting)) {
    *note = why;
    return nullptr;
  }
  if (auto hit = OpenEntry(path, ContentSource(sha), size, 0, owner, &why)) {
    *note = "cache hit (by content, waited for the worker's fill)";
    return hit;
  }
  *note = why;
  return nullptr;
}

}  // namespace

bool ContentEntries() {
#ifdef CONVOY_DATA_CACHE_SHA256
  return true;
#else
  return false;
#endif
}

std::string Sha256OfBytes(const uint8_t* data, size_t size) {
#ifdef CONVOY_DATA_CACHE_SHA256
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, size, md, &len, EVP_sha256(), nullptr) != 1 || len != 32) {
    throw std::runtime_error("SHA-256 failed");
  }
  static const char kHex[] = "0123456789abcdef";
  std::string hex(64, '0');
  for (unsigned i = 0; i < 32; ++i) {
    hex[2 * i] = kHex[md[i] >> 4];
    hex[2 * i + 1] = kHex[md[i] & 15];
  }
  return hex;
#else
  (void)data;
  (void)size;
  throw std::runtime_error("this build has no SHA-256 (built without OpenSSL)");
#endif
}

std::string ContentEntryPath(const std::string& cache_dir, const std::string& gz_path,
                             const std::string& sha256) {
  return cache_dir + "/" + EntryBase(gz_path) + ".sha256-" + sha256;
}

std::shared_ptr<const Bytes> ReadGzFile(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot open");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  int err = 0;
  const char* msg = gzerror(f, &err);
  const bool bad = n < 0 || (err != Z_OK && err != Z_STREAM_END);
  const std::string what = bad ? msg : "";
  gzclose(f);
  if (bad) throw std::runtime_error(path + ": truncated or corrupt gzip data (" + what + ")");
  return std::make_shared<OwnedBytes>(std::move(out));
}

std::string EntryPath(const std::string& cache_dir, const std::string& source) {
  return cache_dir + "/" + EntryBase(source) + "." + PathHash(source);
}

CachedFile LoadGzCached(const std::string& gz_path, const std::string& cache_dir,
                        const std::function<void()>& while_waiting) {
  if (cache_dir.empty()) return {ReadGzFile(gz_path), "not cached (no cache directory)"};
  auto uncached = [&](const std::string& why) {
    return CachedFile{ReadGzFile(gz_path), "not cached (" + why + ")"};
  };
  char resolved[PATH_MAX];
  struct stat src {};
  if (realpath(gz_path.c_str(), resolved) == nullptr || stat(resolved, &src) != 0) {
    return uncached(ErrnoText("cannot resolve " + gz_path));  // ReadGzFile throws
  }
  const std::string source = resolved;
  uid_t owner = 0;
  const std::string why_not = TrustDir(cache_dir, &owner);
  if (!why_not.empty()) return uncached(why_not);
  const std::string data_path = EntryPath(cache_dir, source);
  std::string why;
  if (auto hit = OpenEntry(data_path, source, src, owner, &why)) return {hit, "cache hit"};
  // No entry of its path: the entry of its bytes' hash, else the file decompressed. (Not
  // when its path has an entry that fails its checks: that is a root's, which the worker
  // rebuilds.)
  auto ByContent = [&](const std::string& reason, bool path_has_entry) -> CachedFile {
    if (!ContentEntries() || path_has_entry) return uncached(reason);
    UniqueFd fd(open(source.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    std::shared_ptr<const Bytes> mapped;
    if (fd.fd < 0 || fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (mapped = MapReadOnly(fd.fd, static_cast<size_t>(st.st_size))) == nullptr) {
      return uncached(reason);  // ReadGzFile names what is wrong
    }
    // What the worker recorded it hashed to, when the file is still at the version it read;
    // else its bytes hashed here.
    std::string sha = RecordedSha256(source, cache_dir, owner);
    if (sha.empty()) sha = Sha256OfBytes(mapped->data(), mapped->size());
    std::string note;
    if (auto hit =
            OpenContentEntry(source, sha, st.st_size, cache_dir, owner, while_waiting, &note)) {
      return {hit, note};
    }
    mapped.reset();
    return CachedFile{
        ReadGzFile(gz_path),
        "not cached (" + reason + (note == "no entry" ? "" : "; by content: " + note) + ")"};
  };
  // The owner may be filling it now: wait for its lock (released when the fill ends, or
  // when the filler dies), then look again.
  UniqueFd lock(open((data_path + ".lock").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat lst {};
  if (lock.fd < 0 || fstat(lock.fd, &lst) != 0 || !Trusted(lst, owner)) {
    return ByContent(why + ": the worker has not cached it", why != "no entry");
  }
  if (!WaitShared(lock.fd, while_waiting)) {
    return uncached("cannot wait for the entry's lock: " + ErrnoMessage());
  }
  std::string why_again;
  if (auto hit = OpenEntry(data_path, source, src, owner, &why_again)) {
    return {hit, "cache hit (waited for the worker's fill)"};
  }
  return ByContent(why_again, why_again != "no entry");
}

std::string PrepareCacheDir(const std::string& dir, unsigned mode) {
  for (size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    const std::string parent = dir.substr(0, slash);
    if (mkdir(parent.c_str(), 0711) != 0 && errno != EEXIST) {
      return ErrnoText("cannot create " + parent);
    }
  }
  if (mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
    return ErrnoText("cannot create " + dir);
  }
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (fd.fd < 0 || fstat(fd.fd, &st) != 0) {
    return dir + " is not a directory (or is a symlink): " + ErrnoMessage();
  }
  if (st.st_uid != geteuid()) {
    return dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to this process's " +
           std::to_string(geteuid());
  }
  if ((st.st_mode & 07777) != mode && fchmod(fd.fd, mode) != 0) {
    return ErrnoText("cannot chmod " + dir);
  }
  return "";
}

EntryLock::~EntryLock() {
  if (fd_ >= 0) close(fd_);
}

EntryLock& EntryLock::operator=(EntryLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

namespace {

// Opens (making it, 0644) the lock file of `data_path`; -1 and `why` when it cannot.
int OpenLockFile(const std::string& data_path, std::string* why) {
  const std::string path = data_path + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    *why = ErrnoText("cannot open " + path);
    return -1;
  }
  fchmod(fd, 0644);  // readers open it to wait on it
  return fd;
}

bool ResolveSource(const std::string& gz_path, std::string* source, struct stat* src) {
  char resolved[PATH_MAX];
  if (realpath(gz_path.c_str(), resolved) == nullptr || stat(resolved, src) != 0) return false;
  *source = resolved;
  return true;
}

}  // namespace

bool EntryLooksCurrent(const std::string& gz_path, const std::string& cache_dir) {
  std::string source, text;
  struct stat src {
  }, st{};
  Meta m;
  if (!ResolveSource(gz_path, &source, &src)) return false;
  const std::string data_path = EntryPath(cache_dir, source);
  return ReadSmallFile(data_path + ".meta", geteuid(), &text) && ParseMeta(text, &m) &&
         m.source == source && m.source_size == src.st_size && m.source_mtime_ns == MtimeNs(src) &&
         lstat(data_path.c_str(), &st) == 0 && Trusted(st, geteuid()) && st.st_size == m.size &&
         MtimeNs(st) == m.mtime_ns && st.st_ino == m.inode;
}

EntryLock TryLockEntry(const std::string& gz_path, const std::string& cache_dir, std::string* why) {
  std::string source;
  struct stat src {};
  if (!ResolveSource(gz_path, &source, &src)) {
    *why = ErrnoText("cannot resolve " + gz_path);
    return EntryLock();
  }
  const int fd = OpenLockFile(EntryPath(cache_dir, source), why);
  if (fd < 0) return EntryLock();
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    *why = errno == EWOULDBLOCK ? "a fill is under way" : "cannot lock: " + ErrnoMessage();
    close(fd);
    return EntryLock();
  }
  return EntryLock(fd);
}

std::string FillGzEntry(const std::string& gz_path, const std::string& cache_dir, EntryLock lock) {
  std::string source;
  struct stat src {};
  if (!ResolveSource(gz_path, &source, &src)) {
    throw std::runtime_error(gz_path + ": cannot resolve: " + ErrnoMessage());
  }
  const std::string data_path = EntryPath(cache_dir, source);
  if (!lock.held()) {
    std::string why;
    const int fd = OpenLockFile(data_path, &why);
    if (fd < 0) throw std::runtime_error(why);
    lock = EntryLock(fd);
    while (flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) throw std::runtime_error(ErrnoText("cannot lock " + data_path));
    }
  }
  std::string why;
  if (OpenEntry(data_path, source, src, geteuid(), &why)) return "cache hit";
  const std::string failed = BuildEntry(source, src, data_path);
  if (!failed.empty()) throw std::runtime_error(failed);
  std::string why_built;
  if (!OpenEntry(data_path, source, src, geteuid(), &why_built)) {
    throw std::runtime_error(data_path + ": the new entry does not check: " + why_built);
  }
  return why == "no entry" ? "cached (no entry)" : "rebuilt (" + why + ")";
}

namespace {

std::string VersionOf(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(MtimeNs(st)) + ":" +
         std::to_string(int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec);
}

}  // namespace

std::string FileVersion(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return VersionOf(st);
}

namespace {

constexpr const char* kRefMagic = "convoy-data-cache-ref 1";

// The owner's record of what the source `source` (canonical) hashed to: its path entry's name
// with `.ref`.
std::string RefPath(const std::string& cache_dir, const std::string& source) {
  return EntryPath(cache_dir, source) + ".ref";
}

struct Ref {
  std::string source, version, sha256;
};

bool ReadRef(const std::string& path, uid_t owner, Ref* ref) {
  std::string text;
  std::map<std::string, std::string> fields;
  if (!ReadSmallFile(path, owner, &text) || !ParseFields(text, kRefMagic, &fields) ||
      fields.size() != 3) {
    return false;
  }
  ref->source = fields["source"];
  ref->version = fields["version"];
  ref->sha256 = fields["sha256"];
  return ref->sha256.size() == 64;
}

// Records (temporary name, then rename) that `source` at `version` hashed to `sha256`.
void WriteRef(const std::string& cache_dir, const std::string& source, const std::string& version,
              const std::string& sha256) {
  const std::string path = RefPath(cache_dir, source);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const std::string text = std::string(kRefMagic) + "\nsource " + source + "\nversion " + version +
                           "\nsha256 " + sha256 + "\n";
  unlink(tmp.c_str());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (fd.fd < 0) return;  // the reader hashes the file itself
  fchmod(fd.fd, 0644);
  if (!WriteAll(fd.fd, reinterpret_cast<const uint8_t*>(text.data()), text.size()) ||
      rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
  }
}

}  // namespace

std::string RecordedSha256(const std::string& gz_path, const std::string& cache_dir, uid_t owner) {
  char resolved[PATH_MAX];
  if (realpath(gz_path.c_str(), resolved) == nullptr) return "";
  Ref ref;
  if (!ReadRef(RefPath(cache_dir, resolved), owner, &ref) || ref.source != resolved) return "";
  const std::string now = FileVersion(resolved);
  return !now.empty() && now == ref.version ? ref.sha256 : "";
}

ContentFill FillGzContentEntry(const std::string& gz_path, const std::string& cache_dir,
                               int64_t source_owner, int64_t max_bytes) {
  // A private copy: what is hashed is what is decompressed, whatever the file's owner does
  // to it meanwhile.
  std::string bytes;
  ContentFill fill;
  {
    UniqueFd fd(open(gz_path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st {};
    if (fd.fd < 0 || fstat(fd.fd, &st) != 0) {
      throw std::runtime_error(ErrnoText(gz_path + ": cannot open"));
    }
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(gz_path + ": not a regular file");
    if (source_owner >= 0 && st.st_uid != static_cast<uid_t>(source_owner)) {
      throw std::runtime_error(gz_path + ": belongs to uid " + std::to_string(st.st_uid) +
                               ", not to the job's " + std::to_string(source_owner));
    }
    if (st.st_size > max_bytes) {
      throw std::runtime_error(gz_path + ": " + std::to_string(st.st_size) +
                               " bytes, over the cache's limit of " + std::to_string(max_bytes));
    }
    fill.source_version = VersionOf(st);
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(fd.fd, buf, sizeof(buf))) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::runtime_error(ErrnoText(gz_path + ": cannot read"));
      bytes.append(buf, static_cast<size_t>(n));
      if (static_cast<int64_t>(bytes.size()) > max_bytes) {
        throw std::runtime_error(gz_path + ": grew over the cache's limit while read");
      }
    }
  }
  fill.sha256 = Sha256OfBytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  fill.entry = ContentEntryPath(cache_dir, gz_path, fill.sha256);
  std::string why;
  const int fd = OpenLockFile(fill.entry, &why);
  if (fd < 0) throw std::runtime_error(why);
  EntryLock lock(fd);
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) throw std::runtime_error(ErrnoText("cannot lock " + fill.entry));
  }
  const std::string source = ContentSource(fill.sha256);
  const int64_t size = static_cast<int64_t>(bytes.size());
  char resolved[PATH_MAX];
  const bool canonical = realpath(gz_path.c_str(), resolved) != nullptr;
  if (OpenEntry(fill.entry, source, size, 0, geteuid(), &why)) {
    utimensat(AT_FDCWD, (fill.entry + ".meta").c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
    if (canonical) WriteRef(cache_dir, resolved, fill.source_version, fill.sha256);
    fill.note = "cache hit";
    return fill;
  }
  const auto decompressed = InflateGz(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                      gz_path, static_cast<size_t>(max_bytes));
  bytes.clear();
  bytes.shrink_to_fit();
  Meta m;
  m.source = source;
  m.source_size = size;
  m.source_mtime_ns = 0;
  const std::string failed = WriteEntry(*decompressed, m, fill.entry);
  if (!failed.empty()) throw std::runtime_error(failed);
  std::string why_built;
  if (!OpenEntry(fill.entry, source, size, 0, geteuid(), &why_built)) {
    throw std::runtime_error(fill.entry + ": the new entry does not check: " + why_built);
  }
  if (canonical) WriteRef(cache_dir, resolved, fill.source_version, fill.sha256);
  fill.note = "cached";
  return fill;
}

int EvictContentEntries(const std::string& cache_dir, int64_t max_bytes, const std::string& keep) {
  struct Entry {
    std::string path;
    int64_t size;
    int64_t used_ns;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  DIR* d = opendir(cache_dir.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> stale_refs;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".ref") == 0) {
      // A record of a source that is gone (its job's files deleted) goes too.
      Ref ref;
      struct stat st {};
      const std::string path = cache_dir + "/" + name;
      if (ReadRef(path, geteuid(), &ref) && lstat(ref.source.c_str(), &st) != 0) {
        stale_refs.push_back(path);
      }
      continue;
    }
    const size_t at = name.find(".sha256-");
    // The data files: <base>.sha256-<64 hex digits>, nothing after.
    if (at == std::string::npos || name.size() != at + 8 + 64) continue;
    const std::string path = cache_dir + "/" + name;
    struct stat st {
    }, meta{};
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const bool has_meta = lstat((path + ".meta").c_str(), &meta) == 0;
    entries.push_back({path, int64_t{st.st_size}, has_meta ? MtimeNs(meta) : 0});
    total += st.st_size;
  }
  closedir(d);
  for (const std::string& path : stale_refs) unlink(path.c_str());
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used_ns < b.used_ns; });
  int removed = 0;
  for (const Entry& e : entries) {
    if (total <= max_bytes) break;
    if (e.path == keep) continue;
    // The sidecar first: a reader then finds no entry, never a sidecar without its data.
    unlink((e.path + ".meta").c_str());
    unlink(e.path.c_str());
    unlink((e.path + ".lock").c_str());
    total -= e.size;
    ++removed;
  }
  return removed;
}

void DropPathLock(const std::string& gz_path, const std::string& cache_dir, EntryLock lock) {
  std::string source;
  struct stat src {};
  if (ResolveSource(gz_path, &source, &src)) {
    unlink((EntryPath(cache_dir, source) + ".lock").c_str());
  }
  lock = EntryLock();
}

uint64_t Checksum64(const uint8_t* data, size_t size) {
  constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full;
  constexpr uint64_t kP3 = 0x165667B19E3779F9ull, kP5 = 0x27D4EB2F165667C5ull;
  auto rotl = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  auto round = [&](uint64_t acc, uint64_t w) { return rotl(acc + w * kP2, 31) * kP1; };
  uint64_t v[4] = {kP1 + kP2, kP2, 0, 0 - kP1};
  size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t w;
      std::memcpy(&w, data + i + 8 * lane, 8);
      v[lane] = round(v[lane], w);
    }
  }
  uint64_t h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18) + kP5 + size;
  for (; i < size; ++i) h = rotl(h ^ (data[i] * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace convoy
