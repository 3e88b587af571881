// A job's code as a gzip-compressed tar archive (`convoy submit --code DIR`): packed by the
// CLI, stored by the coordinator under its SHA-256, unpacked by each worker into the job's
// directory. Only what that needs: regular files and directories, in the POSIX ustar format
// (names up to 255 bytes), compressed with zlib.
//
// Threading: free functions without shared state; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace convoy {

// The largest archive accepted anywhere (the CLI, UploadCode): 100 MiB compressed, and
// also what the CLI reads from the directory before compressing.
constexpr int64_t kMaxCodeArchiveBytes = int64_t{100} << 20;
// The largest chunk of an archive in one message (UploadCode, FetchCode).
constexpr int64_t kCodeChunkBytes = int64_t{4} << 20;

// Ignore rules read from a directory's .gitignore and .convoyignore (at its top only).
// Supported: blank lines and '#' comments; `name` or a glob (`*.pyc`) matching a file or
// directory name at any depth; a trailing '/' (directories only); a leading '/' or an inner
// '/' (anchored: the glob matches the whole path relative to the top, fnmatch with
// FNM_PATHNAME). Not supported: negation ('!' lines are skipped) and `**`. `.git` is
// always ignored.
class IgnoreRules {
 public:
  // Adds the rules of a file's text.
  void AddText(const std::string& text);
  // Whether `rel` (relative to the top, '/'-separated, no leading '/') is ignored.
  bool Ignored(const std::string& rel, bool is_dir) const;

 private:
  struct Rule {
    std::string glob;
    bool dir_only = false;
    bool anchored = false;
  };
  std::vector<Rule> rules_;
};

struct PackedCode {
  std::string archive;  // the .tar.gz
  int64_t files = 0;
  int64_t bytes = 0;  // of the files, before compression
};

// Packs the regular files and directories below `dir` (not following symlinks, which are
// skipped with the other special files), minus what its .gitignore/.convoyignore ignore,
// in a deterministic order (the same tree gives the same archive and hash). Fails, naming
// the limit, when the files or the archive exceed `max_bytes`.
StatusOr<PackedCode> PackCodeDirectory(const std::string& dir,
                                       int64_t max_bytes = kMaxCodeArchiveBytes);

// Unpacks `archive` (.tar.gz) into the existing directory `dest` without ever following a
// symbolic link: every directory on the way is opened with O_NOFOLLOW from `dest` down.
// Refuses (and stops at) an absolute name, a `..` component, a link or any entry that is not
// a regular file or a directory, and more than `max_bytes` unpacked. What it creates or
// overwrites gets owner `uid`:`gid` when `uid` >= 0; files 0640 (0750 when the archive says
// executable), directories 0750. Returns the number of files written.
StatusOr<int64_t> UnpackCodeArchive(const std::string& archive, const std::string& dest,
                                    int64_t uid, int64_t gid,
                                    int64_t max_bytes = 4 * kMaxCodeArchiveBytes);

// The same, reading the archive from the file `path` (NOT_FOUND when it cannot be opened).
// Both read the archive twice, a buffer at a time: once to check all of it (the gzip stream,
// the size, every name and type) before anything is written, then to unpack; memory stays
// under a megabyte whatever the archive (a decompression bomb included).
StatusOr<int64_t> UnpackCodeArchiveFile(const std::string& path, const std::string& dest,
                                        int64_t uid, int64_t gid,
                                        int64_t max_bytes = 4 * kMaxCodeArchiveBytes);

// Where a worker caches the archive `sha256`: <work_dir>/code/<sha256>.tar.gz.
std::string CodeArchivePath(const std::string& work_dir, const std::string& sha256);

// Lower-case hex SHA-256 check for a hash given by a caller: 64 of [0-9a-f].
bool IsSha256Hex(const std::string& s);

}  // namespace convoy
