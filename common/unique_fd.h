// A file descriptor closed when it goes out of scope (the files the data cache and the
// checkpoint keeper open, read and write).
#pragma once

#include <unistd.h>

namespace convoy {

struct UniqueFd {
  int fd = -1;
  explicit UniqueFd(int f) : fd(f) {}
  ~UniqueFd() {
    if (fd >= 0) close(fd);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
};

// Closes `fd` if it is open and marks it closed (-1): for a descriptor held in a plain int.
inline void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace convoy
