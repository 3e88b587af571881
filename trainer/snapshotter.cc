#include "trainer/snapshotter.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <functional>
#include <iostream>
#include <sstream>
#include <type_traits>

#include "trainer/train_helpers.h"

namespace convoy::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double ThreadCpuMillis() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Runs `write`; "" when it succeeded, else what it threw, which is also logged.
std::string Attempt(const std::function<void()>& write) {
  try {
    write();
    return "";
  } catch (const std::exception& e) {
    std::cerr << "warning: snapshot not written: " << e.what() << std::endl;
    return e.what();
  }
}

// `src` copied into `dst` when it fits (no allocation), else a fresh copy in host memory.
torch::Tensor CopyTensor(const torch::Tensor& src, const torch::Tensor& dst) {
  if (!src.defined()) return {};
  if (dst.defined() && dst.sizes() == src.sizes() && dst.dtype() == src.dtype()) {
    dst.copy_(src);
    return dst;
  }
  return src.detach().to(torch::kCPU, src.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

template <typename State>
State* Slot(std::unique_ptr<torch::optim::OptimizerParamState>& slot) {
  auto* s = dynamic_cast<State*>(slot.get());
  if (s == nullptr) {
    slot = std::make_unique<State>();
    s = static_cast<State*>(slot.get());
  }
  return s;
}

}  // namespace

Snapshotter::Snapshotter(std::string dir, SnapshotMeta identity, StateIdentity state_id,
                         torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                         std::function<Shadow()> make_shadow)
    : dir_(std::move(dir)),
      identity_(std::move(identity)),
      state_id_(state_id),
      model_(model),
      optimizer_(optimizer),
      make_shadow_(std::move(make_shadow)) {}

Snapshotter::~Snapshotter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Snapshotter::CopyIntoShadow() {
  torch::NoGradGuard no_grad;
  const auto live_params = model_.parameters();
  const auto shadow_params = shadow_.model->parameters();
  const auto live_buffers = model_.buffers();
  const auto shadow_buffers = shadow_.model->buffers();
  if (live_params.size() != shadow_params.size() || live_buffers.size() != shadow_buffers.size()) {
    return false;
  }
  for (size_t i = 0; i < live_params.size(); ++i) shadow_params[i].copy_(live_params[i]);
  for (size_t i = 0; i < live_buffers.size(); ++i) shadow_buffers[i].copy_(live_buffers[i]);

  auto& live = optimizer_.state();
  auto& shadow = shadow_.optimizer->state();
  auto& live_groups = optimizer_.param_groups();
  auto& shadow_groups = shadow_.optimizer->param_groups();
  if (live_groups.size() != shadow_groups.size()) return false;
  for (size_t g = 0; g < live_groups.size(); ++g) {
    const auto& lp = live_groups[g].params();
    const auto& sp = shadow_groups[g].params();
    if (lp.size() != sp.size()) return false;
    shadow_groups[g].set_options(live_groups[g].options().clone());
    for (size_t i = 0; i < lp.size(); ++i) {
      const auto it = live.find(StateKey(live, lp[i]));
      const auto key = StateKey(shadow, sp[i]);
      if (it == live.end()) {
        shadow.erase(key);
        continue;
      }
      if (const auto* s = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
        auto* d = Slot<torch::optim::SGDParamState>(shadow[key]);
        d->momentum_buffer(CopyTensor(s->momentum_buffer(), d->momentum_buffer()));
      } else if (const auto* a =
                     dynamic_cast<const torch::optim::AdamParamState*>(it->second.get())) {
        auto* d = Slot<torch::optim::AdamParamState>(shadow[key]);
        d->step(a->step());
        d->exp_avg(CopyTensor(a->exp_avg(), d->exp_avg()));
        d->exp_avg_sq(CopyTensor(a->exp_avg_sq(), d->exp_avg_sq()));
        d->max_exp_avg_sq(CopyTensor(a->max_exp_avg_sq(), d->max_exp_avg_sq()));
      } else {
        return false;  // an optimiser this class does not know: serialise synchronously
      }
    }
  }
  return true;
}

bool Snapshotter::Capture(const Position& pos, const std::vector<uint8_t>& counts) {
  if (!enabled()) return false;
  bool overtake = false;  // the writer is starved (a host without an idle core)
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_) {
      if (++behind_ <= kMaxBehind) {
        ++stats_.skipped_busy;
        return false;
      }
      overtake = true;
    }
    behind_ = 0;
  }
  const auto t0 = Clock::now();
  if (overtake) {
    // The writer finishes its capture when it can; this newer one is written now.
    const std::string error = Attempt([&] { WriteNow(pos, counts); });
    std::lock_guard<std::mutex> lock(mu_);
    stats_.inline_ms += MillisSince(t0);
    if (error.empty()) {
      ++stats_.written_inline;
    } else {
      stats_.last_error = error;
    }
    return error.empty();
  }
  if (!thread_.joinable()) {
    shadow_ = make_shadow_();
    thread_ = std::thread([this] { Loop(); });
  }
  pos_ = pos;
  counts_ = counts;
  serialised_ = !CopyIntoShadow();
  if (serialised_) SaveStateInto(&payload_, model_, optimizer_, pos, counts, state_id_);
  const double copy_ms = MillisSince(t0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = true;
    ++stats_.captures;
    stats_.copy_ms += copy_ms;
  }
  cv_.notify_all();
  return true;
}

void Snapshotter::Loop() {
  // The lowest priority (for this thread only): the write uses what the training ranks leave.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return busy_ || stop_; });
      if (!busy_) return;
    }
    const auto t0 = Clock::now();
    const double cpu0 = ThreadCpuMillis();
    const std::string error = Attempt([this] {
      if (!serialised_) {
        SaveStateInto(&payload_, *shadow_.model, *shadow_.optimizer, pos_, counts_, state_id_);
      }
      SnapshotMeta meta = identity_;
      meta.step = pos_.global_step;
      meta.epoch = pos_.epoch;
      meta.sample = pos_.sample;
      WriteSnapshotFile(dir_, meta, payload_);
    });
    payload_.clear();  // keeps its capacity for the next one
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    stats_.background_ms += MillisSince(t0);
    stats_.background_cpu_ms += ThreadCpuMillis() - cpu0;
    if (error.empty()) {
      ++stats_.written;
    } else {
      stats_.last_error = error;
    }
    cv_.notify_all();
  }
}

std::string Snapshotter::WriteNow(const Position& pos, const std::vector<uint8_t>& counts) {
  if (!enabled()) return "";
  SnapshotMeta meta = identity_;
  meta.step = pos.global_step;
  meta.epoch = pos.epoch;
  meta.sample = pos.sample;
  return WriteSnapshotFile(dir_, meta, SaveState(model_, optimizer_, pos, counts, state_id_));
}

void Snapshotter::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

bool Snapshotter::busy() {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

Snapshotter::Stats Snapshotter::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace convoy::trainer
