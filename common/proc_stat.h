#pragma once

// /proc/<pid>/stat, parsed in one place for the worker and the trainer. Header-only and
// standard library only: the trainer builds without convoy_common.

#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace convoy {

struct ProcStat {
  char state = '?';          // field 3: R, S, D, T (stopped), t (traced), Z, ...
  uint64_t start_ticks = 0;  // field 22: start time after boot, in clock ticks
};

// Reads /proc/<pid>/stat (pid 0: this process). False when there is no such process or the
// line is not what the kernel writes. The command name (field 2) may hold spaces and ')',
// so fields are counted from the last ')'.
inline bool ReadProcStat(pid_t pid, ProcStat* out) {
  std::ifstream f(pid == 0 ? std::string("/proc/self/stat")
                           : "/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  ProcStat stat;
  int i = 3;
  for (; i <= 22 && rest >> field; ++i) {
    if (i == 3) stat.state = field[0];
    if (i == 22) {
      char* end = nullptr;
      stat.start_ticks = std::strtoull(field.c_str(), &end, 10);
      if (end == field.c_str() || *end != '\0') return false;
    }
  }
  if (i <= 22) return false;
  *out = stat;
  return true;
}

}  // namespace convoy
