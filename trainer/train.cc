#include "trainer/train.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/proc_stat.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/ddp.h"
#include "trainer/dist.h"
#include "trainer/metrics_sink.h"
#include "trainer/models.h"

namespace convoy::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds since this process was started by the kernel (includes loading libtorch).
double ProcessAgeSeconds() {
  ProcStat self;
  if (!ReadProcStat(0, &self)) return 0;
  std::ifstream up("/proc/uptime");
  double uptime = 0;
  up >> uptime;
  return uptime - static_cast<double>(self.start_ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The BLAS library this process actually mapped (libblas.so.3 is an alternatives link).
std::string LoadedBlas() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find("blas") != std::string::npos || path.find("mkl") != std::string::npos) {
      return path;
    }
  }
  return "none found";
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const Options& o,
                                                       std::vector<torch::Tensor> params) {
  if (o.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(o.lr));
  }
  return std::make_unique<torch::optim::SGD>(params,
                                             torch::optim::SGDOptions(o.lr).momentum(o.momentum));
}

void SetLr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

double ScheduledLr(const Options& o, int64_t epoch, int64_t step, int64_t total_steps) {
  if (o.lr_schedule == "step") {
    const int64_t every = std::max<int64_t>(1, o.epochs / 3);
    return o.lr * std::pow(0.1, static_cast<double>(epoch / every));
  }
  if (o.lr_schedule == "cosine" && total_steps > 0) {
    return o.lr * 0.5 * (1 + std::cos(M_PI * static_cast<double>(step) / total_steps));
  }
  return o.lr;
}

// Autocast (mixed precision) on CUDA for one forward pass; a no-op when off.
class AutocastScope {
 public:
  AutocastScope(bool on, at::ScalarType dtype) : on_(on) {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_dtype(at::kCUDA, dtype);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
#else
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(true);
#endif
  }
  ~AutocastScope() {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, false);
#else
    at::autocast::set_enabled(false);
#endif
    at::autocast::clear_cache();
  }

 private:
  const bool on_;
};

struct EvalResult {
  double accuracy = 0;
  double loss = 0;
};

// Small enough that activations stay in the allocator's cache: batches of 1000 spent most
// of their time in page faults.
constexpr size_t kEvalBatch = 200;

EvalResult Evaluate(Model& model, const Dataset& test, Dist& dist, torch::Device device,
                    MetricsSink& metrics) {
  torch::NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> mine;
  for (int64_t i = dist.rank(); i < test.size(); i += dist.world()) mine.push_back(i);
  double correct = 0, loss = 0;
  for (size_t start = 0; start < mine.size(); start += kEvalBatch) {
    const int64_t n = static_cast<int64_t>(std::min<size_t>(kEvalBatch, mine.size() - start));
    torch::Tensor x = test.Batch(mine.data() + start, n).to(device);
    torch::Tensor y = test.Labels(mine.data() + start, n).to(device);
    torch::Tensor out = model.forward(x);
    loss += torch::nn::functional::cross_entropy(
                out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                .item<double>();
    correct += out.argmax(1).eq(y).sum().item<double>();
    // Evaluation writes no step records: say that this rank is alive (hang detection).
    metrics.Write("heartbeat", {});
  }
  torch::Tensor sums =
      torch::tensor({correct, loss, static_cast<double>(mine.size())}, torch::kFloat64).to(device);
  dist.AllReduceSum(sums);
  sums = sums.cpu();
  model.train();
  const double total = sums[2].item<double>();
  return {sums[0].item<double>() / total, sums[1].item<double>() / total};
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

int Run(const Options& o) {
  const auto t_main = Clock::now();
  const double age_at_main = ProcessAgeSeconds();
  // Wall-clock times of the start-up phases, printed as one "startup {...}" line at the first
  // step (bench/start_latency.py lines them up with the job's events).
  std::vector<std::pair<const char*, double>> startup{{"start_unix", UnixSeconds() - age_at_main},
                                                      {"main_unix", UnixSeconds()}};
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int threads = o.threads;
  if (threads == 0) {
    const char* omp = std::getenv("OMP_NUM_THREADS");
    threads = omp != nullptr ? std::max(1, std::atoi(omp))
                             : std::max(1, cores / std::max(1, o.local_world_size));
  }
  torch::set_num_threads(threads);

  std::string backend = o.backend;
  if (backend == "auto") backend = NcclAvailable() ? "nccl" : "gloo";
  torch::Device device(torch::kCPU);
  if (backend == "nccl") device = torch::Device(torch::kCUDA, o.local_rank);
  const bool amp = o.amp != "off";
  if (amp && !device.is_cuda()) {
    throw std::runtime_error("--amp " + o.amp + ": mixed precision runs on GPUs (backend nccl)");
  }

  std::cout << "convoy-trainer: rank " << o.rank << "/" << o.world_size << " (local "
            << o.local_rank << "/" << o.local_world_size << "), backend " << backend << ", model "
            << o.model << ", batch " << o.batch_size << " x " << o.accumulate << ", lr " << o.lr
            << ", mixed precision " << o.amp << ", intra-op threads " << threads << ", BLAS "
            << LoadedBlas() << std::endl;

  const Dataset train = LoadFashionMnist(o.data_dir, "train", o.train_limit, o.data_cache);
  const Dataset test = LoadFashionMnist(o.data_dir, "t10k", 0, o.data_cache);
  std::cout << "data: " << train.source_note << "; " << test.source_note << std::endl;
  startup.emplace_back("data_unix", UnixSeconds());

  torch::manual_seed(static_cast<uint64_t>(o.seed));
  std::shared_ptr<Model> model = MakeModel(o.model);
  model->to(device);
  auto optimizer = MakeOptimizer(o, model->parameters());
  std::cout << "model " << o.model << ": " << CountParameters(*model) << " parameters" << std::endl;

  // Warm up kernels (oneDNN creates its convolution primitives on first use) while the
  // other ranks are still starting, so that the first step after the rendezvous is fast.
  {
    torch::Tensor x = torch::zeros({o.batch_size, 1, 28, 28}).to(device);
    torch::Tensor y = torch::zeros({o.batch_size}, torch::kInt64).to(device);
    model->eval();  // leaves batch-norm running statistics untouched
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    model->train();
    ClearGrads(model->parameters());
  }

  startup.emplace_back("model_unix", UnixSeconds());
  const auto t_rdzv = Clock::now();
  std::unique_ptr<Dist> dist =
      Dist::Create(o.rank, o.world_size, o.master_addr, o.master_port, backend,
                   std::chrono::seconds(o.pg_timeout_s), o.allreduce, CountParameters(*model));
  const double rendezvous_s = Seconds(t_rdzv);
  startup.emplace_back("rendezvous_unix", UnixSeconds());
  const std::vector<torch::Tensor> params = model->parameters();
  BroadcastFromRankZero(*dist, params, model->buffers());
  std::unique_ptr<GradSync> sync = MakeGradSync(o.ddp, params, *dist, o.bucket_mb);
  std::cout << "rendezvous with " << o.world_size << " rank(s) at " << o.master_addr << ":"
            << o.master_port << " took " << rendezvous_s << " s; " << sync->num_buckets()
            << " gradient bucket(s) (" << o.ddp << "); all-reduce over " << dist->allreduce_path()
            << std::endl;

  // Resume: rank 0 reads the newest valid checkpoint and every rank restores its bytes.
  Position pos;
  {
    std::string bytes;
    if (o.rank == 0 && !o.checkpoint_dir.empty()) {
      auto probe_model = MakeModel(o.model);
      auto probe_opt = MakeOptimizer(o, probe_model->parameters());
      auto found = ReadNewestValid(
          o.checkpoint_dir, [&](const std::string& b) { LoadState(b, *probe_model, *probe_opt); });
      if (found) bytes = std::move(*found);
    }
    torch::Tensor size = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64);
    std::vector<torch::Tensor> v{size};
    dist->Broadcast(v, 0);
    const int64_t n = size.item<int64_t>();
    if (n > 0) {
      torch::Tensor blob = torch::empty({n}, torch::kUInt8);
      if (o.rank == 0) std::memcpy(blob.data_ptr(), bytes.data(), static_cast<size_t>(n));
      std::vector<torch::Tensor> b{blob};
      dist->Broadcast(b, 0);
      bytes.assign(static_cast<const char*>(blob.data_ptr()), static_cast<size_t>(n));
      pos = LoadState(bytes, *model, *optimizer);
      std::cout << "resumed at epoch " << pos.epoch << ", step " << pos.global_step << std::endl;
    }
  }

  MetricsSink metrics(o.metrics_socket);
  const int64_t per_rank = (train.size() + o.world_size - 1) / o.world_size;
  const int64_t steps_per_epoch = per_rank / (int64_t{o.batch_size} * o.accumulate);
  if (steps_per_epoch == 0) throw std::runtime_error("--batch-size: larger than a rank's shard");
  int64_t total_steps = steps_per_epoch * o.epochs;
  if (o.max_steps > 0) total_steps = std::min(total_steps, o.max_steps);

  auto checkpoint = [&](const Position& p) {
    if (o.rank != 0 || o.checkpoint_dir.empty()) return;
    WriteCheckpoint(o.checkpoint_dir, SaveState(*model, *optimizer, p, o.seed), p.global_step);
  };

  const auto t_train = Clock::now();
  int64_t samples = 0;
  int64_t step = pos.global_step;
  bool first = true;
  double first_step_s = 0;
  double last_accuracy = -1;
  for (int64_t epoch = pos.epoch; epoch < o.epochs && step < total_steps; ++epoch) {
    const int64_t start_step = epoch == pos.epoch ? pos.step_in_epoch : 0;
    Prefetcher batches(
        train, ShardIndices(train.size(), o.rank, o.world_size, o.seed, static_cast<int>(epoch)),
        o.batch_size, static_cast<size_t>(start_step * o.accumulate));
    for (int64_t s = start_step; s < steps_per_epoch && step < total_steps; ++s) {
      SetLr(*optimizer, ScheduledLr(o, epoch, step, total_steps));
      double loss_sum = 0;
      for (int a = 0; a < o.accumulate; ++a) {
        torch::Tensor x, y;
        if (!batches.Next(&x, &y)) throw std::runtime_error("the data ran out mid-epoch");
        x = x.to(device);
        y = y.to(device);
        sync->BeforeForward(a == o.accumulate - 1);
        torch::Tensor loss;
        {
          AutocastScope autocast(amp, torch::kBFloat16);
          loss = torch::nn::functional::cross_entropy(model->forward(x), y);
        }
        sync->BeforeBackward();
        (loss / o.accumulate).backward();
        loss_sum += loss.item<double>();
      }
      sync->Finish();
      if (o.clip_grad_norm > 0) {
        torch::nn::utils::clip_grad_norm_(model->parameters(), o.clip_grad_norm);
      }
      optimizer->step();
      ClearGrads(params);
      ++step;
      samples += int64_t{o.batch_size} * o.accumulate;
      const double secs = Seconds(t_train);
      const double loss = loss_sum / o.accumulate;
      std::vector<std::pair<std::string, double>> rec{
          {"step", static_cast<double>(step)},
          {"epoch", static_cast<double>(epoch)},
          {"loss", loss},
          {"samples", static_cast<double>(samples)},
          {"seconds", secs},
          {"samples_per_s", samples / std::max(secs, 1e-9)},
          {"total_steps", static_cast<double>(total_steps)}};
      if (first) {
        first = false;
        const double after_rdzv = Seconds(t_rdzv) - rendezvous_s;
        first_step_s = age_at_main + Seconds(t_main);
        rec.push_back({"first_step_s", first_step_s});
        std::cout << "first step done " << age_at_main + Seconds(t_main)
                  << " s after process start, " << after_rdzv << " s after rendezvous" << std::endl;
        startup.emplace_back("first_step_unix", UnixSeconds());
        std::string line = "startup {\"rank\": " + std::to_string(o.rank) +
                           ", \"attempt\": " + std::to_string(o.attempt);
        for (const auto& [name, at] : startup) {
          char buf[64];
          std::snprintf(buf, sizeof(buf), ", \"%s\": %.3f", name, at);
          line += buf;
        }
        std::cout << line << "}" << std::endl;
      }
      metrics.Write("step", rec);
      if (step % o.log_every == 0 || step == total_steps) {
        std::printf("rank %d epoch %lld step %lld/%lld loss %.4f %.0f samples/s\n", o.rank,
                    static_cast<long long>(epoch), static_cast<long long>(step),
                    static_cast<long long>(total_steps), loss, samples / std::max(secs, 1e-9));
        std::fflush(stdout);
      }
      if (o.checkpoint_every > 0 && step % o.checkpoint_every == 0) {
        checkpoint(Position{epoch, s + 1, step});
      }
    }
    const bool epoch_done = step % steps_per_epoch == 0 || step >= total_steps;
    if (o.eval && epoch_done) {
      EvalResult r = Evaluate(*model, test, *dist, device, metrics);
      last_accuracy = r.accuracy;
      metrics.Write("eval", {{"step", static_cast<double>(step)},
                             {"epoch", static_cast<double>(epoch)},
                             {"test_accuracy", r.accuracy},
                             {"test_loss", r.loss}});
      std::printf("rank %d epoch %lld: test accuracy %.2f%% (loss %.4f) at %.1f s\n", o.rank,
                  static_cast<long long>(epoch), r.accuracy * 100, r.loss,
                  age_at_main + Seconds(t_main));
      std::fflush(stdout);
    }
    if (step % steps_per_epoch == 0) checkpoint(Position{epoch + 1, 0, step});
  }
  if (!o.save_params.empty()) {
    std::vector<torch::Tensor> params;
    for (const auto& p : model->parameters()) params.push_back(p.detach().cpu());
    torch::save(params,
                o.rank == 0 ? o.save_params : o.save_params + ".rank" + std::to_string(o.rank));
  }
  // One machine-readable line for benchmarks: throughput over the training loop, first-step
  // latency since process start, peak resident memory, accuracy.
  long peak_kb = 0;
  {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("VmHWM:", 0) == 0) peak_kb = std::atol(line.c_str() + 6);
    }
  }
  std::printf(
      "summary {\"rank\": %d, \"world\": %d, \"steps\": %lld, \"samples_per_s\": %.1f, "
      "\"first_step_s\": %.3f, \"peak_rss_mb\": %.1f, \"test_accuracy\": %.4f, "
      "\"train_seconds\": %.2f}\n",
      o.rank, o.world_size, static_cast<long long>(step),
      samples / std::max(Seconds(t_train), 1e-9), first_step_s, peak_kb / 1024.0, last_accuracy,
      Seconds(t_train));
  std::printf(
      "rank %d done: %lld steps, %.1f s of training%s\n", o.rank, static_cast<long long>(step),
      Seconds(t_train),
      last_accuracy >= 0 ? (", test accuracy " + std::to_string(last_accuracy)).c_str() : "");
  return 0;
}

}  // namespace convoy::trainer
