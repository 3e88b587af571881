// Raising the open-file limit: a daemon with thousands of connections needs more than the
// usual soft limit of 1,024, and raising the soft limit up to the hard one needs no privilege.
#pragma once

#include <sys/resource.h>

#include <cstdint>

namespace convoy {

struct FileLimit {
  uint64_t before = 0;  // the soft limit found at start
  uint64_t soft = 0;    // the soft limit now
  uint64_t hard = 0;
  bool ok = false;  // getrlimit/setrlimit succeeded
};

// Sets the soft RLIMIT_NOFILE to the hard limit. Call once at start, before any thread.
inline FileLimit RaiseFileLimit() {
  FileLimit out;
  struct rlimit rl {};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return out;
  out.before = rl.rlim_cur;
  out.hard = rl.rlim_max;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      out.soft = out.before;
      return out;
    }
  }
  out.soft = rl.rlim_cur;
  out.ok = true;
  return out;
}

}  // namespace convoy
