// The statistics recorder: what the exporter reads of the jobs' life, kept as it happens.
// Counters since this coordinator started (attempts, failures and restarts by cause,
// preemptions by kind), the durations of phases that ended, and the jobs that finished since
// the exporter last looked. One of the JobManager's controllers: it reads no job state, the
// JobManager tells it what happened.
//
// Threading: none of its own; called with the Coordinator's lock held.
// Memory: both queues are bounded (kMaxQueued, the oldest dropped in O(1)), so a coordinator
// without an exporter that takes them holds at most that many, instead of one per job.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

class JobStats {
 public:
  // How long a job spent in one phase, observed when the phase ended.
  enum class Phase {
    kQueue,       // waiting (PENDING or RESTARTING) until placed
    kSchedule,    // submitted until its first attempt was placed
    kRendezvous,  // an attempt placed until every rank started
    kFirstStep,   // an attempt placed until its first metric record
  };
  struct Duration {
    Phase phase;
    double seconds;
  };
  static constexpr size_t kMaxQueued = 100000;

  explicit JobStats(const Clock& clock) : clock_(clock) {}

  // The label of an attempt's root cause in the counters: rank_exit (non-zero exit), signal,
  // worker_lost, hang, other (rendezvous timeout, launch failure, ...). From the typed cause
  // only, never from the reason's text.
  static std::string CauseLabel(const v1::RankFailure& failure);

  void AttemptStarted() { ++attempts_started_; }
  // An attempt failed with `failure`; `restarted`: the job will run again because of it.
  void AttemptFailed(const v1::RankFailure& failure, bool restarted);
  // Ranks were asked to checkpoint and stop: "priority", "drain", "resize" or "straggler".
  void Preempted(const std::string& kind) { ++preemptions_[kind]; }
  // When nodes are sick (README): a rank failure attributed to its node, a worker cordoned by
  // the coordinator itself, a straggler named, a hang found by progress.
  void NodeFault() { ++node_faults_; }
  void AutoCordoned() { ++auto_cordons_; }
  void StragglerNamed() { ++stragglers_named_; }
  void ProgressHang() { ++progress_hangs_; }
  // Bad steps (trainer.max_bad_steps): steps every rank skipped, rewinds to a good state.
  void BadStepsSkipped(int64_t n) { bad_steps_ += n; }
  void Rewound() { ++rewinds_; }
  int64_t bad_steps() const { return bad_steps_; }
  int64_t rewinds() const { return rewinds_; }
  int64_t node_faults() const { return node_faults_; }
  int64_t auto_cordons() const { return auto_cordons_; }
  int64_t stragglers_named() const { return stragglers_named_; }
  int64_t progress_hangs() const { return progress_hangs_; }
  // A phase that began at monotonic `since_mono_ms` ended now (0: its start is not known,
  // as after a coordinator restart; nothing is recorded).
  void Observe(Phase phase, int64_t since_mono_ms);
  void Record(Phase phase, double seconds);
  // Job `id` reached a terminal state.
  void Finished(const std::string& id);

  int64_t attempts_started() const { return attempts_started_; }
  const std::map<std::string, int64_t>& attempt_failures() const { return attempt_failures_; }
  const std::map<std::string, int64_t>& restarts() const { return restarts_; }
  const std::map<std::string, int64_t>& preemptions() const { return preemptions_; }

  // What was recorded since the last call, oldest first. O(returned).
  std::vector<Duration> TakeDurations();
  std::vector<std::string> TakeFinished();

 private:
  const Clock& clock_;
  int64_t attempts_started_ = 0;
  std::map<std::string, int64_t> attempt_failures_;
  std::map<std::string, int64_t> restarts_;
  std::map<std::string, int64_t> preemptions_;
  int64_t node_faults_ = 0, auto_cordons_ = 0, stragglers_named_ = 0, progress_hangs_ = 0;
  int64_t bad_steps_ = 0, rewinds_ = 0;
  std::deque<Duration> durations_;
  std::deque<std::string> finished_;
};

}  // namespace convoy
