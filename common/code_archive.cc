#include "common/code_archive.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>

#include "common/strings.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBlock = 512;

std::string Limit(int64_t max_bytes) { return std::to_string(max_bytes >> 20) + " MB"; }

void PutOctal(char* field, size_t width, uint64_t value) {
  // width - 1 digits and a NUL, as ustar wants.
  std::string digits(width - 1, '0');
  for (size_t i = width - 1; i-- > 0 && value > 0;) {
    digits[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  std::memcpy(field, digits.data(), width - 1);
  field[width - 1] = '\0';
}

uint64_t GetOctal(const char* field, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    const char c = field[i];
    if (c == ' ' && v == 0) continue;
    if (c < '0' || c > '7') break;
    v = (v << 3) | static_cast<uint64_t>(c - '0');
  }
  return v;
}

// A ustar header for `rel` (a file of `size` bytes or a directory). False when the name
// cannot be split into prefix (155) and name (100).
bool Header(const std::string& rel, bool is_dir, bool exec, uint64_t size, char* h) {
  std::memset(h, 0, kBlock);
  std::string name = is_dir ? rel + "/" : rel;
  std::string prefix;
  if (name.size() > 100) {
    // Split at a '/' so that the prefix is <= 155 and the rest <= 100.
    size_t cut = name.rfind('/', std::min<size_t>(155, name.size() - 2));
    while (cut != std::string::npos && cut > 0 && name.size() - cut - 1 > 100)
      cut = std::string::npos;
    if (cut == std::string::npos || cut == 0) return false;
    prefix = name.substr(0, cut);
    name = name.substr(cut + 1);
  }
  std::memcpy(h, name.data(), name.size());
  PutOctal(h + 100, 8, is_dir || exec ? 0755 : 0644);
  PutOctal(h + 108, 8, 0);
  PutOctal(h + 116, 8, 0);
  PutOctal(h + 124, 12, is_dir ? 0 : size);
  PutOctal(h + 136, 12, 0);  // mtime 0: the same tree gives the same bytes
  h[156] = is_dir ? '5' : '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memcpy(h + 345, prefix.data(), prefix.size());
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += static_cast<unsigned char>(h[i]);
  PutOctal(h + 148, 7, sum);
  h[155] = ' ';
  return true;
}

// Whether a file's bytes begin as a compressed format's do (gzip, xz, zstd, bzip2, PNG,
// JPEG): deflate would spend its time (0.8 s for Fashion-MNIST's 30 MB of .gz files) finding
// nothing to gain, so such a file is stored. Zip is not among them: torch.save's zip files
// hold tensors uncompressed.
bool LooksCompressed(const std::string& d) {
  auto starts = [&](const char* magic, size_t n) {
    return d.size() >= n && std::memcmp(d.data(), magic, n) == 0;
  };
  return d.size() >= (64 << 10) && (starts("\x1f\x8b", 2) ||
                                    starts("\xfd"
                                           "7zXZ",
                                           6) ||
                                    starts("\x28\xb5\x2f\xfd", 4) || starts("BZh", 3) ||
                                    starts("\x89PNG", 4) || starts("\xff\xd8\xff", 3));
}

// gzip of `in`, at level 6 but for the byte ranges of `stored` (sorted, apart), which are
// stored (level 0). The same input and ranges give the same bytes.
StatusOr<std::string> Gzip(const std::string& in,
                           const std::vector<std::pair<size_t, size_t>>& stored) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Status::Internal("zlib: deflateInit2 failed");
  }
  // Each change of level ends a block: a few bytes each beyond the bound.
  std::string out(deflateBound(&z, in.size()) + 64 * (2 * stored.size() + 1), '\0');
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  size_t pos = 0;
  auto feed = [&](size_t end, int level) {
    if (end <= pos) return true;
    if (deflateParams(&z, level, Z_DEFAULT_STRATEGY) != Z_OK) return false;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + pos));
    z.avail_in = static_cast<uInt>(end - pos);
    pos = end;
    return deflate(&z, Z_NO_FLUSH) == Z_OK && z.avail_in == 0;
  };
  bool ok = true;
  for (const auto& [begin, end] : stored) ok = ok && feed(begin, 6) && feed(end, 0);
  ok = ok && feed(in.size(), 6) && deflate(&z, Z_FINISH) == Z_STREAM_END;
  out.resize(z.total_out);
  deflateEnd(&z);
  if (!ok) return Status::Internal("zlib: deflate failed");
  return out;
}

// The tar stream inside a .tar.gz, decompressed a bounded buffer at a time from `fill`
// (which puts up to `cap` compressed bytes in `buf` and returns how many: 0 at the end, -1 on
// an error): memory stays at two 64 KiB buffers whatever the archive.
class TarStream {
 public:
  using Fill = std::function<ssize_t(char* buf, size_t cap)>;
  TarStream(Fill fill, int64_t max_bytes) : fill_(std::move(fill)), max_bytes_(max_bytes) {}
  ~TarStream() {
    if (init_) inflateEnd(&z_);
  }
  TarStream(const TarStream&) = delete;
  TarStream& operator=(const TarStream&) = delete;

  // Exactly `n` bytes into `out`. `*clean_end` (when given) is set, with OK, when the stream
  // ended before the first of them.
  Status Read(char* out, size_t n, bool* clean_end = nullptr) {
    size_t got = 0;
    while (got < n) {
      if (stream_end_) {
        if (got == 0 && clean_end != nullptr) {
          *clean_end = true;
          return Status::Ok();
        }
        return Status::InvalidArgument("code archive: truncated");
      }
      auto produced = Inflate(out + got, n - got);
      if (!produced.ok()) return produced.status();
      got += *produced;
    }
    return Status::Ok();
  }

  // Reads to the end of the gzip stream (its CRC checked), dropping what it holds.
  Status Drain() {
    while (!stream_end_) {
      auto produced = Inflate(out_, sizeof(out_));
      if (!produced.ok()) return produced.status();
    }
    return Status::Ok();
  }

  // Reads and drops `n` bytes, or hands them to `sink` a buffer at a time.
  Status Copy(uint64_t n, const std::function<bool(const char*, size_t)>& sink) {
    while (n > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof(out_)));
      CONVOY_RETURN_IF_ERROR(Read(out_, chunk));
      if (sink && !sink(out_, chunk)) return Status::Internal("write failed");
      n -= chunk;
    }
    return Status::Ok();
  }

 private:
  // One inflate call into out[0, cap): the bytes it produced. The stream's end sets
  // stream_end_; a truncated or bad stream, or one past the size limit, is an error.
  StatusOr<size_t> Inflate(char* out, size_t cap) {
    if (!init_) {
      if (inflateInit2(&z_, 15 + 16) != Z_OK) return Status::Internal("zlib: inflateInit2 failed");
      init_ = true;
    }
    if (z_.avail_in == 0 && !in_eof_) {
      const ssize_t r = fill_(in_, sizeof(in_));
      if (r < 0) return Status::Internal("code archive: cannot read it");
      if (r == 0) in_eof_ = true;
      z_.next_in = reinterpret_cast<Bytef*>(in_);
      z_.avail_in = static_cast<uInt>(r);
    }
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(cap);
    const int rc = inflate(&z_, Z_NO_FLUSH);
    const size_t produced = cap - z_.avail_out;
    total_ += static_cast<int64_t>(produced);
    if (total_ > max_bytes_) {
      return Status::InvalidArgument("code archive: unpacks to more than " + Limit(max_bytes_));
    }
    if (rc == Z_STREAM_END) {
      stream_end_ = true;
    } else if (rc == Z_BUF_ERROR && in_eof_ && z_.avail_in == 0) {
      return Status::InvalidArgument("code archive: truncated");
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return Status::InvalidArgument("code archive: not a valid gzip stream");
    }
    return produced;
  }

  Fill fill_;
  const int64_t max_bytes_;
  z_stream z_{};
  bool init_ = false;
  bool in_eof_ = false;
  bool stream_end_ = false;
  int64_t total_ = 0;
  char in_[1 << 16];
  char out_[1 << 16];
};

std::string ReadIfThere(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  std::string c;
  while (std::getline(ss, c, '/')) {
    if (!c.empty() && c != ".") out.push_back(c);
  }
  return out;
}

// 16 random hex digits, for names no other process picks at the same time.
std::string RandomSuffix() {
  uint64_t bits = 0;
  if (getrandom(&bits, sizeof bits, 0) != static_cast<ssize_t>(sizeof bits)) {
    bits = static_cast<uint64_t>(getpid()) * 0x9E3779B97F4A7C15ULL ^
           static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&bits));
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(bits));
  return out;
}

}  // namespace

std::string CodeArchivePath(const std::string& work_dir, const std::string& sha256) {
  return work_dir + "/code/" + sha256 + ".tar.gz";
}

bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

void IgnoreRules::AddText(const std::string& text) {
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#' || line[0] == '!') continue;
    Rule r;
    if (line.back() == '/') {
      r.dir_only = true;
      line.pop_back();
    }
    if (line.empty()) continue;
    if (line[0] == '/') {
      r.anchored = true;
      line.erase(0, 1);
    } else if (line.find('/') != std::string::npos) {
      r.anchored = true;
    }
    r.glob = line;
    rules_.push_back(r);
  }
}

bool IgnoreRules::Ignored(const std::string& rel, bool is_dir) const {
  const size_t slash = rel.rfind('/');
  const std::string base = slash == std::string::npos ? rel : rel.substr(slash + 1);
  if (base == ".git") return true;
  for (const Rule& r : rules_) {
    if (r.dir_only && !is_dir) continue;
    const bool hit = r.anchored ? fnmatch(r.glob.c_str(), rel.c_str(), FNM_PATHNAME) == 0
                                : fnmatch(r.glob.c_str(), base.c_str(), 0) == 0;
    if (hit) return true;
  }
  return false;
}

StatusOr<PackedCode> PackCodeDirectory(const std::string& dir, int64_t max_bytes) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status::InvalidArgument("--code " + dir + ": not a directory");
  IgnoreRules rules;
  rules.AddText(ReadIfThere(fs::path(dir) / ".gitignore"));
  rules.AddText(ReadIfThere(fs::path(dir) / ".convoyignore"));
  PackedCode packed;
  std::string tar;
  std::vector<std::pair<size_t, size_t>> stored;  // already compressed files' bytes in `tar`
  char h[kBlock];
  // Depth first, entries sorted by name: deterministic.
  std::vector<std::string> stack{""};
  while (!stack.empty()) {
    const std::string rel_dir = stack.back();
    stack.pop_back();
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(fs::path(dir) / rel_dir, ec)) {
      names.push_back(e.path().filename().string());
    }
    if (ec)
      return Status::InvalidArgument("--code: cannot read " + dir + "/" + rel_dir + ": " +
                                     ec.message());
    std::vector<std::string> subdirs;
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      const std::string rel = rel_dir.empty() ? n : rel_dir + "/" + n;
      const fs::path full = fs::path(dir) / rel;
      const fs::file_status st = fs::symlink_status(full, ec);
      if (ec) continue;
      const bool is_dir = fs::is_directory(st);
      if (!is_dir && !fs::is_regular_file(st)) continue;  // links, sockets, ...: skipped
      if (rules.Ignored(rel, is_dir)) continue;
      if (is_dir) {
        if (!Header(rel, true, false, 0, h))
          return Status::InvalidArgument("--code: name too long: " + rel);
        tar.append(h, kBlock);
        subdirs.push_back(rel);
        continue;
      }
      const std::string data = ReadIfThere(full);
      packed.bytes += static_cast<int64_t>(data.size());
      packed.files += 1;
      if (packed.bytes > max_bytes) {
        return Status::InvalidArgument("--code " + dir + ": more than " + Limit(max_bytes) +
                                       " of files (the limit); add what is not needed to "
                                       ".convoyignore");
      }
      const bool exec =
          (fs::status(full, ec).permissions() & fs::perms::owner_exec) != fs::perms::none;
      if (!Header(rel, false, exec, data.size(), h))
        return Status::InvalidArgument("--code: name too long: " + rel);
      tar.append(h, kBlock);
      if (LooksCompressed(data)) stored.emplace_back(tar.size(), tar.size() + data.size());
      tar.append(data);
      tar.append((kBlock - data.size() % kBlock) % kBlock, '\0');
    }
    for (auto it = subdirs.rbegin(); it != subdirs.rend(); ++it) stack.push_back(*it);
  }
  tar.append(2 * kBlock, '\0');
  auto gz = Gzip(tar, stored);
  if (!gz.ok()) return gz.status();
  if (static_cast<int64_t>(gz->size()) > max_bytes) {
    return Status::InvalidArgument("--code " + dir + ": the archive is over " + Limit(max_bytes) +
                                   " (the limit)");
  }
  packed.archive = std::move(*gz);
  return packed;
}

namespace {

// `fd` gets `mode` and, when `uid` >= 0, that owner.
bool Give(int fd, mode_t mode, int64_t uid, int64_t gid) {
  if (fchmod(fd, mode) != 0) return false;
  return uid < 0 || fchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) == 0;
}

// Walks down from `dest_fd` through the first `ndirs` of `parts`, creating directories (0750,
// given to uid/gid) and never following a link; the last directory's fd (the caller closes
// it), or why not (`name`, `dest`: for the message).
StatusOr<int> WalkDown(int dest_fd, const std::vector<std::string>& parts, size_t ndirs,
                       const std::string& name, const std::string& dest, int64_t uid, int64_t gid) {
  int fd = dup(dest_fd);
  for (size_t i = 0; i < ndirs; ++i) {
    const bool created = mkdirat(fd, parts[i].c_str(), 0750) == 0;
    const int next = openat(fd, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
    if (next < 0) {
      return Status::InvalidArgument("code archive: cannot unpack '" + name + "': " + parts[i] +
                                     " is a link or not a directory in " + dest);
    }
    if (created && !Give(next, 0750, uid, gid)) {
      close(fd);
      return Status::Internal("cannot give " + name + " to uid " + std::to_string(uid) + ": " +
                              ErrnoMessage());
    }
  }
  return fd;
}

// Writes the next `size` bytes of `stream` (`padded` with the block's padding) as the file
// `base` in the directory `fd`, with `mode`, given to uid/gid. Written under a name of its
// own, then renamed over `base` in one step: whoever else unpacks into the same directory at
// the same time (two workers sharing a job root) never sees a half-written file nor finds
// `base` taken (issue 32). A symlink at `base` is replaced, never followed.
Status WriteEntry(TarStream& stream, int fd, const std::string& base, mode_t mode, uint64_t size,
                  uint64_t padded, int64_t uid, int64_t gid, const std::string& path) {
  const std::string temp = "." + base.substr(0, 200) + ".convoy-unpack-" + RandomSuffix();
  const int out =
      openat(fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  bool ok = out >= 0 && Give(out, mode, uid, gid);
  std::string why;
  if (ok) {
    uint64_t left = size;
    Status copied = stream.Copy(padded, [&](const char* data, size_t n) {
      const size_t mine = static_cast<size_t>(std::min<uint64_t>(left, n));
      left -= mine;
      for (size_t off = 0; off < mine;) {
        const ssize_t w = write(out, data + off, mine - off);
        if (w <= 0) return false;
        off += static_cast<size_t>(w);
      }
      return true;
    });
    if (!copied.ok()) {
      ok = false;
      why = copied.message();
    }
  }
  if (why.empty() && !ok) why = ErrnoMessage();
  if (out >= 0) close(out);
  ok = ok && renameat(fd, temp.c_str(), fd, base.c_str()) == 0;
  if (!ok) {
    if (why.empty()) why = ErrnoMessage();
    if (out >= 0) unlinkat(fd, temp.c_str(), 0);
    return Status::Internal("cannot write " + path + ": " + why);
  }
  return Status::Ok();
}

// One pass over the archive from `fill`. `dest_fd` < 0: checks it only (the gzip stream, the
// size, every name and type) and writes nothing; else unpacks into the directory `dest_fd`.
StatusOr<int64_t> UnpackPass(const TarStream::Fill& fill, int dest_fd, const std::string& dest,
                             int64_t uid, int64_t gid, int64_t max_bytes) {
  auto stream = std::make_unique<TarStream>(fill, max_bytes);
  const bool writing = dest_fd >= 0;
  int64_t files = 0;
  char h[kBlock];
  while (true) {
    bool end = false;
    CONVOY_RETURN_IF_ERROR(stream->Read(h, kBlock, &end));
    if (end) break;  // no end-of-archive blocks: what came is whole
    if (std::all_of(h, h + kBlock, [](char c) { return c == 0; })) {
      // The check reads on to the gzip stream's end: its CRC and the size limit hold for
      // all of it, whatever follows the end-of-archive block.
      if (!writing) CONVOY_RETURN_IF_ERROR(stream->Drain());
      break;
    }
    if (std::memcmp(h + 257, "ustar", 5) != 0) {
      return Status::InvalidArgument("code archive: not a ustar archive");
    }
    std::string name(h, strnlen(h, 100));
    const std::string prefix(h + 345, strnlen(h + 345, 155));
    if (!prefix.empty()) name = prefix + "/" + name;
    const uint64_t size = GetOctal(h + 124, 12);
    const char type = h[156];
    const uint64_t padded = (size + kBlock - 1) / kBlock * kBlock;
    const std::vector<std::string> parts = Split(name);
    if (name.empty() || name[0] == '/' || parts.empty()) {
      return Status::InvalidArgument("code archive: refused absolute or empty name '" + name + "'");
    }
    if (std::find(parts.begin(), parts.end(), "..") != parts.end()) {
      return Status::InvalidArgument("code archive: refused '..' in '" + name + "'");
    }
    const bool is_dir = type == '5';
    if (!is_dir && type != '0' && type != '\0') {
      return Status::InvalidArgument("code archive: refused '" + name +
                                     "': only files and directories (no links)");
    }
    if (!writing) {
      Status skipped = stream->Copy(padded, nullptr);
      if (!skipped.ok() && skipped.message() == "code archive: truncated") {
        return Status::InvalidArgument("code archive: truncated at " + name);
      }
      CONVOY_RETURN_IF_ERROR(skipped);
      if (!is_dir) ++files;
      continue;
    }
    auto dir =
        WalkDown(dest_fd, parts, is_dir ? parts.size() : parts.size() - 1, name, dest, uid, gid);
    if (!dir.ok()) return dir.status();
    const int fd = *dir;
    if (is_dir) {
      close(fd);
      CONVOY_RETURN_IF_ERROR(stream->Copy(padded, nullptr));
      continue;
    }
    const std::string& base = parts.back();
    struct stat st {};
    if (fstatat(fd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
      close(fd);
      return Status::InvalidArgument("code archive: cannot replace " + dest + "/" + name);
    }
    const mode_t mode = (GetOctal(h + 100, 8) & 0100) != 0 ? 0750 : 0640;
    Status written = WriteEntry(*stream, fd, base, mode, size, padded, uid, gid, dest + "/" + name);
    close(fd);
    CONVOY_RETURN_IF_ERROR(written);
    ++files;
  }
  return files;
}

StatusOr<int64_t> Unpack(const std::function<TarStream::Fill()>& source, const std::string& dest,
                         int64_t uid, int64_t gid, int64_t max_bytes) {
  // First the whole archive is checked, writing nothing: a bomb, a bad name or a truncated
  // stream is refused before any file lands. Then it is unpacked, a buffer at a time.
  CONVOY_RETURN_IF_ERROR(UnpackPass(source(), -1, dest, uid, gid, max_bytes).status());
  const int root = open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return Status::Internal(ErrnoText("cannot open " + dest));
  auto files = UnpackPass(source(), root, dest, uid, gid, max_bytes);
  close(root);
  return files;
}

}  // namespace

StatusOr<int64_t> UnpackCodeArchive(const std::string& archive, const std::string& dest,
                                    int64_t uid, int64_t gid, int64_t max_bytes) {
  return Unpack(
      [&archive] {
        auto pos = std::make_shared<size_t>(0);
        return [&archive, pos](char* buf, size_t cap) -> ssize_t {
          const size_t n = std::min(cap, archive.size() - *pos);
          std::memcpy(buf, archive.data() + *pos, n);
          *pos += n;
          return static_cast<ssize_t>(n);
        };
      },
      dest, uid, gid, max_bytes);
}

StatusOr<int64_t> UnpackCodeArchiveFile(const std::string& path, const std::string& dest,
                                        int64_t uid, int64_t gid, int64_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound(ErrnoText("cannot open " + path));
  auto files = Unpack(
      [fd] {
        lseek(fd, 0, SEEK_SET);
        return [fd](char* buf, size_t cap) -> ssize_t {
          while (true) {
            const ssize_t n = read(fd, buf, cap);
            if (n >= 0 || errno != EINTR) return n;
          }
        };
      },
      dest, uid, gid, max_bytes);
  close(fd);
  return files;
}

}  // namespace convoy
