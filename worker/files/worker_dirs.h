// The worker's own directories under --work-dir (its logs, metrics sockets, attempt
// directories): private to the worker, searchable (never listable) where a rank of another
// user must reach a file inside.
//
// Threading: free functions without shared state; any thread.
#pragma once

#include <string>

namespace convoy {

// Makes `dir` (and its parents) when missing; then, when the worker owns it, 0700, or 0711
// with `searchable` (ranks run as another user and must reach a file inside: their metrics
// socket, their error file). A failure is logged.
void MakeWorkerDir(const std::string& dir, bool searchable);

// Removes the metrics sockets (*.sock) an earlier run of this worker left in `run_dir` (no
// attempt runs at a worker's start: ranks die with their worker) and returns how many.
int RemoveStaleSockets(const std::string& run_dir);

}  // namespace convoy
