// Training's bad steps (trainer/bad_steps.h): the check that rides on the step's all-reduce,
// the skip's bookkeeping, and the in-process rewind.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "trainer/training.h"

namespace convoy::trainer {

bool Training::ChecksOn() const {
  return o_.bench_step_checks == 0 || (attempt_steps_ / o_.bench_step_checks) % 2 == 0;
}

bool Training::InjectNan(int64_t step) const {
  return std::binary_search(o_.test_nan_loss_steps.begin(), o_.test_nan_loss_steps.end(), step);
}

void Training::KeepBuffers() {
  if (!buffers_listed_) {
    buffers_ = model_->buffers();
    buffers_listed_ = true;
  }
  if (buffers_.empty()) return;
  const auto t0 = Clock::now();
  torch::NoGradGuard no_grad;
  if (kept_buffers_.size() != buffers_.size()) {
    kept_buffers_.clear();
    for (const auto& b : buffers_) kept_buffers_.push_back(b.detach().clone());
  } else {
    for (size_t i = 0; i < buffers_.size(); ++i) kept_buffers_[i].copy_(buffers_[i]);
  }
  check_s_ += Seconds(t0);
}

void Training::RestoreBuffers() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < kept_buffers_.size() && i < buffers_.size(); ++i) {
    buffers_[i].copy_(kept_buffers_[i]);
  }
}

void Training::ShareControl(const std::vector<std::pair<torch::Tensor, int64_t>>& losses,
                            bool checked) {
  const auto t0 = Clock::now();
  std::array<float, GradSync::kControlFloats> local = LocalControl();
  torch::Tensor values;
  if (!device_.is_cpu()) {
    values = DeviceControl(local, checked ? losses : decltype(losses){});
  } else {
    if (checked) {
      for (const auto& [loss, nb] : losses) {
        if (!std::isfinite(loss.item<double>())) local[2] = 1;
      }
    }
    values = torch::from_blob(local.data(), {GradSync::kControlFloats}, torch::kFloat32).clone();
  }
  if (checked) {
    check_s_ += Seconds(t0);
    ++checked_steps_;
  }
  if (sync_->CarriesControl()) {
    sync_->SetControl(values);
  } else {
    StartControlAllReduce(values);
  }
}

torch::Tensor Training::DeviceControl(
    const std::array<float, GradSync::kControlFloats>& local,
    const std::vector<std::pair<torch::Tensor, int64_t>>& losses) {
  // On a GPU nothing here waits for the device: reading the loss would wait for the forward
  // before the backward is even queued, and so would copying a host array in. The floats stay
  // on the device and are written in place, each a launch that CPU-bound small models pay for
  // every step (a dozen launches cost 14 % of a 2 ms step on an H200): the stop and snapshot
  // floats only when they change, the verdict in two (WriteNonFiniteVerdict).
  torch::NoGradGuard no_grad;
  if (!device_control_.defined()) {
    device_control_ = torch::zeros({GradSync::kControlFloats},
                                   torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    device_control_written_ = {0, 0};
  }
  for (int i = 0; i < 2; ++i) {
    if (local[i] != device_control_written_[i]) {
      device_control_.narrow(0, i, 1).fill_(local[i]);
      device_control_written_[i] = local[i];
    }
  }
  torch::Tensor verdict = device_control_.narrow(0, 2, 1);
  if (losses.empty()) {
    verdict.zero_();
  } else {
    std::vector<torch::Tensor> each;
    for (const auto& [loss, nb] : losses) each.push_back(loss);
    WriteNonFiniteVerdict(each, verdict);
  }
  return device_control_;
}

void Training::ReportBadStep(int64_t step, const Agreement& agreed) {
  char why[200];
  if (agreed.bad_ranks > 0) {
    std::snprintf(why, sizeof(why), "the loss was not finite on %d of %d rank(s) (this rank's: %g)",
                  agreed.bad_ranks, o_.world_size, loss_);
  } else {
    std::snprintf(why, sizeof(why), "the gradient norm was %g (clipping at %g)", agreed.grad_norm,
                  o_.clip_grad_norm);
  }
  std::printf(
      "rank %d: bad step %lld skipped: %s; %lld in a row (a rewind at %lld), %lld in this "
      "attempt\n",
      o_.rank, static_cast<long long>(step), why, static_cast<long long>(bad_.in_a_row()),
      static_cast<long long>(bad_.max_in_a_row()), static_cast<long long>(bad_.total()));
  std::fflush(stdout);
}

std::optional<StateOffer> Training::NewestOwnState(std::optional<FoundSnapshot> snapshot,
                                                   bool* checkpoint_found) {
  std::optional<StateOffer> mine;
  if (snapshot) {
    mine = StateOffer{"snapshot", snapshot->path, snapshot->meta.step,
                      "",         snapshot->file, snapshot->payload};
  }
  if (checkpoint_found != nullptr) *checkpoint_found = false;
  if (o_.rank == 0 && !o_.checkpoint_dir.empty()) {
    const StateIdentity id = Identity();
    int64_t step = 0;
    auto found = ReadNewestValid(o_.checkpoint_dir, [&](const std::string& b) {
      auto probe_model = MakeModel(o_.model);
      auto probe_opt = MakeOptimizer(o_, base_lr_, probe_model->parameters());
      std::vector<uint8_t> counts;
      step = LoadState(b, *probe_model, *probe_opt, id, Shape(), &counts).global_step;
    });
    if (found) {
      mine = Newer(StateOffer{"checkpoint", found->path, step, std::move(found->bytes)},
                   std::move(mine));
      if (checkpoint_found != nullptr) *checkpoint_found = true;
    }
  }
  return mine;
}

void Training::Rewind() {
  const int64_t last_bad = pos_.global_step;
  const int64_t first_bad = bad_.first_of_run();
  const std::string run = std::to_string(bad_.in_a_row()) + " bad steps in a row (" +
                          std::to_string(first_bad) + " to " + std::to_string(last_bad) + ")";
  if (!bad_.MayRewind()) {
    throw BadStepsFailure(run + " right after the rewind to the same state: not rewinding again");
  }
  const auto t0 = Clock::now();
  // The newest snapshot this host holds is on file (a good one: none is taken at a bad step).
  snapshotter_->Flush();
  std::optional<StateOffer> mine =
      NewestOwnState(ReadNewestSnapshot(o_.snapshot_dir, snapshot_identity_), nullptr);
  watchdog_->SetPhase(StopWatchdog::Phase::kCollective);
  std::optional<AgreedState> agreed = AgreeOnNewestState(*dist_, device_, std::move(mine));
  watchdog_->SetPhase(StopWatchdog::Phase::kTraining);
  if (!agreed) {
    throw BadStepsFailure(run + " and no snapshot or checkpoint to rewind to");
  }
  {
    // The model and optimiser as that state has them (the optimiser's state is replaced, not
    // merged); the position, the epoch's sample counts and the step number stay: the batches
    // since that state are not trained again.
    std::lock_guard<std::mutex> state(watchdog_->state_mutex());
    optimizer_->state().clear();
    std::vector<uint8_t> counts;
    LoadState(agreed->state.data(), *model_, *optimizer_, Identity(), Shape(), &counts, device_);
  }
  sync_->DiscardStep();
  AttachLiveState();  // the load replaced the optimiser's buffers
  bad_.Rewound();
  const int64_t to = agreed->state.step;
  std::printf(
      "rank %d: rewound to %s %s of step %lld after %s in %.0f ms; training goes on at step "
      "%lld (sample %lld of epoch %lld): the batches of steps %lld to %lld are not trained "
      "again\n",
      o_.rank, agreed->state.kind.c_str(), agreed->state.path.c_str(), static_cast<long long>(to),
      run.c_str(), Seconds(t0) * 1e3, static_cast<long long>(last_bad + 1),
      static_cast<long long>(pos_.sample), static_cast<long long>(pos_.epoch),
      static_cast<long long>(to + 1), static_cast<long long>(last_bad));
  std::fflush(stdout);
  metrics_->Write(kRecordRewind, {{"step", static_cast<double>(last_bad)},
                                  {kMetricRewoundTo, static_cast<double>(to)},
                                  {kMetricBadSteps, static_cast<double>(bad_.total())},
                                  {kMetricRewinds, static_cast<double>(bad_.rewinds())}});
}

void Training::PrintCheckCost(double step_ms) const {
  const double per_step_ms =
      check_s_ * 1e3 / static_cast<double>(std::max<int64_t>(1, checked_steps_));
  std::printf(
      "bad steps: %lld skipped, %lld rewind(s); the checks took %.4f ms a step (%.3f %% of "
      "%.2f ms a step)\n",
      static_cast<long long>(bad_.total()), static_cast<long long>(bad_.rewinds()), per_step_ms,
      per_step_ms / std::max(step_ms, 1e-9) * 100, step_ms);
  if (o_.bench_step_checks > 0 && ab_n_[0] > 0 && ab_n_[1] > 0) {
    const double on = ab_s_[1] / static_cast<double>(ab_n_[1]);
    const double off = ab_s_[0] / static_cast<double>(ab_n_[0]);
    std::printf(
        "step checks, on and off every %lld steps: on %.3f ms a step (%lld steps), off %.3f ms "
        "(%lld steps): on/off %.4f\n",
        static_cast<long long>(o_.bench_step_checks), on * 1e3, static_cast<long long>(ab_n_[1]),
        off * 1e3, static_cast<long long>(ab_n_[0]), on / off);
  }
}

}  // namespace convoy::trainer
