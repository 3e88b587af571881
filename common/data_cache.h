// The worker's cache of decompressed data files (issue 45): a `.gz` data file is decompressed
// once per worker and data set version, by the worker, into a directory the worker owns; the
// ranks of every job map the entries read-only and never write there. So every job's first
// start is warm, whatever identity it runs as, and no job can plant data that another trains
// on (a cache a job could write, shared with another job, would let it).
//
// Layout: for a source `/d/train-images-idx3-ubyte.gz`, the cache directory holds
// `train-images-idx3-ubyte.<h>` (the decompressed bytes; <h> is a hash of the source's
// canonical path, so that two data directories never share an entry), `<that>.meta` (the
// sidecar: the source's path, size and mtime; the cached file's size, mtime, inode and a
// 64-bit checksum of its bytes) and `<that>.lock` (held by the filler while it builds the
// entry). Entries are written under temporary names and renamed into place (data first,
// then the sidecar).
//
// Who may write: only the cache directory's owner (the worker). A reader trusts a directory
// only when it belongs to root or to the reader itself and neither its group nor others may
// write it, and an entry only when it belongs to the directory's owner and neither its group
// nor others may write it; everything else (a truncated, altered or replaced entry, a changed
// source) is not used, and the reader decompresses the source into its own memory instead.
//
// No LibTorch here: plain files, zlib and the standard library (it is built into the worker
// and into convoy-trainer, also when the trainer is built on its own).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace convoy {

// Read-only bytes: an owned buffer or a read-only file mapping.
class Bytes {
 public:
  virtual ~Bytes() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

// The whole regular file open at `fd` (`size` bytes), mapped read-only and shared with the
// page cache: nothing is copied. Null when it cannot be mapped (errno says why). The mapping
// stays whole when the file is unlinked or renamed over (never when it is truncated).
std::shared_ptr<const Bytes> MapReadOnly(int fd, size_t size);

// Decompresses the whole gzip file at `path` into memory. Throws std::runtime_error naming
// the file when it is missing, unreadable, truncated or corrupt.
std::shared_ptr<const Bytes> ReadGzFile(const std::string& path);

struct CachedFile {
  std::shared_ptr<const Bytes> bytes;
  // What happened, for the log: "cache hit", "cache hit (waited for the worker's fill)", or
  // "not cached (<why>)" when the bytes were decompressed into memory instead.
  std::string note;
};

// ---- Readers (ranks). Never write anything.

// The decompressed bytes of the gzip file `gz_path`: the cache entry in `cache_dir` when it
// holds a valid one made by the directory's owner (waiting while the owner is filling it) -
// the entry of its path, else the content entry of its bytes' hash (note "cache hit (by
// content)") - else the file decompressed into memory. Empty `cache_dir`: no cache. A cache that
// cannot be used is not an error (`note` says why). Throws like ReadGzFile for a bad source. Safe
// to call from several processes at once. `while_waiting`, when given, is called about once a
// second while the owner's fill is awaited (a rank says it is alive: hang detection counts
// from its start, and a first fill on a loaded host takes seconds).
CachedFile LoadGzCached(const std::string& gz_path, const std::string& cache_dir,
                        const std::function<void()>& while_waiting = nullptr);

// ---- The owner (the worker, or `convoy-trainer --fill-data-cache` on a cache of its own).

// Makes `dir` (and its missing parents, 0711) a real directory owned by this process's
// effective user with mode `mode` (0711: ranks may open entries by name, not list them).
// Returns "" or why it cannot.
std::string PrepareCacheDir(const std::string& dir, unsigned mode = 0711);

// The entry's lock, held (exclusively) while its holder fills the entry; readers that find
// the entry missing wait on it. Move-only; closing releases it.
class EntryLock {
 public:
  EntryLock() = default;
  explicit EntryLock(int fd) : fd_(fd) {}
  ~EntryLock();
  EntryLock(EntryLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  EntryLock& operator=(EntryLock&& o) noexcept;
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Where the entry of the canonical source path `source` lives in `cache_dir`.
std::string EntryPath(const std::string& cache_dir, const std::string& source);

// Whether the entry of `gz_path` in `cache_dir` is in place and matches the source as it is
// now, judged by sizes, times and inodes only (no checksum: cheap enough for a launch path).
bool EntryLooksCurrent(const std::string& gz_path, const std::string& cache_dir);

// Takes the entry's lock without waiting: held, or not held when someone else holds it (a
// fill is under way) or the lock file cannot be made (`why` says which).
EntryLock TryLockEntry(const std::string& gz_path, const std::string& cache_dir, std::string* why);

// Makes the entry of `gz_path` in `cache_dir` valid: kept when it checks (checksum
// included), built otherwise. `lock`: the entry's lock when the caller already holds it
// (else it is taken here, waiting). Returns what it did ("cache hit", "cached (no entry)",
// "rebuilt (<why>)"); throws std::runtime_error when it cannot (a bad source, a full disk).
std::string FillGzEntry(const std::string& gz_path, const std::string& cache_dir,
                        EntryLock lock = EntryLock());

// ---- Content entries: data outside the cached roots (a job's own, or shipped in its code
// archive). Such a source is cached under the SHA-256 of its compressed bytes,
// `<base>.sha256-<hex>`, whatever its path: the same data set shipped by any job, in any
// archive, is one entry. Only the owner fills one, and it decompresses the very private copy
// of the bytes it hashed, so an entry always holds the decompression of the bytes its name
// says, wherever they were read from: a job that changes its file during the fill changes
// nothing but its own read. Readers hash their own file and look the entry up by that hash
// (LoadGzCached does, after the path entry). Needs OpenSSL's SHA-256 (ContentEntries()).

// Whether this build can hash (the trainer built on its own without OpenSSL cannot: it then
// reads such data uncached).
bool ContentEntries();

// The SHA-256 of `size` bytes, in lower-case hex.
std::string Sha256OfBytes(const uint8_t* data, size_t size);

// Where the content entry of a source named `gz_path` whose bytes hash to `sha256` lives.
std::string ContentEntryPath(const std::string& cache_dir, const std::string& gz_path,
                             const std::string& sha256);

struct ContentFill {
  std::string note;            // "cache hit" or "cached"
  std::string sha256;          // of the source's bytes
  std::string entry;           // the entry's data file
  std::string source_version;  // FileVersion of the source when it was opened
};

// The SHA-256 that the owner (uid `owner`) recorded `gz_path`'s bytes hash to, when the file
// is still at the version (FileVersion) it read then; "" otherwise. FillGzContentEntry
// records it (`<its path entry>.ref`), so that a rank and the next launch need not hash a file
// the worker has hashed. A changed file has another version (its change time moves with every
// write) and is hashed again.
std::string RecordedSha256(const std::string& gz_path, const std::string& cache_dir, uid_t owner);

// A file's version as far as its metadata tells: device, inode, size, modification and change
// times (the change time moves with every write, and no one but root can set it back). ""
// when it cannot be read. Equal versions: the same bytes.
std::string FileVersion(const std::string& path);

// The owner's fill of the content entry of `gz_path`: reads the source (a regular file, not
// through a final symlink; of uid `source_owner` unless that is -1) into private memory,
// hashes it, and keeps or builds its entry (holding the entry's lock, waiting for it), its
// sidecar touched (the entries' last use, for EvictContentEntries). Throws
// std::runtime_error naming the file when the source cannot be read or is not gzip, or when
// it or its decompression exceeds `max_bytes`.
ContentFill FillGzContentEntry(const std::string& gz_path, const std::string& cache_dir,
                               int64_t source_owner, int64_t max_bytes);

// Removes the least recently used content entries (data, sidecar, lock) of `cache_dir` until
// their data files total at most `max_bytes`, never the entry `keep`, and the records
// (RecordedSha256) of sources that are gone. Returns how many entries it removed. A rank that
// mapped a removed entry keeps its mapping.
int EvictContentEntries(const std::string& cache_dir, int64_t max_bytes, const std::string& keep);

// Removes the path-keyed lock file of `gz_path` (a fill of a source outside the roots holds it
// so that ranks wait for the content fill; it has no entry of its own), then releases `lock`.
void DropPathLock(const std::string& gz_path, const std::string& cache_dir, EntryLock lock);

// The 64-bit checksum of the sidecar: four lanes of multiply-rotate over 8-byte words (the
// stripe loop of XXH64, not XXH64 itself) and the tail bytes, mixed with the length. Fast
// (memory bandwidth), not cryptographic: it detects damage; the trust rules above keep
// writers out.
uint64_t Checksum64(const uint8_t* data, size_t size);

}  // namespace convoy
