// Removing a job's files on a worker without ever leaving the directory they live in: a
// job's ranks run as another user and may plant symlinks (to /etc, to another job) in
// anything they can write. Everything is walked with openat/unlinkat from a descriptor of
// the root, each directory opened O_NOFOLLOW|O_DIRECTORY, so a symlink is only ever
// unlinked itself, never followed.
//
// Threading: free functions without shared state; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace convoy {

// Removes `root`/`name` (a file, a symlink, or a directory with everything under it).
// `root` is absolute and must not be, or lie under, a symlink the job could change (the
// worker's --work-dir/jobs or --job-root, canonical); `name` is one path component (no
// '/', not "." or ".."), else INVALID_ARGUMENT. Missing is no error. A directory the worker
// may not write (a rank made it 0500) is made writable first when the worker owns it or is
// root. On failure, what is left is named in the error ("<path>: Permission denied").
// Sets `*removed` (when not null) to how many entries were removed.
Status RemoveUnder(const std::string& root, const std::string& name, int64_t* removed = nullptr);

// The same for the entry `name` of the open directory `dir_fd` (`shown`: its path, for
// errors): what RemoveUnder does once it holds its root.
Status RemoveEntryAt(int dir_fd, const std::string& name, const std::string& shown,
                     int64_t* removed = nullptr);

// Opens the directory at the absolute `path` walking down from "/" without following any
// symlink (O_NOFOLLOW at each component), so that a job that replaced a directory of its own
// with a symlink cannot send the worker elsewhere. Returns the descriptor (O_CLOEXEC; the
// caller closes it), or -1 with errno set (ELOOP or ENOTDIR for a symlink on the way).
int OpenDirNoFollow(const std::string& path);

}  // namespace convoy
