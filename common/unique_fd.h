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

}  // namespace convoy
