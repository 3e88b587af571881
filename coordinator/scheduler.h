// Gang placement: all of a job's nodes or none. Pure logic, no clock, no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"

namespace convoy {

// What the scheduler needs to know of one worker that can take work now.
struct WorkerCapacity {
  std::string name;
  int free_slots = 0;
  int gpus = 0;
};

// Processes one node of `spec` runs on a worker with `gpus` GPUs (procs_per_node, or the
// GPU count for `procs_per_node: gpu`).
int ProcsPerNode(const v1::JobSpec& spec, int gpus);

// Chooses spec.nodes() distinct workers, each with room for its processes, or nothing.
// Workers named in `preferred` (the previous attempt's, in node order) come first and keep
// their order, so that a restart lands where its checkpoint is; the rest follow by most
// free slots, then by name. Returns the chosen names in node order (node 0 first).
std::optional<std::vector<std::string>> PlaceGang(const v1::JobSpec& spec,
                                                  const std::vector<WorkerCapacity>& workers,
                                                  const std::vector<std::string>& preferred);

}  // namespace convoy
