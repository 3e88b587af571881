// convoy-coordinator's command line (DESIGN.md "Command-line contract") and its defaults.
#pragma once

#include <string>

#include "common/status.h"

namespace convoy {

struct CoordinatorFlags {
  std::string listen = "127.0.0.1:7070";
  std::string state_dir;
  // Empty: no /metrics endpoint.
  std::string metrics_listen;
  bool insecure = false;
  // A worker not heard from for this long is lost and its ranks count as gone. Heartbeats
  // come every second; 10 s rides out a GC pause or a busy machine without leaving a
  // failed node's peers blocked for long.
  double worker_timeout_s = 10;
  // Grace between SIGTERM and SIGKILL when an attempt is torn down.
  int kill_grace_ms = 3000;
  // From placement until every rank has started (covers exec and library loading).
  double rendezvous_timeout_s = 60;
  int heartbeat_interval_ms = 1000;
  std::string log_level = "info";
};

// Parses argv; on --help or an error prints to stdout/stderr and returns the exit code in
// `exit_code` (the caller exits with it) with a non-OK status.
Status ParseCoordinatorFlags(int argc, char** argv, CoordinatorFlags* flags, int* exit_code);

}  // namespace convoy
