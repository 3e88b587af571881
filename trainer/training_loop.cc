#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>
#include <limits>

#include "common/rank_contract.h"
#include "trainer/train_helpers.h"
#include "trainer/training.h"

namespace convoy::trainer {

namespace metric = rank_contract::metric;

double Training::Progress() const {
  const double n = static_cast<double>(train_.size());
  double p = (static_cast<double>(pos_.epoch) * n + static_cast<double>(pos_.sample)) /
             (static_cast<double>(o_.epochs) * n);
  if (o_.max_steps > 0) {
    p = std::max(p, static_cast<double>(pos_.global_step) / static_cast<double>(o_.max_steps));
  }
  return std::min(1.0, p);
}

std::array<float, GradSync::kControlFloats> Training::LocalControl() const {
  return {StopRequested() ? 1.0f : 0.0f, o_.rank == 0 ? snapshot_proposal_ : 0.0f, 0.0f};
}

Training::Agreement Training::ApplyControl(
    const std::array<float, GradSync::kControlFloats>& sums) {
  if (sums[1] > 0 && snapshot_auto_) {
    snapshot_every_ = static_cast<int64_t>(sums[1]);
    snapshot_auto_ = false;
    if (o_.rank == 0) {
      std::cout << "snapshots: every " << snapshot_every_ << " steps (auto: about "
                << kAutoSnapshotSeconds << " s of training)" << std::endl;
    }
  }
  snapshot_proposal_ = 0;
  Agreement a;
  a.stop = sums[0] > 0;
  a.bad_ranks = static_cast<int>(std::lround(sums[2]));
  a.bad = a.bad_ranks > 0;
  return a;
}

void Training::StartControlAllReduce(const torch::Tensor& values) {
  control_ = values.to(device_, torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);
  // Issued after the step's last forward and before its backward on every rank, so it runs
  // before the step's gradient all-reduces and is done (or nearly) by the time they are.
  control_pending_ = dist_->AllReduceSumAsync(control_);
}

Training::Agreement Training::FinishControlAllReduce() {
  const auto t0 = Clock::now();
  control_pending_->Wait();
  control_pending_.reset();
  agree_s_ += Seconds(t0);
  torch::Tensor sums_t = control_.cpu();
  std::array<float, GradSync::kControlFloats> sums{};
  std::copy_n(sums_t.data_ptr<float>(), GradSync::kControlFloats, sums.begin());
  return ApplyControl(sums);
}

Training::Agreement Training::TrainStep(Prefetcher& batches, const std::vector<int64_t>& perm) {
  const int64_t n = train_.size();
  const StepShape shape = Shape();
  const int64_t count = StepSamples(n, pos_.sample, shape);
  const bool checked = ChecksOn();
  const bool inject = InjectNan(pos_.global_step + 1);
  SetLr(*optimizer_, ScheduledLr(o_, base_lr_, pos_.epoch, Progress()));
  if (checked) KeepBuffers();
  // Each micro-batch's mean loss and size, read once the step's collectives are done: reading
  // a GPU's loss mid-step would wait for its forward before the backward is even queued.
  std::vector<std::pair<torch::Tensor, int64_t>> losses;
  int64_t mine = 0;
  for (int a = 0; a < o_.accumulate; ++a) {
    torch::Tensor x, y;
    if (!batches.Next(&x, &y)) throw std::runtime_error("the data ran out mid-epoch");
    const bool last = a == o_.accumulate - 1;
    if (!x.defined() && !last) continue;  // an empty micro-batch that synchronises nothing
    sync_->BeforeForward(last);
    torch::Tensor scaled;
    if (x.defined()) {
      x = x.to(device_);
      y = y.to(device_);
      torch::Tensor loss;
      {
        AutocastScope autocast(amp_, torch::kBFloat16);
        loss = torch::nn::functional::cross_entropy(model_->forward(x), y);
      }
      // The test hook: a forward that blew up (the loss and every gradient NaN).
      if (inject) loss = loss * std::numeric_limits<double>::quiet_NaN();
      const int64_t nb = x.size(0);
      // The averaged gradient is the gradient of the mean over the step's `count` samples: a
      // micro-batch's mean weighs nb·W/count (1/A for full steps, divided the same way as
      // before global positions, so that full steps stay bit-identical).
      scaled = count == shape.full()
                   ? loss / o_.accumulate
                   : loss * (static_cast<double>(nb) * o_.world_size / static_cast<double>(count));
      losses.emplace_back(loss.detach(), nb);
      mine += nb;
    } else {
      // No sample left for this rank in the epoch's last step: it still joins the gradient
      // all-reduce, contributing zeros (a pass over one blank image, times 0; in eval mode so
      // that batch-norm statistics stay as they are).
      model_->eval();
      torch::Tensor z = torch::zeros({1, 1, 28, 28}, torch::TensorOptions().device(device_));
      torch::Tensor t =
          torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
      AutocastScope autocast(amp_, torch::kBFloat16);
      scaled = torch::nn::functional::cross_entropy(model_->forward(z), t) * 0.0;
      model_->train();
    }
    if (last) ShareControl(losses, checked);
    sync_->BeforeBackward();
    scaled.backward();
  }
  watchdog_->SetPhase(StopWatchdog::Phase::kCollective);
  sync_->Finish();
  watchdog_->SetPhase(StopWatchdog::Phase::kTraining);
  Agreement agreed;
  if (sync_->CarriesControl()) {
    agreed = ApplyControl(sync_->Control());
  } else {
    watchdog_->SetPhase(StopWatchdog::Phase::kCollective);
    agreed = FinishControlAllReduce();
    watchdog_->SetPhase(StopWatchdog::Phase::kTraining);
  }
  double loss_sum = 0;
  for (const auto& [loss, nb] : losses) loss_sum += loss.item<double>() * static_cast<double>(nb);
  if (!agreed.bad && o_.clip_grad_norm > 0) {
    // Computed from the averaged gradients, bit-identical on every rank: the same verdict
    // everywhere (a non-finite element makes the norm non-finite in any order of summation).
    agreed.grad_norm = torch::nn::utils::clip_grad_norm_(params_, o_.clip_grad_norm);
    agreed.bad = checked && !std::isfinite(agreed.grad_norm);
  }
  if (agreed.bad) {
    // Never applied: the optimiser (and its state) and the model's buffers stay as they were
    // before the step, and so does what a compression would carry into the next one.
    const auto t0 = Clock::now();
    RestoreBuffers();
    sync_->DiscardStep();
    check_s_ += Seconds(t0);
  }
  {
    std::lock_guard<std::mutex> state(watchdog_->state_mutex());
    if (live_ != nullptr) live_->BeginUpdate();
    if (!agreed.bad) OptimizerStep(*optimizer_);
    // A skipped step still takes its samples and its number: its batch is dropped.
    counts_.AddStep(perm, pos_.sample, shape);
    pos_.sample += count;
    ++pos_.global_step;
    if (live_ != nullptr) {
      const auto t_live = Clock::now();
      live_->Commit(pos_, counts_.counts());
      live_s_ += Seconds(t_live);
    }
  }
  ClearGrads(params_);
  samples_ += mine;
  if (mine > 0) loss_ = loss_sum / static_cast<double>(mine);
  return agreed;
}

bool Training::AfterStep(int64_t epoch, const Agreement& agreed) {
  const int64_t step = pos_.global_step;
  const bool rewind = bad_.Record(step, agreed.bad);
  if (agreed.bad) ReportBadStep(step, agreed);
  ++attempt_steps_;
  const double secs = Seconds(t_train_);
  std::vector<std::pair<std::string, double>> rec{
      {metric::kStep, static_cast<double>(step)},
      {metric::kEpoch, static_cast<double>(epoch)},
      {metric::kLoss, loss_},
      {metric::kSamples, static_cast<double>(samples_)},
      {metric::kSeconds, secs},
      {metric::kSamplesPerS, static_cast<double>(samples_) / std::max(secs, 1e-9)},
      {metric::kTotalSteps, static_cast<double>(total_steps_)},
      {kMetricBadSteps, static_cast<double>(bad_.total())},
      {kMetricRewinds, static_cast<double>(bad_.rewinds())}};
  if (attempt_steps_ == 1) {
    // After the first step, off the start's critical path: making the 13 MB file costs tens
    // of milliseconds (its pages are new).
    AttachLiveState();
    const double after_rdzv = Seconds(t_rdzv_) - rendezvous_s_;
    first_step_s_ = age_at_main_ + Seconds(t_main_);
    rec.push_back({metric::kFirstStepS, first_step_s_});
    std::cout << "first step done " << first_step_s_ << " s after process start, " << after_rdzv
              << " s after rendezvous" << std::endl;
    startup_.emplace_back("first_step_unix", UnixSeconds());
    std::string line = "startup {\"rank\": " + std::to_string(o_.rank) +
                       ", \"attempt\": " + std::to_string(o_.attempt);
    for (const auto& [name, at] : startup_) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), ", \"%s\": %.3f", name, at);
      line += buf;
    }
    std::cout << line << "}" << std::endl;
  }
  metrics_->Write(metric::kKindStep, rec);
  if (step % o_.log_every == 0 || step == total_steps_) {
    std::printf("rank %d epoch %lld step %lld/%lld loss %.4f %.0f samples/s\n", o_.rank,
                static_cast<long long>(epoch), static_cast<long long>(step),
                static_cast<long long>(total_steps_), loss_,
                static_cast<double>(samples_) / std::max(secs, 1e-9));
    std::fflush(stdout);
  }
  // The auto snapshot interval: rank 0 times steps [kProbeFrom, kProbeTo) of this attempt and
  // proposes at the next boundary, where every rank learns it.
  if (snapshot_auto_ && o_.rank == 0) {
    if (attempt_steps_ == kProbeFrom) probe_start_ = Clock::now();
    if (attempt_steps_ == kProbeTo) {
      const double step_s = Seconds(probe_start_) / static_cast<double>(kProbeTo - kProbeFrom);
      snapshot_proposal_ = static_cast<float>(
          std::clamp<double>(std::round(kAutoSnapshotSeconds / std::max(step_s, 1e-6)), 1, 1e6));
    }
  }
  // Only a state that passed the check is saved: a snapshot or checkpoint due at a bad step
  // is taken at the next good one (a rewind must not land on the state that failed).
  snapshot_due_ = snapshot_due_ || (snapshot_every_ > 0 && step % snapshot_every_ == 0);
  checkpoint_due_ = checkpoint_due_ || (o_.checkpoint_every > 0 && step % o_.checkpoint_every == 0);
  if (agreed.bad) return rewind;
  if (snapshot_due_ && snapshot_writer_) snapshotter_->Capture(pos_, counts_.counts());
  if (checkpoint_due_) Checkpoint(pos_, counts_.counts());
  snapshot_due_ = checkpoint_due_ = false;
  return false;
}

void Training::Checkpoint(const Position& pos, const std::vector<uint8_t>& counts) {
  if (o_.rank != 0 || o_.checkpoint_dir.empty()) return;
  std::string bytes;
  try {
    bytes = SaveState(*model_, *optimizer_, pos, counts, Identity());
  } catch (const std::runtime_error& e) {
    // A state with a non-finite value (trainer/bad_steps.h): never written.
    std::cerr << "warning: no checkpoint: " << e.what() << std::endl;
    return;
  }
  const std::string path = WriteCheckpoint(o_.checkpoint_dir, bytes, pos.global_step,
                                           o_.checkpoints_kept_by_worker ? 0 : 2);
  // Complete on disk: marked for the job's checkpoint policy (README "Checkpoints kept by
  // policy") with its step and the latest values known, the test accuracy of the latest
  // evaluation included.
  std::vector<std::pair<std::string, double>> fields = {
      {metric::kStep, static_cast<double>(pos.global_step)}, {metric::kLoss, loss_}};
  if (last_accuracy_ >= 0) fields.emplace_back(metric::kTestAccuracy, last_accuracy_);
  metrics_->Write(metric::kKindCheckpoint, fields,
                  {{metric::kCheckpointPath, path.substr(path.rfind('/') + 1)}});
}

int Training::EndOfEpoch(int64_t epoch, bool epoch_done) {
  if (epoch_done) {
    const SampleCounts::Check check = counts_.Verify();
    if (o_.rank == 0) {
      std::cout << EpochCheckLine(epoch, check) << std::endl;
      metrics_->Write(metric::kKindEpochCheck,
                      {{metric::kEpoch, static_cast<double>(epoch)},
                       {metric::kSamples, static_cast<double>(check.samples)},
                       {"repeated", static_cast<double>(check.repeated)},
                       {"skipped", static_cast<double>(check.skipped)}});
    }
    if (!check.ok()) {
      std::cerr << "convoy-trainer: error: epoch " << epoch << " sample check failed ("
                << check.repeated << " repeated, " << check.skipped << " skipped)" << std::endl;
      return kExitSampleCheckFailed;
    }
  }
  const bool complete = pos_.global_step >= total_steps_;
  // Training is complete: its state goes to disk, with or without an evaluation (before it, so
  // that a stop during it, a preemption or a lost worker, costs only the evaluation, on any
  // host). Without one, an epoch's end is checkpointed below; a --max-steps inside an epoch
  // was not saved at all unless --checkpoint-every happened to divide it. Not after a bad
  // step: only a state that passed the check is saved (AfterStep).
  if (complete && (o_.eval || !epoch_done) && bad_.in_a_row() == 0) {
    Checkpoint(pos_, counts_.counts());
  }
  if (o_.eval && (epoch_done || complete)) {
    // Only its all-reduce waits on the other ranks: the forward passes before it are this
    // rank's own work, which a SIGTERM lets finish (the watchdog's stuck timer is for a
    // collective whose peer does not answer, not for seconds of local computation).
    EvalResult r = Evaluate(*model_, test_, *dist_, device_, *metrics_, [this](bool in) {
      watchdog_->SetPhase(in ? StopWatchdog::Phase::kCollective : StopWatchdog::Phase::kTraining);
    });
    last_accuracy_ = r.accuracy;
    metrics_->Write(metric::kKindEval, {{metric::kStep, static_cast<double>(pos_.global_step)},
                                        {metric::kEpoch, static_cast<double>(epoch)},
                                        {metric::kTestAccuracy, r.accuracy},
                                        {metric::kTestLoss, r.loss}});
    std::printf("rank %d epoch %lld: test accuracy %.2f%% (loss %.4f) at %.1f s\n", o_.rank,
                static_cast<long long>(epoch), r.accuracy * 100, r.loss,
                age_at_main_ + Seconds(t_main_));
    std::fflush(stdout);
  }
  if (epoch_done) {
    {
      std::lock_guard<std::mutex> state(watchdog_->state_mutex());
      pos_ = Position{epoch + 1, 0, pos_.global_step};
      counts_.Reset();
    }
    // After a bad step, at the next good one (AfterStep).
    if (bad_.in_a_row() == 0) {
      Checkpoint(pos_, counts_.counts());
    } else {
      checkpoint_due_ = true;
    }
  }
  return 0;
}

int Training::Loop() {
  t_train_ = Clock::now();
  const int64_t n = train_.size();
  const StepShape shape = Shape();
  // (An epoch whose samples are all used but whose end was not handled, as after a resume from
  // a state saved at its last step, still gets its sample check.)
  while (pos_.epoch < o_.epochs && (pos_.global_step < total_steps_ || pos_.sample >= n)) {
    const int64_t epoch = pos_.epoch;
    const std::vector<int64_t> perm = EpochPermutation(n, o_.seed, epoch);
    // This rank's micro-batches for the rest of the epoch.
    std::vector<std::vector<int64_t>> batches;
    for (int64_t p = pos_.sample; p < n; p += StepSamples(n, p, shape)) {
      for (int a = 0; a < o_.accumulate; ++a) {
        std::vector<int64_t> idx = MicroBatchPositions(n, p, shape, o_.rank, a);
        for (int64_t& i : idx) i = perm[static_cast<size_t>(i)];
        batches.push_back(std::move(idx));
      }
    }
    Prefetcher prefetch(train_, std::move(batches));
    while (pos_.sample < n && pos_.global_step < total_steps_) {
      // The ranks agree on a stop during the step: it takes effect after it.
      const auto t0 = Clock::now();
      const bool writing = snapshotter_->busy();
      const bool checked = ChecksOn();
      const Agreement agreed = TrainStep(prefetch, perm);
      const bool rewind = AfterStep(epoch, agreed);
      // Steps during which a snapshot was copied or written, against the others: what the
      // snapshots cost, measured within the run (the machine's load drifts between runs).
      // The same for --bench-step-checks' blocks with and without the bad-step checks.
      const double dt = Seconds(t0);
      const int i = writing || snapshotter_->busy() ? 1 : 0;
      step_s_[i] += dt;
      ++step_n_[i];
      // (The first two blocks, the warm-up, are left out.)
      if (attempt_steps_ > 2 * o_.bench_step_checks) {
        ab_s_[checked ? 1 : 0] += dt;
        ++ab_n_[checked ? 1 : 0];
      }
      if (rewind) Rewind();
      if (agreed.stop) return GracefulStop();
    }
    const int code = EndOfEpoch(epoch, pos_.sample >= n);
    if (code != 0) return code;
  }
  return 0;
}

std::string Training::ExitLineCheckpointPath() const {
  if (!o_.checkpoint_dir.empty()) return CheckpointPath(o_.checkpoint_dir, pos_.global_step);
  if (!o_.snapshot_dir.empty()) return SnapshotPath(o_.snapshot_dir, pos_.global_step);
  return "none (no checkpoint or snapshot directory)";
}

int Training::GracefulStop() {
  // Held to the end: the watchdog cannot write a last will in the middle of this.
  std::lock_guard<std::mutex> state(watchdog_->state_mutex());
  Checkpoint(pos_, counts_.counts());
  if (snapshot_writer_ && snapshotter_->enabled()) {
    try {
      snapshotter_->WriteNow(pos_, counts_.counts());
    } catch (const std::exception& e) {
      std::cerr << "warning: the snapshot of step " << pos_.global_step
                << " was not written: " << e.what() << std::endl;
    }
  }
  std::string reason;
  const bool preempted = ReadPreemptReason(o_.preempt_file, &reason);
  if (preempted) {
    std::cout << "preempted at step " << pos_.global_step << ": " << reason << "; checkpoint "
              << ExitLineCheckpointPath() << std::endl;
    return 0;
  }
  std::cout << "stopped by SIGTERM at step " << pos_.global_step
            << " (no preemption file: not a preemption); checkpoint " << ExitLineCheckpointPath()
            << std::endl;
  return kExitStoppedBySigterm;
}

void Training::LastWill(const std::string& why) {
  if (!have_state_) return;
  if (snapshotter_ == nullptr || !snapshotter_->enabled()) {
    std::cerr << "no last will (" << why << "): no snapshot directory" << std::endl;
    return;
  }
  try {
    const std::string path = snapshotter_->WriteNow(pos_, counts_.counts());
    std::cout << "last will: snapshot " << path << " at step " << pos_.global_step << " (" << why
              << ")" << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "last will failed (" << why << "): " << e.what() << std::endl;
  }
}

}  // namespace convoy::trainer
