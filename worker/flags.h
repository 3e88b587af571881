// convoy-worker's command line (DESIGN.md "Command-line contract") and its defaults.
#pragma once

#include <string>

#include "common/status.h"

namespace convoy {

struct WorkerFlags {
  std::string coordinator;  // HOST:PORT; CONVOY_COORDINATOR when the flag is absent
  std::string name;
  std::string advertise_address;  // empty: the first non-loopback IPv4 address, else 127.0.0.1
  int slots = 0;                  // 0: one per GPU, else one per core
  // CPU cores this worker may use (0: every online core). Several workers sharing one
  // machine each declare their share, so that ranks get the right OMP_NUM_THREADS.
  int cores = 0;
  std::string work_dir;
  bool insecure = false;
  std::string trainer;  // empty: convoy-trainer next to this binary
  // With no coordinator reachable this long, ranks are stopped: nobody could report or stop
  // them any more. A minute rides out a coordinator restart with room to spare.
  double orphan_timeout_s = 60;
  // SIGTERM-to-SIGKILL grace when a Kill names none.
  int kill_grace_ms = 5000;
  // Per-rank log size before rotation (one rotated file is kept).
  int64_t log_max_bytes = 64LL << 20;
  std::string log_level = "info";
};

// Parses argv; on --help or an error sets `exit_code` and returns non-OK.
Status ParseWorkerFlags(int argc, char** argv, WorkerFlags* flags, int* exit_code);

}  // namespace convoy
