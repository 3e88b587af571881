#include "coordinator/sched/rendezvous_planner.h"

#include <algorithm>

#include "spec/job_spec_validation.h"

namespace convoy {

std::vector<v1::NodeAssignment> PlanRanks(const std::vector<PlannedNode>& nodes) {
  std::vector<v1::NodeAssignment> out;
  for (size_t g = 0; g < nodes.size(); ++g) {
    v1::NodeAssignment a;
    a.set_group_rank(static_cast<int>(g));
    a.set_worker(nodes[g].worker);
    a.set_address(nodes[g].address);
    for (int l = 0; l < nodes[g].procs; ++l) {
      a.add_ranks(static_cast<int>(g) * nodes[g].procs + l);
    }
    for (const v1::RankResources& r : nodes[g].resources) *a.add_resources() = r;
    out.push_back(std::move(a));
  }
  return out;
}

v1::Launch PlanLaunch(const std::string& job_id, int attempt, const v1::JobSpec& spec,
                      const std::vector<v1::NodeAssignment>& nodes, int group_rank,
                      int master_port) {
  v1::Launch launch;
  launch.set_job_id(job_id);
  launch.set_attempt(attempt);
  *launch.mutable_spec() = spec;
  launch.set_group_rank(group_rank);
  launch.set_num_nodes(static_cast<int>(nodes.size()));
  const v1::NodeAssignment& node = nodes[group_rank];
  launch.set_local_world_size(node.ranks_size());
  // Every node of a gang runs the same number of processes (PlanRanks), so this is O(1):
  // a 10,000-node attempt builds 10,000 launches without summing over the nodes each time.
  launch.set_world_size(static_cast<int>(nodes.size()) * node.ranks_size());
  *launch.mutable_ranks() = node.ranks();
  *launch.mutable_resources() = node.resources();
  const int max_nodes = std::max(MaxNodes(spec), static_cast<int>(nodes.size()));
  launch.set_max_world_size(max_nodes * node.ranks_size());
  launch.set_master_addr(nodes[0].address());
  launch.set_master_port(master_port);
  launch.set_restart_count(attempt);
  launch.set_max_restarts(spec.max_restarts());
  launch.set_run_id(job_id);
  return launch;
}

}  // namespace convoy
