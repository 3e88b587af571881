// One job's metric history (v1.JobMetrics): per rank, a bounded series of its training
// records that covers the whole run, and its evaluations, one per (attempt, epoch).
//
// Downsampling: a rank's records are numbered as they arrive; record n is kept when n is a
// multiple of the rank's stride (1 at first). When a rank holds more than max_points points,
// every other point is dropped (the first and the newest stay) and the stride doubles, so
// the points stay evenly spread over the run. The newest record, when not kept, is held
// apart (RankHistory.last) so that the series reaches the end. Each record costs O(1)
// amortised: a compaction moves max_points points once per max_points/2 kept records. Memory
// is O(ranks × max_points).
//
// Threading: none of its own; the JobManager calls it with the Coordinator's lock held.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "convoy/v1/job.pb.h"

namespace convoy {

class MetricHistory {
 public:
  // The most points per rank, whatever the job's size.
  static constexpr int kMaxPointsPerRank = 512;
  // The fewest points per rank, however many ranks.
  static constexpr int kMinPointsPerRank = 16;
  // Points one job may hold in all (about 40 bytes each): a job of many ranks gets fewer
  // points per rank (ranks × points <= this, but never fewer than kMinPointsPerRank).
  static constexpr int64_t kPointsPerJob = 65536;

  // The bound on points per rank for a job of `ranks` ranks: even, in
  // [kMinPointsPerRank, kMaxPointsPerRank].
  static int PointsPerRank(int64_t ranks);

  // `max_points`: the bound per rank (even, >= 4; rounded so).
  MetricHistory(const std::string& job_id, int max_points);

  // Replaces the history with a stored one (after a coordinator restart); its own
  // max_points wins when set.
  void Restore(v1::JobMetrics stored);

  // Adds one record of `attempt`. A record with kind "eval" or a "test_accuracy" value is an
  // evaluation; one with a step or a loss is a training record; others (heartbeats,
  // summaries) are ignored. Returns true when the history changed.
  bool Add(const v1::MetricRecord& rec, int attempt);

  // The history, ranks in the order they first reported.
  const v1::JobMetrics& history() const { return h_; }
  // A copy with the ranks sorted by rank (what GetJobMetrics returns).
  v1::JobMetrics Sorted() const;

 private:
  v1::RankHistory& Rank(int rank);

  v1::JobMetrics h_;
  std::unordered_map<int, int> index_;  // rank -> position in h_.ranks
};

}  // namespace convoy
