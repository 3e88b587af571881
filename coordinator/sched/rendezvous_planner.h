// The rank plan of an attempt: node ranks, global ranks and the launch message for each
// node. Pure logic.
#pragma once

#include <string>
#include <vector>

#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

// One chosen node, in node order.
struct PlannedNode {
  std::string worker;
  std::string address;
  int procs = 0;  // LOCAL_WORLD_SIZE of this node
  // What each process gets, by local rank (empty: nothing asked).
  std::vector<v1::RankResources> resources = {};
};

// The nodes of an attempt: GROUP_RANK = index in `nodes`, and
// RANK = GROUP_RANK * procs + LOCAL_RANK (every node of a gang has the same procs).
std::vector<v1::NodeAssignment> PlanRanks(const std::vector<PlannedNode>& nodes);

// The Launch for node `group_rank` of an attempt whose master is node 0's address and
// `master_port`. run_id is "<job id>" so that every attempt of a job shares it, as torchrun's.
// Launch.ranks carries each process's RANK (ranks[local_rank]): the worker computes none;
// Launch.resources each one's GPUs, cores and memory; Launch.max_world_size the world at the
// spec's largest size (max_nodes for an elastic job).
v1::Launch PlanLaunch(const std::string& job_id, int attempt, const v1::JobSpec& spec,
                      const std::vector<v1::NodeAssignment>& nodes, int group_rank,
                      int master_port);

}  // namespace convoy
