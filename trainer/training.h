// One rank's training, in three files: train.cc (start-up, rendezvous, resume, the end),
// training_loop.cc (the step loop, the stop agreement, checkpoints, snapshots, the last will)
// and training_bad_steps.cc (the bad-step check, its skip and the rewind: trainer/bad_steps.h).
// Only train.cc's Run uses it.
#pragma once

#include <torch/torch.h>

#include <array>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/bad_steps.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/ddp.h"
#include "trainer/dist.h"
#include "trainer/live_state.h"
#include "trainer/metrics_sink.h"
#include "trainer/models.h"
#include "trainer/options.h"
#include "trainer/resume.h"
#include "trainer/sampler.h"
#include "trainer/snapshotter.h"
#include "trainer/stop.h"
#include "trainer/train_helpers.h"

namespace convoy::trainer {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Auto snapshots aim at one per this much training time.
constexpr double kAutoSnapshotSeconds = 2.0;
// Auto snapshots: rank 0 times steps [kProbeFrom, kProbeTo) of the attempt (after warm-up).
constexpr int64_t kProbeFrom = 5;
constexpr int64_t kProbeTo = 15;
// How long a restarted rank waits for the ranks of earlier attempts on its host to exit (they
// write their last will on the way out) before it resumes without them.
constexpr std::chrono::milliseconds kWaitForEarlierAttempts{10000};
// SIGTERM while blocked this long in a collective: a peer hangs; write the last will, exit.
constexpr std::chrono::milliseconds kStuckAfterStop{2000};

// Bad steps went on after a rewind, or there was no good state to rewind to: the rank writes
// its last will (the state of its last step, whose weights are those of the last good one)
// and exits kExitBadSteps. Every rank throws it at the same step (the verdicts are agreed).
class BadStepsFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One rank's training: set up, rendezvous, resume, the step loop, stops. Run() is its only
// entry; everything runs on the calling thread except the prefetcher, the snapshot writer and
// the stop watchdog (each documented in its header). Run returns the exit code (0; 143 after a
// SIGTERM that is not a preemption; kExitSampleCheckFailed) and, when training fails, writes
// the last will and exits (1; kExitBadSteps for a BadStepsFailure).
class Training {
 public:
  explicit Training(const Options& o) : o_(o), bad_(o.max_bad_steps) {}
  int Run();

 private:
  void Setup();
  void Connect();
  // --compression auto: times one all-reduce of the gradients' size against one forward and
  // backward (means over ranks, so that every rank decides alike); logs the choice and why.
  std::string ChooseCompression();
  // One forward and backward of zeros, in eval mode (batch norm untouched) and its gradients
  // cleared: the kernels' first use (oneDNN makes its primitives then), once; then, when
  // `time_it`, another, timed into compute_probe_s_.
  void ProbeCompute(bool time_it);
  void Resume();
  // The host's snapshot writer keeps the live state (trainer/live_state.h) when snapshots are
  // on, from the attempt's first step; again after a rewind, whose load replaced the
  // optimiser's buffers.
  void AttachLiveState();
  int Loop();
  // The stop agreement and the bad-step check: three floats summed across ranks, any rank's
  // SIGTERM, rank 0's proposal of the auto snapshot interval, and any rank's non-finite loss.
  // They are set after the step's last forward: with the hooks they ride on the step's
  // gradient all-reduce; with the Reducer or compression, an all-reduce of their own is
  // started then, before backward (ahead of the gradients' in every rank's order), and waited
  // for after it. TrainStep returns the agreement.
  struct Agreement {
    bool stop = false;      // stop after this step
    int bad_ranks = 0;      // ranks whose loss was not finite
    bool bad = false;       // the step is skipped (bad_ranks > 0, or a non-finite gradient norm)
    double grad_norm = -1;  // when clipping
  };
  std::array<float, GradSync::kControlFloats> LocalControl() const;
  Agreement ApplyControl(const std::array<float, GradSync::kControlFloats>& sums);
  // After the step's last forward: its control values, with this rank's loss check, on their
  // way (SetControl, or StartControlAllReduce).
  void ShareControl(const std::vector<std::pair<torch::Tensor, int64_t>>& losses, bool checked);
  // ShareControl on a GPU: the floats in device_control_, the verdict from `losses` (none:
  // not checked).
  torch::Tensor DeviceControl(const std::array<float, GradSync::kControlFloats>& local,
                              const std::vector<std::pair<torch::Tensor, int64_t>>& losses);
  void StartControlAllReduce(const torch::Tensor& values);
  Agreement FinishControlAllReduce();
  Agreement TrainStep(Prefetcher& batches, const std::vector<int64_t>& perm);
  // The step's record, log line, snapshot and checkpoint; true when the ranks must rewind now
  // (the bad steps in a row reached --max-bad-steps).
  bool AfterStep(int64_t epoch, const Agreement& agreed);

  // Bad steps (training_bad_steps.cc). Whether this step is checked (always, except for
  // --bench-step-checks' off blocks); whether the test hook makes this rank's loss NaN at it.
  bool ChecksOn() const;
  bool InjectNan(int64_t step) const;
  // Model buffers (batch norm's running statistics) change in forward: kept before each step
  // to put back when the step is skipped. Nothing for a model without buffers.
  void KeepBuffers();
  void RestoreBuffers();
  void ReportBadStep(int64_t step, const Agreement& agreed);
  // Collective (every rank at the same step): loads the newest state any rank holds (a
  // snapshot, rank 0's checkpoint) into the model and optimiser, keeping the position.
  // Throws BadStepsFailure when there is none, or when no step passed since the last rewind.
  void Rewind();
  // What this rank holds: `snapshot` (its host's newest, ReadNewestSnapshot) and, on rank 0,
  // the newest checkpoint. `checkpoint_found`: whether rank 0 found a checkpoint of its own
  // (may be null).
  std::optional<StateOffer> NewestOwnState(std::optional<FoundSnapshot> snapshot,
                                           bool* checkpoint_found);
  // Resume's first half, started on a thread of its own as soon as the data set (part of the
  // state's identity) is known, so that it overlaps the model's warm-up and the rendezvous:
  // wait for the ranks of earlier attempts on this host to leave their last state, then read
  // and check the host's newest snapshot. File reads only: nothing of LibTorch (a model made
  // here would draw from the generator the real one is initialised from).
  struct OwnSnapshot {
    double waited_s = 0;  // WaitForEarlierAttempts
    std::optional<FoundSnapshot> found;
    double read_s = 0;
  };
  void StartReadingOwnSnapshot();
  void PrintCheckCost(double step_ms) const;
  // At the end of an epoch: the sample check (0, or kExitSampleCheckFailed), evaluation.
  int EndOfEpoch(int64_t epoch, bool epoch_done);
  int GracefulStop();
  // The last will: a snapshot of the last completed step, before leaving on an error.
  void LastWill(const std::string& why);
  void Checkpoint(const Position& pos, const std::vector<uint8_t>& counts);
  // Identity() that also accepts the state spec.resume_from names.
  StateIdentity ResumeIdentity() const;
  // rank 0: the newest valid checkpoint at o_.resume_from (a file or a directory), its step in
  // `step`; nothing (and a line saying so) when there is none.
  std::optional<FoundCheckpoint> ReadResumeFrom(int64_t& step);
  StateIdentity Identity() const {
    return StateIdentity{o_.seed, train_.size(), o_.job_uid, o_.cluster_id};
  }
  StepShape Shape() const { return StepShape{o_.world_size, o_.batch_size, o_.accumulate}; }
  double Progress() const;
  std::string ExitLineCheckpointPath() const;

  const Options& o_;
  const Clock::time_point t_main_ = Clock::now();
  const double age_at_main_ = ProcessAgeSeconds();
  std::vector<std::pair<const char*, double>> startup_;
  int threads_ = 1;
  std::string backend_;
  torch::Device device_{torch::kCPU};
  bool amp_ = false;
  double base_lr_ = 0;
  double compute_probe_s_ = 0;  // one forward and backward, timed (auto compression; ProbeCompute)
  bool warmed_up_ = false;      // the kernels' first use is behind (ProbeCompute)
  std::string compression_ = "none";  // as resolved

  Dataset train_, test_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<Dist> dist_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<MetricsSink> metrics_;
  std::unique_ptr<Snapshotter> snapshotter_;
  std::unique_ptr<LiveState> live_;  // the host's writer's, when snapshots are on (live_state.h)
  double live_s_ = 0;                // seconds spent committing it
  // This rank's presence in its host's snapshot directory, for its successors (resume.h).
  std::unique_ptr<AttemptPresence> presence_;
  std::unique_ptr<StopWatchdog> watchdog_;
  double rendezvous_s_ = 0;
  Clock::time_point t_rdzv_;

  // The state of the last completed optimiser step: what a checkpoint, a snapshot or a last
  // will saves. Changed by the training thread only, under watchdog_->state_mutex().
  Position pos_;
  SampleCounts counts_;
  bool have_state_ = false;

  // Bad steps: their count (agreed: the same on every rank), the buffers kept before the
  // step, and the snapshot or checkpoint due at a bad step, taken at the next good one.
  BadStepCounter bad_;
  std::vector<torch::Tensor> buffers_;  // the model's, listed at the first step
  bool buffers_listed_ = false;
  std::vector<torch::Tensor> kept_buffers_;
  bool snapshot_due_ = false;
  bool checkpoint_due_ = false;
  SnapshotMeta snapshot_identity_;
  std::future<OwnSnapshot> own_snapshot_;  // StartReadingOwnSnapshot's, taken by Resume
  // What the checks cost this rank's training thread (seconds, steps checked), and the step
  // times of --bench-step-checks' blocks: [0] off, [1] on.
  double check_s_ = 0;
  int64_t checked_steps_ = 0;
  double ab_s_[2] = {0, 0};
  int64_t ab_n_[2] = {0, 0};

  int64_t total_steps_ = 0;
  int64_t snapshot_every_ = 0;  // 0: none (yet, for auto)
  bool snapshot_auto_ = false;
  bool snapshot_writer_ = false;  // this rank writes its host's periodic snapshots
  int64_t attempt_steps_ = 0;     // steps done by this attempt
  Clock::time_point probe_start_;
  float snapshot_proposal_ = 0;  // rank 0's auto interval, sent at the next boundary

  // Progress of this attempt, for records and the summary.
  Clock::time_point t_train_;
  int64_t samples_ = 0;
  double first_step_s_ = 0;
  double last_accuracy_ = -1;
  double loss_ = 0;
  double agree_s_ = 0;  // time waiting for the stop agreement's own all-reduce (Reducer)
  // Seconds and count of steps without [0] and with [1] a snapshot being copied or written.
  double step_s_[2] = {0, 0};
  int64_t step_n_[2] = {0, 0};
  torch::Tensor control_;  // its buffer while in flight
  std::unique_ptr<Pending> control_pending_;
  // On a GPU: this rank's control floats, kept on the device and written in place
  // (ShareControl), and the first two as last written there.
  torch::Tensor device_control_;
  std::array<float, 2> device_control_written_{0, 0};
};

}  // namespace convoy::trainer
