// Pieces of the training program that train.cc composes: the optimiser and learning-rate
// schedule, mixed-precision scope, evaluation, and facts about the process for the log.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "trainer/dist.h"
#include "trainer/metrics_sink.h"
#include "trainer/models.h"
#include "trainer/options.h"

namespace convoy::trainer {

// SGD with momentum, or Adam, at `lr`.
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const Options& o, double lr,
                                                       std::vector<torch::Tensor> params);
void SetLr(torch::optim::Optimizer& opt, double lr);
// One optimiser step. SGD with momentum (no weight decay, dampening or Nesterov) steps every
// parameter of a group at once with foreach ops once each has its momentum buffer: three
// launches on a GPU instead of three per parameter, and the same arithmetic as
// torch::optim::SGD::step(), bit for bit. Anything else is the optimiser's own step.
void OptimizerStep(torch::optim::Optimizer& opt);

// The key an optimiser's state map files a parameter under: the address of its TensorImpl, as
// text in LibTorch 1.x (c10::guts::to_string streams the pointer), as the pointer in 2.x.
template <typename Map>
typename Map::key_type StateKey(const Map&, const torch::Tensor& p) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << p.unsafeGetTensorImpl();
    return s.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

// The learning rate at `progress` (the fraction of the training done, in [0, 1]) of epoch
// `epoch`: `base` for "none"; "step" divides by 10 every epochs/3 epochs; "cosine" anneals to 0
// over the progress. Progress (not a step count) so that a world-size change between attempts,
// which changes the number of steps left, does not make the schedule jump.
double ScheduledLr(const Options& o, double base, int64_t epoch, double progress);

// Autocast (mixed precision) on CUDA for one forward pass; a no-op when off.
class AutocastScope {
 public:
  AutocastScope(bool on, at::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  const bool on_;
};

struct Dataset;
struct EvalResult {
  double accuracy = 0;
  double loss = 0;
};
// Test accuracy and loss over `test`, each rank a share, summed across ranks (collective).
// `in_collective(true)` just before the one call that waits on the other ranks,
// `in_collective(false)` after it.
EvalResult Evaluate(Model& model, const Dataset& test, Dist& dist, torch::Device device,
                    MetricsSink& metrics, const std::function<void(bool)>& in_collective = nullptr);

// The bad-step verdict of a rank's micro-batch losses, written into the one-float `out` on the
// losses' device without reading them on the host: 1 when one is NaN or infinite, else 0.
// Two launches: a sum of the losses times 0 is 0 when every one is finite and NaN otherwise
// (inf * 0 is NaN), and nan_to_num makes that NaN 1.
void WriteNonFiniteVerdict(const std::vector<torch::Tensor>& losses, torch::Tensor out);

// Whether `host` is "localhost", ::1 or in 127.0.0.0/8 (as common/util.h's IsLoopbackHost,
// which the trainer built on its own does not link): a master there has every rank on its host.
bool IsLoopback(const std::string& host);

// Seconds since this process was started by the kernel (includes loading libtorch).
double ProcessAgeSeconds();
double UnixSeconds();
// The BLAS library this process actually mapped (libblas.so.3 is an alternatives link).
std::string LoadedBlas();
// VmHWM in kB.
long PeakRssKb();

}  // namespace convoy::trainer
