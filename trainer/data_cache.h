// The per-host cache of decompressed data files: a `.gz` file is decompressed once into a
// private cache directory and mapped read-only by every rank that reads it, so that the ranks
// of a host (and every later attempt) share one copy in the page cache instead of each
// decompressing its own.
//
// Layout: for a source `/d/train-images-idx3-ubyte.gz`, the cache directory holds
// `train-images-idx3-ubyte.<h>` (the decompressed bytes; <h> is a hash of the source's
// absolute path, so that two data directories never share an entry) and `<that>.meta` (the
// sidecar: the source's path, size and mtime; the cached file's size, mtime, inode and a
// 64-bit checksum of its bytes). An entry is used only when all of these still match: a
// truncated, altered or replaced cache file, or a changed source, is rebuilt. Entries are
// written to a temporary name and renamed into place (data first, then the sidecar), under
// an flock so that two ranks starting together decompress once.
//
// No LibTorch here: plain files, zlib and the standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace convoy::trainer {

// Read-only bytes: an owned buffer or a read-only file mapping.
class Bytes {
 public:
  virtual ~Bytes() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

// Decompresses the whole gzip file at `path` into memory. Throws std::runtime_error naming
// the file when it is missing, unreadable, truncated or corrupt.
std::shared_ptr<const Bytes> ReadGzFile(const std::string& path);

struct CachedFile {
  std::shared_ptr<const Bytes> bytes;
  // What happened, for the log: "cache hit", "cached (no entry)", "rebuilt (the cached
  // file's checksum differs)", or "not cached (<why>)" when the cache could not be used and
  // the file was decompressed into memory instead.
  std::string note;
};

// The decompressed bytes of the gzip file `gz_path`, through the cache in `cache_dir`
// (created 0700 when missing; an existing one must be a directory owned by this process's
// effective user, and is made 0700 if it is more open). Empty `cache_dir`: no cache, the
// same as ReadGzFile. A cache that cannot be used (wrong owner, unwritable, out of space) is
// not an error: the file is decompressed into memory and `note` says why. Throws like
// ReadGzFile for a bad source. Safe to call from several processes at once.
CachedFile LoadGzCached(const std::string& gz_path, const std::string& cache_dir);

// The 64-bit checksum of the sidecar: four lanes of multiply-rotate over 8-byte words (the
// stripe loop of XXH64, not XXH64 itself) and the tail bytes, mixed with the length. Fast
// (memory bandwidth), not cryptographic: it detects damage, not an attacker, who would need
// the cache directory's owner's rights anyway.
uint64_t Checksum64(const uint8_t* data, size_t size);

}  // namespace convoy::trainer
