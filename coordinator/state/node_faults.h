// Faults follow the node (README "When nodes are sick"): the rank failures attributed to each
// node (RankFailure.origin FAILURE_ORIGIN_NODE) within a sliding window, and the rule that
// cordons a node: failures of `jobs_to_cordon` DIFFERENT jobs there within `window_ms`. One
// job failing twice on a node proves little (it may be the job); two jobs that failed there
// for the node's reasons point at the machine.
//
// Plain C++ on an injected Clock. Threading: none of its own; the JobManager calls it with
// the Coordinator's lock held. Cost: Record and Faults are O(faults of that node in the
// window), at most kMaxFaultsPerNode.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

class NodeFaultTracker {
 public:
  // Per node, the newest faults kept (older ones go first, window or not).
  static constexpr size_t kMaxFaultsPerNode = 64;

  struct Options {
    // Faults older than this are forgotten (--node-fault-window).
    int64_t window_ms = 600 * 1000;
    // Distinct jobs whose faults within the window cordon the node (--node-fault-jobs); 0:
    // never cordon automatically.
    int jobs_to_cordon = 2;
  };

  NodeFaultTracker(const Clock& clock, Options options) : clock_(clock), options_(options) {}

  // A rank failure of `fault.job_id` attributed to `worker`'s node, now (its time is set
  // here). Returns the reason to cordon the node with when this fault makes
  // `jobs_to_cordon` distinct jobs within the window ("ranks of 2 jobs failed here for the
  // node's reasons within 10m: j-000001 ('No space left on device' ...), j-000002 (...)"),
  // else nothing. It says so for every such fault: the caller cordons once.
  std::optional<std::string> Record(const std::string& worker, v1::NodeFault fault);

  // The node's faults within the window, oldest first.
  std::vector<v1::NodeFault> Faults(const std::string& worker) const;
  // Forgets the node's faults (an admin uncordoned it: it starts with a clean record).
  void Clear(const std::string& worker) { faults_.erase(worker); }

 private:
  void Expire(std::deque<v1::NodeFault>& q) const;

  const Clock& clock_;
  const Options options_;
  std::map<std::string, std::deque<v1::NodeFault>> faults_;  // by worker, oldest first
};

}  // namespace convoy
