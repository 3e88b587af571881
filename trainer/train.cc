#include "trainer/train.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <thread>

#include "common/data_cache.h"
#include "common/rank_contract.h"
#include "trainer/resume.h"
#include "trainer/train_helpers.h"
#include "trainer/training.h"

namespace convoy::trainer {

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
    const bool bad_steps = dynamic_cast<const BadStepsFailure*>(&e) != nullptr;
    {
      std::lock_guard<std::mutex> state(watchdog_->state_mutex());
      LastWill(std::string(bad_steps ? "bad steps: " : "training failed: ") + e.what());
    }
    // Nothing is left to save: leave at once instead of unwinding. The background snapshot
    // writer (nice 19), Gloo's threads and LibTorch's static destructors can take hundreds of
    // milliseconds on a busy host, and the job's next attempt waits for this exit.
    std::cerr << "convoy-trainer: error: " << (bad_steps ? "bad steps: " : "") << e.what()
              << std::endl;
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(bad_steps ? kExitBadSteps : 1);
  }
  // What the stop agreement and the snapshots cost this rank's training thread, per step.
  const double steps = static_cast<double>(std::max<int64_t>(1, attempt_steps_));
  const double step_ms = Seconds(t_train_) * 1e3 / steps;
  if (sync_->CarriesControl()) {
    std::printf("stop agreement: carried by the gradient all-reduce (no collective of its own)\n");
  } else {
    std::printf(
        "stop agreement: its own all-reduce, overlapping the step; %.3f ms per step waiting "
        "for it (%.2f %% of %.2f ms a step)\n",
        agree_s_ * 1e3 / steps, agree_s_ * 1e3 / steps / step_ms * 100, step_ms);
  }
  PrintCheckCost(step_ms);
  if (live_ != nullptr) {
    const double live_ms = live_s_ * 1e3 / steps;
    std::printf("live state: %.4f ms a step committing (%.3f %% of %.2f ms a step)\n", live_ms,
                live_ms / step_ms * 100, step_ms);
  }
  // How much of the gradients' communication backward hid (the hooks launch each bucket's
  // all-reduce as soon as its gradients are ready).
  double comm_hidden = -1;
  double window_s = 0, exposed_s = 0;
  if (sync_->Overlap(&window_s, &exposed_s) && window_s > 0) {
    comm_hidden = std::clamp(1.0 - exposed_s / window_s, 0.0, 1.0);
    std::printf(
        "communication: %.2f ms a step from the first bucket's launch to the last one's "
        "completion, %.2f ms of it waited for after backward: %.1f %% hidden behind backward "
        "(compression %s)\n",
        window_s * 1e3 / steps, std::min(exposed_s, window_s) * 1e3 / steps, comm_hidden * 100,
        compression_.c_str());
  } else if (o_.world_size > 1) {
    std::printf("communication: overlap not measured with --ddp %s\n", o_.ddp.c_str());
  }
  if (snapshotter_ != nullptr && snapshotter_->enabled()) {
    snapshotter_->Flush();
    const Snapshotter::Stats s = snapshotter_->stats();
    if (s.captures > 0) {
      std::printf(
          "snapshots: %lld written, %lld skipped (previous still being written), %lld written "
          "by the training thread (%.1f ms each: the writer %d behind); per snapshot "
          "%.2f ms copying in the training thread (%.3f %% of the training time), %.1f ms "
          "writing in the background (%.1f ms of CPU)\n",
          static_cast<long long>(s.written), static_cast<long long>(s.skipped_busy),
          static_cast<long long>(s.written_inline),
          s.inline_ms / static_cast<double>(std::max<int64_t>(1, s.written_inline)),
          Snapshotter::kMaxBehind, s.copy_ms / static_cast<double>(s.captures),
          s.copy_ms / steps / step_ms * 100,
          s.background_ms / static_cast<double>(std::max<int64_t>(1, s.written)),
          s.background_cpu_ms / static_cast<double>(std::max<int64_t>(1, s.written)));
      if (step_n_[0] > 0 && step_n_[1] > 0) {
        const double idle = step_s_[0] / static_cast<double>(step_n_[0]);
        const double busy = step_s_[1] / static_cast<double>(step_n_[1]);
        std::printf(
            "snapshot cost: %lld steps while one was copied or written took %.2f ms each, the "
            "other %lld %.2f ms: %.2f %% of the training time\n",
            static_cast<long long>(step_n_[1]), busy * 1e3, static_cast<long long>(step_n_[0]),
            idle * 1e3,
            (busy - idle) * static_cast<double>(step_n_[1]) / (step_s_[0] + step_s_[1]) * 100);
      }
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
      "\"train_seconds\": %.2f, \"compression\": \"%s\", \"comm_hidden\": %.3f}\n",
      o_.rank, o_.world_size, static_cast<long long>(pos_.global_step),
      static_cast<double>(samples_) / std::max(secs, 1e-9), first_step_s_, PeakRssKb() / 1024.0,
      last_accuracy_, secs, compression_.c_str(), comm_hidden);
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
  presence_ = std::make_unique<AttemptPresence>(o_.snapshot_dir, o_.attempt);
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

  // The sink first: a rank waiting for the worker's fill of the data cache says it is alive
  // (hang detection counts from the rank's start).
  metrics_ = std::make_unique<MetricsSink>(o_.metrics_socket);
  metrics_->Write("heartbeat", {});  // started: from here on hang_timeout applies
  const auto alive = [this] { metrics_->Write("heartbeat", {}); };
  train_ = LoadFashionMnist(o_.data_dir, "train", o_.train_limit, o_.data_cache, alive);
  test_ = LoadFashionMnist(o_.data_dir, "t10k", 0, o_.data_cache, alive);
  std::cout << "data: " << train_.source_note << "; " << test_.source_note << std::endl;
  startup_.emplace_back("data_unix", UnixSeconds());
  StartReadingOwnSnapshot();

  torch::manual_seed(static_cast<uint64_t>(o_.seed));
  model_ = MakeModel(o_.model);
  model_->to(device_);
  optimizer_ = MakeOptimizer(o_, base_lr_, model_->parameters());
  std::cout << "model " << o_.model << ": " << CountParameters(*model_) << " parameters"
            << std::endl;

  // Warm up kernels (oneDNN creates its convolution primitives on first use) while the
  // other ranks are still starting, so that the first step after the rendezvous is fast.
  // With auto compression across hosts, a step's compute is timed too (ChooseCompression).
  // Not when the master is on this host's loopback: every rank is on this host then, their
  // gradients are summed through shared memory, and nothing is compressed (ChooseCompression
  // times it after the rendezvous in the rare case that shared memory is unavailable).
  ProbeCompute(/*time_it=*/o_.compression == "auto" && o_.world_size > 1 &&
               !IsLoopback(o_.master_addr));
  startup_.emplace_back("model_unix", UnixSeconds());
}

void Training::ProbeCompute(bool time_it) {
  torch::Tensor x = torch::zeros({o_.batch_size, 1, 28, 28}).to(device_);
  torch::Tensor y = torch::zeros({o_.batch_size}, torch::kInt64).to(device_);
  model_->eval();  // leaves batch-norm running statistics untouched
  if (!warmed_up_) {
    torch::nn::functional::cross_entropy(model_->forward(x), y).backward();
    ClearGrads(model_->parameters());
    warmed_up_ = true;
  }
  if (time_it) {
    // A step's compute, warm, for choosing the compression once connected.
    const auto t0 = Clock::now();
    torch::nn::functional::cross_entropy(model_->forward(x), y).backward();
    model_->parameters()[0].grad().sum().item<double>();  // waits for a GPU too
    compute_probe_s_ = Seconds(t0);
    ClearGrads(model_->parameters());
  }
  model_->train();
}

void Training::Connect() {
  t_rdzv_ = Clock::now();
  Topology topology;
  topology.local_rank = o_.local_rank;
  topology.local_world = o_.local_world_size;
  topology.node = o_.group_rank;
  topology.nodes = o_.group_world_size;
  dist_ = Dist::Create(o_.rank, o_.world_size, o_.master_addr, o_.master_port, backend_,
                       std::chrono::seconds(o_.pg_timeout_s), o_.allreduce,
                       CountParameters(*model_) + GradSync::kControlFloats, topology);
  rendezvous_s_ = Seconds(t_rdzv_);
  startup_.emplace_back("rendezvous_unix", UnixSeconds());
  params_ = model_->parameters();
  BroadcastFromRankZero(*dist_, params_, model_->buffers());
  CompressionOptions compression;
  compression.kind = o_.compression == "auto" ? ChooseCompression() : o_.compression;
  compression.powersgd_rank = o_.powersgd_rank;
  compression.powersgd_start_step = o_.powersgd_start_step;
  // `auto` picks PowerSGD at rank 4 or more, after 10 or more uncompressed steps: over three
  // seeds that kept one epoch of the Fashion-MNIST CNN within 0.31 points of the uncompressed
  // run, where rank 2 from the first step lost up to 0.46 and rank 4 up to 0.51
  // (bench/README "DDP over a shaped link").
  if (o_.compression == "auto" && compression.kind == "powersgd") {
    compression.powersgd_rank = std::max(o_.powersgd_rank, kAutoPowerSgdRank);
    compression.powersgd_start_step = std::max(o_.powersgd_start_step, kAutoPowerSgdStartStep);
  }
  compression.seed = static_cast<uint64_t>(o_.seed);
  compression_ = o_.world_size > 1 ? compression.kind : "none";
  sync_ = MakeGradSync(o_.ddp, params_, *dist_, o_.bucket_mb, compression);
  std::cout << "rendezvous with " << o_.world_size << " rank(s) at " << o_.master_addr << ":"
            << o_.master_port << " took " << rendezvous_s_ << " s; " << sync_->num_buckets()
            << " gradient bucket(s) (" << o_.ddp << "); all-reduce over " << dist_->allreduce_path()
            << "; compression " << compression_
            << (compression_ == "none" ? ""
                : dist_->shared_memory() != nullptr
                    ? " (the compressed gradient buckets travel over " + backend_ + ")"
                : dist_->hierarchical() ? " (between the nodes' leaders only)"
                                        : "")
            << std::endl;
}

StateIdentity Training::ResumeIdentity() const {
  StateIdentity id = Identity();
  id.resume_uid = o_.resume_from_uid;
  id.resume_any = o_.resume_from_uid.empty();
  return id;
}

std::optional<FoundCheckpoint> Training::ReadResumeFrom(int64_t& step) {
  const StateIdentity id = ResumeIdentity();
  auto probe = [&](const std::string& b) {
    auto probe_model = MakeModel(o_.model);
    auto probe_opt = MakeOptimizer(o_, base_lr_, probe_model->parameters());
    std::vector<uint8_t> counts;
    step = LoadState(b, *probe_model, *probe_opt, id, Shape(), &counts).global_step;
  };
  std::error_code ec;
  std::optional<FoundCheckpoint> found;
  if (std::filesystem::is_directory(o_.resume_from, ec)) {
    found = ReadNewestValid(o_.resume_from, probe);
  } else {
    std::string bytes;
    const bool read = ReadWholeFile(o_.resume_from, &bytes);
    try {
      if (!read) throw std::runtime_error("cannot read it");
      probe(bytes);
      found = FoundCheckpoint{o_.resume_from, std::move(bytes)};
    } catch (const std::exception& e) {
      std::cerr << ("not resuming from " + o_.resume_from + ": " +
                    std::string(e.what()).substr(0, 200) + "\n")
                << std::flush;
    }
  }
  if (!found) {
    std::cout << ("resume_from " + o_.resume_from + ": no checkpoint to start from there\n")
              << std::flush;
  }
  return found;
}

std::string Training::ChooseCompression() {
  if (o_.world_size == 1) return "none";
  if (dist_->shared_memory() != nullptr) {
    std::cout << "compression auto: none (gradients are summed through shared memory)" << std::endl;
    return "none";
  }
  if (compute_probe_s_ <= 0) ProbeCompute(/*time_it=*/true);  // not timed before (Setup)
  const int64_t n = CountParameters(*model_);
  torch::Tensor probe = torch::zeros({n}, torch::TensorOptions().device(device_));
  dist_->AllReduceSum(probe);  // the first sets up the backend's connections
  const auto t0 = Clock::now();
  dist_->AllReduceSum(probe);
  const double comm_s = Seconds(t0);
  torch::Tensor both =
      torch::tensor({comm_s, compute_probe_s_}, torch::kFloat64).to(device_).contiguous();
  dist_->AllReduceSum(both);
  torch::Tensor sums = both.cpu();
  const double comm = sums[0].item<double>() / o_.world_size;
  const double compute = sums[1].item<double>() / o_.world_size;
  // Backward hides an all-reduce shorter than the step's compute; a longer one dominates the
  // step. bf16 halves its bytes: enough up to twice the compute. Beyond, PowerSGD (its
  // low-rank factors are a few hundredth of the bytes; bench/README "DDP over a shaped link").
  const std::string choice = comm <= compute ? "none" : comm <= 2 * compute ? "bf16" : "powersgd";
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "compression auto: %s (one all-reduce of the %.2f MB of gradients took %.1f ms "
                "against %.1f ms of forward and backward, means over ranks: communication "
                "would %s)",
                choice.c_str(), static_cast<double>(n) * 4 / 1e6, comm * 1e3, compute * 1e3,
                comm <= compute       ? "hide behind backward"
                : comm <= 2 * compute ? "dominate; halved, it would hide"
                                      : "dominate even halved");
  std::cout << buf << std::endl;
  return choice;
}

void Training::StartReadingOwnSnapshot() {
  const StateIdentity id = Identity();
  SnapshotMeta& identity = snapshot_identity_;
  identity.job = o_.job_id;
  identity.job_uid = o_.job_uid;
  identity.cluster_id = o_.cluster_id;
  identity.model = o_.model;
  identity.seed = id.seed;
  identity.samples = id.samples;
  own_snapshot_ = std::async(std::launch::async, [this] {
    OwnSnapshot own;
    // The ranks of earlier attempts on this host may still be saving their last will (a
    // restart overlaps their teardown): the newest state is the one they leave.
    own.waited_s = presence_->WaitForEarlierAttempts(kWaitForEarlierAttempts);
    const auto t_read = Clock::now();
    own.found = ReadNewestSnapshot(o_.snapshot_dir, snapshot_identity_);
    own.read_s = Seconds(t_read);
    return own;
  });
}

void Training::Resume() {
  const StateIdentity id = Identity();
  const SnapshotMeta& identity = snapshot_identity_;
  snapshotter_ =
      std::make_unique<Snapshotter>(o_.snapshot_dir, identity, id, *model_, *optimizer_, [this] {
        Snapshotter::Shadow s;
        auto m = MakeModel(o_.model);
        s.optimizer = MakeOptimizer(o_, base_lr_, m->parameters());
        s.model = std::move(m);
        return s;
      });

  const auto t_resume = Clock::now();
  OwnSnapshot own = own_snapshot_.get();
  const double waited = own.waited_s;
  if (waited < 0) {
    std::cout << "ranks of an earlier attempt still run on this host after "
              << kWaitForEarlierAttempts.count() << " ms; resuming without their last state"
              << std::endl;
  } else if (waited > 0.001) {
    std::printf("waited %.0f ms for the ranks of an earlier attempt on this host to exit\n",
                waited * 1e3);
  }
  // What this rank holds: its host's newest snapshot; rank 0 also the newest checkpoint.
  bool checkpoint_found = false;
  std::optional<StateOffer> mine = NewestOwnState(std::move(own.found), &checkpoint_found);
  if (o_.rank == 0 && !o_.checkpoint_dir.empty() && !checkpoint_found && !o_.resume_from.empty()) {
    // No checkpoint of its own yet: the one the user named (resume_from). A snapshot of the
    // job's own (a later attempt on a host) is newer and wins below.
    int64_t step = 0;
    if (auto named = ReadResumeFrom(step)) {
      mine = Newer(StateOffer{"resume_from", named->path, step, std::move(named->bytes)},
                   std::move(mine));
    }
  }
  if (o_.local_rank == 0 && !o_.snapshot_dir.empty() && device_.is_cpu() && waited >= 0) {
    // Every rank of the earlier attempt may have died at once, leaving no last will: the
    // live state holds the last step its host's writer completed.
    const auto t_live = Clock::now();
    if (auto live = ReadLiveState(o_.snapshot_dir, identity, id, mine ? mine->step : -1, *model_,
                                  *optimizer_)) {
      std::printf("live state %s: step %lld, checked in %.0f ms\n", live->path.c_str(),
                  static_cast<long long>(live->step), Seconds(t_live) * 1e3);
      mine = std::move(live);  // newer than `mine` (ReadLiveState)
    }
  }
  const double read_s = Seconds(t_resume);
  const auto t_agree = Clock::now();
  std::optional<AgreedState> agreed = AgreeOnNewestState(*dist_, device_, std::move(mine));
  const double agree_s = Seconds(t_agree);
  counts_ = SampleCounts(train_.size());
  if (agreed) {
    const auto t_load = Clock::now();
    pos_ = LoadState(agreed->state.data(), *model_, *optimizer_,
                     agreed->state.kind == "resume_from" ? ResumeIdentity() : id, Shape(),
                     &counts_.mutable_counts(), device_);
    std::cout << "resumed from " << agreed->state.kind << " " << agreed->state.path << " at epoch "
              << pos_.epoch << ", step " << pos_.global_step << " (sample " << pos_.sample
              << " of the epoch)" << std::endl;
    std::printf(
        "resume took %.0f ms: read %.0f ms (the snapshot was read beside the warm-up, in %.0f "
        "ms), agreed and sent %.0f ms, loaded %.0f ms\n",
        Seconds(t_resume) * 1e3, read_s * 1e3, own.read_s * 1e3, agree_s * 1e3,
        Seconds(t_load) * 1e3);
    if (o_.world_size > 1) {
      std::cout << "(the newest state was rank " << agreed->holder << "'s)" << std::endl;
    }
  } else if (!o_.checkpoint_dir.empty() || !o_.snapshot_dir.empty()) {
    std::cout << "no checkpoint or snapshot to resume from: starting at step 0" << std::endl;
  }
  have_state_ = true;
  startup_.emplace_back("resumed_unix", UnixSeconds());

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
  std::cout << "bad steps: a step whose loss" << (o_.clip_grad_norm > 0 ? " or gradient norm" : "")
            << " is not finite on any rank is skipped; a rewind after " << o_.max_bad_steps
            << " in a row" << std::endl;
  if (!o_.test_nan_loss_steps.empty()) {
    std::cout << "test hook " << kTestNanLossStepsEnv << ": this rank's loss is NaN at "
              << o_.test_nan_loss_steps.size() << " step(s) from step "
              << o_.test_nan_loss_steps.front() << std::endl;
  }
}

void Training::AttachLiveState() {
  live_.reset();
  if (!snapshot_writer_ || o_.snapshot_dir.empty() || o_.snapshot_every == 0) return;
  std::string why = "not on a GPU (its tensors cannot live in a host file)";
  const auto t0 = Clock::now();
  if (device_.is_cpu()) {
    // The parameters move: not while the stop watchdog saves a last will from them.
    std::lock_guard<std::mutex> state(watchdog_->state_mutex());
    live_ = LiveState::Attach(o_.snapshot_dir, o_.rank, snapshot_identity_, *model_, *optimizer_,
                              pos_, counts_.counts(), &why);
  }
  if (live_ == nullptr) {
    std::cout << "live state: not kept (" << why
              << "); if every rank dies at once, a restart resumes from the newest snapshot"
              << std::endl;
    return;
  }
  std::printf("live state: every step, in place in %s (%.1f MB, %.0f ms to set up)\n",
              live_->path().c_str(), static_cast<double>(live_->bytes()) / 1e6, Seconds(t0) * 1e3);
}

int FillDataCache(const Options& o) {
  if (o.data_cache.empty()) {
    std::cerr << "convoy-trainer: --fill-data-cache needs --data-cache or CONVOY_CACHE_DIR"
              << std::endl;
    return 2;
  }
  const std::string bad = PrepareCacheDir(o.data_cache);
  if (!bad.empty()) {
    std::cerr << "convoy-trainer: --fill-data-cache: " << bad << std::endl;
    return 1;
  }
  std::cout << "data cache " << o.data_cache << ":";
  for (const std::string& file : rank_contract::DataFiles(o.data_dir)) {
    std::cout << " " << file << " " << FillGzEntry(file, o.data_cache) << ";";
  }
  std::cout << std::endl;
  return 0;
}

int Run(const Options& o) { return Training(o).Run(); }

}  // namespace convoy::trainer
