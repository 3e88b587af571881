#include "trainer/train_helpers.h"

#include <ATen/autocast_mode.h>
#include <arpa/inet.h>
#include <torch/version.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "common/proc_stat.h"
#include "common/rank_contract.h"
#include "trainer/data.h"

namespace convoy::trainer {

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const Options& o, double lr,
                                                       std::vector<torch::Tensor> params) {
  if (o.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
  }
  return std::make_unique<torch::optim::SGD>(params,
                                             torch::optim::SGDOptions(lr).momentum(o.momentum));
}

namespace {

bool FusedSgdStep(torch::optim::SGD& sgd) {
  auto& state = sgd.state();
  struct Group {
    std::vector<torch::Tensor> params, grads, buffers;
    double lr = 0, momentum = 0;
  };
  std::vector<Group> groups;
  for (auto& group : sgd.param_groups()) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    if (o.momentum() == 0 || o.weight_decay() != 0 || o.dampening() != 0 || o.nesterov()) {
      return false;
    }
    Group g;
    g.lr = o.lr();
    g.momentum = o.momentum();
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto it = state.find(StateKey(state, p));
      if (it == state.end()) return false;  // the optimiser's own first step makes the buffer
      g.params.push_back(p);
      g.grads.push_back(p.grad());
      g.buffers.push_back(static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer());
    }
    groups.push_back(std::move(g));
  }
  torch::NoGradGuard no_grad;
  for (Group& g : groups) {
    if (g.params.empty()) continue;
    // SGD::step: buf.mul_(momentum).add_(grad, 1 - dampening); p.add_(buf, -lr).
    at::_foreach_mul_(g.buffers, g.momentum);
    at::_foreach_add_(g.buffers, g.grads, 1.0);
    at::_foreach_add_(g.params, g.buffers, -1 * g.lr);
  }
  return true;
}

}  // namespace

void OptimizerStep(torch::optim::Optimizer& opt) {
  auto* sgd = dynamic_cast<torch::optim::SGD*>(&opt);
  if (sgd == nullptr || !FusedSgdStep(*sgd)) opt.step();
}

void SetLr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

double ScheduledLr(const Options& o, double base, int64_t epoch, double progress) {
  if (o.lr_schedule == "step") {
    const int64_t every = std::max<int64_t>(1, o.epochs / 3);
    return base * std::pow(0.1, static_cast<double>(epoch / every));
  }
  if (o.lr_schedule == "cosine") return base * 0.5 * (1 + std::cos(M_PI * progress));
  return base;
}

AutocastScope::AutocastScope(bool on, at::ScalarType dtype) : on_(on) {
  if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_dtype(at::kCUDA, dtype);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
#else
  at::autocast::set_autocast_gpu_dtype(dtype);
  at::autocast::set_enabled(true);
#endif
}

AutocastScope::~AutocastScope() {
  if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_enabled(at::kCUDA, false);
#else
  at::autocast::set_enabled(false);
#endif
  at::autocast::clear_cache();
}

// Small enough that activations stay in the allocator's cache: batches of 1000 spent most
// of their time in page faults.
constexpr size_t kEvalBatch = 200;

EvalResult Evaluate(Model& model, const Dataset& test, Dist& dist, torch::Device device,
                    MetricsSink& metrics, const std::function<void(bool)>& in_collective) {
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
    metrics.Write(rank_contract::metric::kKindHeartbeat, {});
  }
  torch::Tensor sums =
      torch::tensor({correct, loss, static_cast<double>(mine.size())}, torch::kFloat64).to(device);
  if (in_collective) in_collective(true);
  dist.AllReduceSum(sums);
  if (in_collective) in_collective(false);
  sums = sums.cpu();
  model.train();
  const double total = sums[2].item<double>();
  return {sums[0].item<double>() / total, sums[1].item<double>() / total};
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void WriteNonFiniteVerdict(const std::vector<torch::Tensor>& losses, torch::Tensor out) {
  torch::NoGradGuard no_grad;
  torch::Tensor sum = losses.at(0);
  for (size_t i = 1; i < losses.size(); ++i) sum = sum + losses[i];
  torch::nan_to_num_out(out, (sum.to(torch::kFloat32) * 0).reshape({1}), 1.0, 1.0, 1.0);
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

double ProcessAgeSeconds() {
  ProcStat self;
  if (!ReadProcStat(0, &self)) return 0;
  std::ifstream up("/proc/uptime");
  double uptime = 0;
  up >> uptime;
  return uptime - static_cast<double>(self.start_ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

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

long PeakRssKb() {
  long peak_kb = 0;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) peak_kb = std::atol(line.c_str() + 6);
  }
  return peak_kb;
}

}  // namespace convoy::trainer
