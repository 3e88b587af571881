#include "trainer/train.h"

#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/ddp.h"
#include "trainer/dist.h"
#include "trainer/metrics_sink.h"
#include "trainer/models.h"
#include "trainer/resume.h"
#include "trainer/sampler.h"
#include "trainer/snapshotter.h"
#include "trainer/stop.h"
#include "trainer/train_helpers.h"

namespace convoy::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Auto snapshots aim at one per this much training time.
constexpr double kAutoSnapshotSeconds = 2.0;
// Auto snapshots: rank 0 times steps [kProbeFrom, kProbeTo) of the attempt (after warm-up).
constexpr int64_t kProbeFrom = 5;
constexpr int64_t kProbeTo = 15;
// SIGTERM while blocked this long in a collective: a peer hangs; write the last will, exit.
constexpr std::chrono::milliseconds kStuckAfterStop{2000};

// One rank's training: set up, rendezvous, resume, the step loop, stops. Run() is its only
// entry; everything runs on the calling thread except the prefetcher, the snapshot writer and
// the stop watchdog (each documented in its header).
class Training {
 public:
  explicit Training(const Options& o) : o_(o) {}
  int Run();

 private:
  void Setup();
  void Connect();
  void Resume();
  int Loop();
  // The stop agreement at a step boundary (a two-float all-reduce: any rank's SIGTERM, and
  // rank 0's proposal of the auto snapshot interval). True: stop now.
  bool Boundary();
  void TrainStep(Prefetcher& batches, const std::vector<int64_t>& perm);
  void AfterStep(int64_t epoch);
  // At the end of an epoch: the sample check (0, or kExitSampleCheckFailed), evaluation.
  int EndOfEpoch(int64_t epoch, bool epoch_done);
  int GracefulStop();
  // The last will: a snapshot of the last completed step, before leaving on an error.
  void LastWill(const std::string& why);
  void Checkpoint(const Position& pos, const std::vector<uint8_t>& counts);
  StateIdentity Identity() const { return StateIdentity{o_.seed, train_.size()}; }
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

  Dataset train_, test_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<Dist> dist_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<MetricsSink> metrics_;
  std::unique_ptr<Snapshotter> snapshotter_;
  std::unique_ptr<StopWatchdog> watchdog_;
  double rendezvous_s_ = 0;
  Clock::time_point t_rdzv_;

  // The state of the last completed optimiser step: what a checkpoint, a snapshot or a last
  // will saves. Changed by the training thread only, under watchdog_->state_mutex().
  Position pos_;
  SampleCounts counts_;
  bool have_state_ = false;

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
};

int Training::Run() {
  // The stop flag and its watchdog belong to the rank (after the warm trainer's fork).
  InstallStopHandler();
  watchdog_ = std::make_unique<StopWatchdog>(
      [this] {
        std::string reason;
        const bool preempted = ReadPreemptReason(o_.preempt_file, &reason);
        std::printf("%s before training started; nothing to save\n",
                    preempted ? ("preempted: " + reason).c_str() : "stopped by SIGTERM");
        std::fflush(stdout);
        _exit(preempted ? 0 : kExitStoppedBySigterm);
      },
      [this] {
        LastWill("SIGTERM while blocked in a collective for " +
                 std::to_string(kStuckAfterStop.count()) + " ms (a peer does not answer)");
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(kExitStoppedBySigterm);
      },
      kStuckAfterStop);
  Setup();
  Connect();
  Resume();
  watchdog_->SetPhase(StopWatchdog::Phase::kTraining);
  int code = 0;
  try {
    code = Loop();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> state(watchdog_->state_mutex());
    LastWill(std::string("training failed: ") + e.what());
    throw;
  }
  if (snapshotter_ != nullptr && snapshotter_->enabled()) {
    snapshotter_->Flush();
    const Snapshotter::Stats s = snapshotter_->stats();
    if (s.captures > 0) {
      std::printf(
          "snapshots: %lld written, %lld skipped (previous still being written); per snapshot "
          "%.2f ms copying in the training thread, %.1f ms writing in the background\n",
          static_cast<long long>(s.written), static_cast<long long>(s.skipped_busy),
          s.copy_ms / static_cast<double>(s.captures),
          s.background_ms / static_cast<double>(std::max<int64_t>(1, s.written)));
    }
  }
  if (code != 0) return code;
  if (!o_.save_params.empty()) {
    std::vector<torch::Tensor> params;
    for (const auto& p : model_->parameters()) params.push_back(p.detach().cpu());
    torch::save(params,
                o_.rank == 0 ? o_.save_params : o_.save_params + ".rank" + std::to_string(o_.rank));
  }
  // One machine-readable line for benchmarks: throughput over the training loop, first-step
  // latency since process start, peak resident memory, accuracy.
  const double secs = Seconds(t_train_);
  std::printf(
      "summary {\"rank\": %d, \"world\": %d, \"steps\": %lld, \"samples_per_s\": %.1f, "
      "\"first_step_s\": %.3f, \"peak_rss_mb\": %.1f, \"test_accuracy\": %.4f, "
      "\"train_seconds\": %.2f}\n",
      o_.rank, o_.world_size, static_cast<long long>(pos_.global_step),
      static_cast<double>(samples_) / std::max(secs, 1e-9), first_step_s_, PeakRssKb() / 1024.0,
      last_accuracy_, secs);
  std::printf(
      "rank %d done: %lld steps, %.1f s of training%s\n", o_.rank,
      static_cast<long long>(pos_.global_step), secs,
      last_accuracy_ >= 0 ? (", test accuracy " + std::to_string(last_accuracy_)).c_str() : "");
  return 0;
}

void Training::Setup() {
  // Wall-clock times of the start-up phases, printed as one "startup {...}" line at the first
  // step (bench/start_latency.py lines them up with the job's events).
  startup_ = {{"start_unix", UnixSeconds() - age_at_main_}, {"main_unix", UnixSeconds()}};
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = o_.threads;
  if (threads_ == 0) {
    const char* omp = std::getenv("OMP_NUM_THREADS");
    threads_ = omp != nullptr ? std::max(1, std::atoi(omp))
                              : std::max(1, cores / std::max(1, o_.local_world_size));
  }
  torch::set_num_threads(threads_);

  backend_ = o_.backend;
  if (backend_ == "auto") backend_ = NcclAvailable() ? "nccl" : "gloo";
  if (backend_ == "nccl") device_ = torch::Device(torch::kCUDA, o_.local_rank);
  amp_ = o_.amp != "off";
  if (amp_ && !device_.is_cuda()) {
    throw std::runtime_error("--amp " + o_.amp + ": mixed precision runs on GPUs (backend nccl)");
  }
  // Linear scaling: the spec's lr is for the job at its full size (max_world_size).
  base_lr_ = o_.lr * o_.world_size / o_.max_world_size;
  std::string lr = std::to_string(base_lr_);
  if (o_.max_world_size != o_.world_size) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%g (%g x world %d / max world %d)", base_lr_, o_.lr,
                  o_.world_size, o_.max_world_size);
    lr = buf;
  } else {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", base_lr_);
    lr = buf;
  }
  std::cout << "convoy-trainer: rank " << o_.rank << "/" << o_.world_size << " (local "
            << o_.local_rank << "/" << o_.local_world_size << "), backend " << backend_
            << ", model " << o_.model << ", batch " << o_.batch_size << " x " << o_.accumulate
            << ", lr " << lr << ", mixed precision " << o_.amp << ", intra-op threads " << threads_
            << ", BLAS " << LoadedBlas() << std::endl;

  train_ = LoadFashionMnist(o_.data_dir, "train", o_.train_limit, o_.data_cache);
  test_ = LoadFashionMnist(o_.data_dir, "t10k", 0, o_.data_cache);
  std::cout << "data: " << train_.source_note << "; " << test_.source_note << std::endl;
  startup_.emplace_back("data_unix", UnixSeconds());

  torch::manual_seed(static_cast<uint64_t>(o_.seed));
  model_ = MakeModel(o_.model);
  model_->to(device_);
  optimizer_ = MakeOptimizer(o_, base_lr_, model_->parameters());
  std::cout << "model " << o_.model << ": " << CountParameters(*model_) << " parameters"
            << std::endl;

  // Warm up kernels (oneDNN creates its convolution primitives on first use) while the
  // other ranks are still starting, so that the first step after the rendezvous is fast.
  {
    torch::Tensor x = torch::zeros({o_.batch_size, 1, 28, 28}).to(device_);
    torch::Tensor y = torch::zeros({o_.batch_size}, torch::kInt64).to(device_);
    model_->eval();  // leaves batch-norm running statistics untouched
    torch::nn::functional::cross_entropy(model_->forward(x), y).backward();
    model_->train();
    ClearGrads(model_->parameters());
  }
  startup_.emplace_back("model_unix", UnixSeconds());
}

void Training::Connect() {
  t_rdzv_ = Clock::now();
  dist_ =
      Dist::Create(o_.rank, o_.world_size, o_.master_addr, o_.master_port, backend_,
                   std::chrono::seconds(o_.pg_timeout_s), o_.allreduce, CountParameters(*model_));
  rendezvous_s_ = Seconds(t_rdzv_);
  startup_.emplace_back("rendezvous_unix", UnixSeconds());
  params_ = model_->parameters();
  BroadcastFromRankZero(*dist_, params_, model_->buffers());
  sync_ = MakeGradSync(o_.ddp, params_, *dist_, o_.bucket_mb);
  std::cout << "rendezvous with " << o_.world_size << " rank(s) at " << o_.master_addr << ":"
            << o_.master_port << " took " << rendezvous_s_ << " s; " << sync_->num_buckets()
            << " gradient bucket(s) (" << o_.ddp << "); all-reduce over " << dist_->allreduce_path()
            << std::endl;
}

void Training::Resume() {
  const StateIdentity id = Identity();
  SnapshotMeta identity;
  identity.job = o_.job_id;
  identity.model = o_.model;
  identity.seed = id.seed;
  identity.samples = id.samples;
  snapshotter_ =
      std::make_unique<Snapshotter>(o_.snapshot_dir, identity, id, *model_, *optimizer_, [this] {
        Snapshotter::Shadow s;
        auto m = MakeModel(o_.model);
        s.optimizer = MakeOptimizer(o_, base_lr_, m->parameters());
        s.model = std::move(m);
        return s;
      });

  // What this rank holds: its host's newest snapshot; rank 0 also the newest checkpoint.
  std::optional<StateOffer> mine;
  if (auto snap = ReadNewestSnapshot(o_.snapshot_dir, identity)) {
    mine = StateOffer{"snapshot", snap->path, snap->meta.step, std::move(snap->payload)};
  }
  if (o_.rank == 0 && !o_.checkpoint_dir.empty()) {
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
    }
  }
  std::optional<AgreedState> agreed = AgreeOnNewestState(*dist_, device_, std::move(mine));
  counts_ = SampleCounts(train_.size());
  if (agreed) {
    pos_ = LoadState(agreed->state.bytes, *model_, *optimizer_, id, Shape(),
                     &counts_.mutable_counts());
    std::cout << "resumed from " << agreed->state.kind << " " << agreed->state.path << " at epoch "
              << pos_.epoch << ", step " << pos_.global_step << " (sample " << pos_.sample
              << " of the epoch)" << std::endl;
    if (o_.world_size > 1) {
      std::cout << "(the newest state was rank " << agreed->holder << "'s)" << std::endl;
    }
  } else if (!o_.checkpoint_dir.empty() || !o_.snapshot_dir.empty()) {
    std::cout << "no checkpoint or snapshot to resume from: starting at step 0" << std::endl;
  }
  have_state_ = true;

  // Steps left at this world size; with a world size other than the previous attempt's, the
  // total changes (the samples left do not): total_steps is "this attempt's estimate".
  int64_t left = 0;
  for (int64_t e = pos_.epoch; e < o_.epochs; ++e) {
    left += StepsLeft(train_.size(), e == pos_.epoch ? pos_.sample : 0, Shape());
  }
  total_steps_ = pos_.global_step + left;
  if (o_.max_steps > 0) total_steps_ = std::min(total_steps_, o_.max_steps);

  // Snapshots: the lowest local rank of each host writes them.
  snapshot_writer_ = o_.local_rank == 0;
  if (o_.snapshot_dir.empty()) {
    std::cout << "snapshots: off (no CONVOY_SNAPSHOT_DIR or --snapshot-dir)" << std::endl;
  } else if (o_.snapshot_every == 0) {
    std::cout << "snapshots: off (--snapshot-every 0); a last will still goes to "
              << o_.snapshot_dir << std::endl;
  } else if (o_.snapshot_every > 0) {
    snapshot_every_ = o_.snapshot_every;
    std::cout << "snapshots: every " << snapshot_every_ << " steps in " << o_.snapshot_dir
              << std::endl;
  } else {
    snapshot_auto_ = true;
    std::cout << "snapshots: about every " << kAutoSnapshotSeconds << " s of training (auto) in "
              << o_.snapshot_dir << std::endl;
  }
  metrics_ = std::make_unique<MetricsSink>(o_.metrics_socket);
}

double Training::Progress() const {
  const double n = static_cast<double>(train_.size());
  double p = (static_cast<double>(pos_.epoch) * n + static_cast<double>(pos_.sample)) /
             (static_cast<double>(o_.epochs) * n);
  if (o_.max_steps > 0) {
    p = std::max(p, static_cast<double>(pos_.global_step) / static_cast<double>(o_.max_steps));
  }
  return std::min(1.0, p);
}

bool Training::Boundary() {
  float local[2] = {StopRequested() ? 1.0f : 0.0f, o_.rank == 0 ? snapshot_proposal_ : 0.0f};
  torch::Tensor control = torch::from_blob(local, {2}, torch::kFloat32).clone().to(device_);
  watchdog_->SetPhase(StopWatchdog::Phase::kCollective);
  dist_->AllReduceSum(control);
  watchdog_->SetPhase(StopWatchdog::Phase::kTraining);
  control = control.cpu();
  const float* c = control.data_ptr<float>();
  if (c[1] > 0 && snapshot_auto_) {
    snapshot_every_ = static_cast<int64_t>(c[1]);
    snapshot_auto_ = false;
    if (o_.rank == 0) {
      std::cout << "snapshots: every " << snapshot_every_ << " steps (auto: about "
                << kAutoSnapshotSeconds << " s of training)" << std::endl;
    }
  }
  snapshot_proposal_ = 0;
  return c[0] > 0;
}

void Training::TrainStep(Prefetcher& batches, const std::vector<int64_t>& perm) {
  const int64_t n = train_.size();
  const StepShape shape = Shape();
  const int64_t count = StepSamples(n, pos_.sample, shape);
  SetLr(*optimizer_, ScheduledLr(o_, base_lr_, pos_.epoch, Progress()));
  double loss_sum = 0;
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
      const int64_t nb = x.size(0);
      // The averaged gradient is the gradient of the mean over the step's `count` samples: a
      // micro-batch's mean weighs nb·W/count (1/A for full steps, divided the same way as
      // before global positions, so that full steps stay bit-identical).
      scaled = count == shape.full()
                   ? loss / o_.accumulate
                   : loss * (static_cast<double>(nb) * o_.world_size / static_cast<double>(count));
      loss_sum += loss.item<double>() * static_cast<double>(nb);
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
    sync_->BeforeBackward();
    scaled.backward();
  }
  watchdog_->SetPhase(StopWatchdog::Phase::kCollective);
  sync_->Finish();
  watchdog_->SetPhase(StopWatchdog::Phase::kTraining);
  if (o_.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(params_, o_.clip_grad_norm);
  {
    std::lock_guard<std::mutex> state(watchdog_->state_mutex());
    optimizer_->step();
    counts_.AddStep(perm, pos_.sample, shape);
    pos_.sample += count;
    ++pos_.global_step;
  }
  ClearGrads(params_);
  samples_ += mine;
  if (mine > 0) loss_ = loss_sum / static_cast<double>(mine);
}

void Training::AfterStep(int64_t epoch) {
  const int64_t step = pos_.global_step;
  ++attempt_steps_;
  const double secs = Seconds(t_train_);
  std::vector<std::pair<std::string, double>> rec{
      {"step", static_cast<double>(step)},
      {"epoch", static_cast<double>(epoch)},
      {"loss", loss_},
      {"samples", static_cast<double>(samples_)},
      {"seconds", secs},
      {"samples_per_s", static_cast<double>(samples_) / std::max(secs, 1e-9)},
      {"total_steps", static_cast<double>(total_steps_)}};
  if (attempt_steps_ == 1) {
    const double after_rdzv = Seconds(t_rdzv_) - rendezvous_s_;
    first_step_s_ = age_at_main_ + Seconds(t_main_);
    rec.push_back({"first_step_s", first_step_s_});
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
  metrics_->Write("step", rec);
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
  if (snapshot_writer_ && snapshot_every_ > 0 && step % snapshot_every_ == 0) {
    snapshotter_->Capture(pos_, counts_.counts());
  }
  if (o_.checkpoint_every > 0 && step % o_.checkpoint_every == 0) {
    Checkpoint(pos_, counts_.counts());
  }
}

void Training::Checkpoint(const Position& pos, const std::vector<uint8_t>& counts) {
  if (o_.rank != 0 || o_.checkpoint_dir.empty()) return;
  WriteCheckpoint(o_.checkpoint_dir, SaveState(*model_, *optimizer_, pos, counts, Identity()),
                  pos.global_step);
}

int Training::EndOfEpoch(int64_t epoch, bool epoch_done) {
  if (epoch_done) {
    const SampleCounts::Check check = counts_.Verify();
    if (o_.rank == 0) {
      std::cout << EpochCheckLine(epoch, check) << std::endl;
      metrics_->Write("epoch_check", {{"epoch", static_cast<double>(epoch)},
                                      {"samples", static_cast<double>(check.samples)},
                                      {"repeated", static_cast<double>(check.repeated)},
                                      {"skipped", static_cast<double>(check.skipped)}});
    }
    if (!check.ok()) {
      std::cerr << "convoy-trainer: error: epoch " << epoch << " sample check failed ("
                << check.repeated << " repeated, " << check.skipped << " skipped)" << std::endl;
      return kExitSampleCheckFailed;
    }
  }
  if (o_.eval && (epoch_done || pos_.global_step >= total_steps_)) {
    watchdog_->SetPhase(StopWatchdog::Phase::kCollective);
    EvalResult r = Evaluate(*model_, test_, *dist_, device_, *metrics_);
    watchdog_->SetPhase(StopWatchdog::Phase::kTraining);
    last_accuracy_ = r.accuracy;
    metrics_->Write("eval", {{"step", static_cast<double>(pos_.global_step)},
                             {"epoch", static_cast<double>(epoch)},
                             {"test_accuracy", r.accuracy},
                             {"test_loss", r.loss}});
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
    Checkpoint(pos_, counts_.counts());
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
      if (Boundary()) return GracefulStop();
      TrainStep(prefetch, perm);
      AfterStep(epoch);
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

}  // namespace

int FillDataCache(const Options& o) {
  if (o.data_cache.empty()) {
    std::cerr << "convoy-trainer: --fill-data-cache needs --data-cache or CONVOY_CACHE_DIR"
              << std::endl;
    return 2;
  }
  const Dataset train = LoadFashionMnist(o.data_dir, "train", 0, o.data_cache);
  const Dataset test = LoadFashionMnist(o.data_dir, "t10k", 0, o.data_cache);
  std::cout << "data cache " << o.data_cache << ": " << train.source_note << "; "
            << test.source_note << std::endl;
  return 0;
}

int Run(const Options& o) { return Training(o).Run(); }

}  // namespace convoy::trainer
