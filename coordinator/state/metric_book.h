// The latest metric record of each rank of one job (Job.latest), merged as records arrive:
// a record keeps the values of the rank's earlier records of the same attempt unless it
// updates them (an evaluation record adds test_accuracy and keeps the training loss); a
// record of a newer attempt starts afresh. O(log ranks) per record.
//
// Threading: none of its own; the JobManager calls it with the Coordinator's lock held.
#pragma once

#include <map>

#include "convoy/v1/job.pb.h"

namespace convoy {

class MetricBook {
 public:
  // Indexes the records already in `job.latest` (after a coordinator restart).
  void Rebuild(const v1::Job& job);
  // Merges `rec` (of `attempt`) into `job->latest` and returns the merged record.
  v1::MetricRecord Record(v1::Job* job, const v1::MetricRecord& rec, int attempt);

 private:
  std::map<int, int> index_;  // rank -> position in job.latest
};

}  // namespace convoy
