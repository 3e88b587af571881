#include "trainer/ddp.h"

#include <torch/torch.h>

namespace convoy::trainer {

GradSync::GradSync(std::vector<torch::Tensor> params, Dist& dist, double bucket_mb)
    : params_(std::move(params)), dist_(dist), where_(params_.size()) {
  const int64_t first_cap = 1 << 20;
  const int64_t cap = static_cast<int64_t>(bucket_mb * (1 << 20));
  Bucket current;
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    where_[k] = {buckets_.size(), current.params.size()};
    current.offsets.push_back(bytes / static_cast<int64_t>(sizeof(float)));
    current.params.push_back(k);
    bytes += p.numel() * static_cast<int64_t>(sizeof(float));
    if (bytes >= (buckets_.empty() ? first_cap : cap)) {
      current.flat = torch::zeros({bytes / static_cast<int64_t>(sizeof(float))}, p.options());
      buckets_.push_back(std::move(current));
      current = Bucket();
      bytes = 0;
    }
  }
  if (!current.params.empty()) {
    current.flat = torch::zeros({bytes / static_cast<int64_t>(sizeof(float))},
                                params_[current.params[0]].options());
    buckets_.push_back(std::move(current));
  }
  if (dist_.world() == 1) return;  // nothing to synchronise
  for (size_t k = 0; k < params_.size(); ++k) {
    params_[k].register_hook([this, k](torch::Tensor grad) {
      OnGrad(k, grad);
      return grad;
    });
  }
}

void GradSync::BroadcastFromRankZero(std::vector<torch::Tensor> buffers) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> all = params_;
  for (auto& b : buffers) all.push_back(b);
  dist_.Broadcast(all, 0);
}

void GradSync::Prepare(bool sync) {
  sync_ = sync && dist_.world() > 1;
  next_launch_ = 0;
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.launched = false;
    b.pending.reset();
  }
}

void GradSync::OnGrad(size_t k, const torch::Tensor& grad) {
  if (!sync_) return;
  auto [bi, slot] = where_[k];
  Bucket& b = buckets_[bi];
  torch::NoGradGuard no_grad;
  torch::Tensor view = b.flat.narrow(0, b.offsets[slot], grad.numel());
  // The hook runs before accumulation: what .grad() holds is earlier micro-batches' sum.
  const torch::Tensor& acc = params_[k].grad();
  if (acc.defined()) {
    torch::add_out(view, acc.reshape({-1}), grad.reshape({-1}));
  } else {
    view.copy_(grad.reshape({-1}));
  }
  if (++b.ready == b.params.size()) LaunchReady();
}

void GradSync::LaunchReady() {
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].ready == buckets_[next_launch_].params.size()) {
    Bucket& b = buckets_[next_launch_++];
    b.pending = dist_.AllReduceSumAsync(b.flat);
    b.launched = true;
  }
}

void GradSync::Finish() {
  if (!sync_) return;
  torch::NoGradGuard no_grad;
  // Parameters that took no part in this backward (unused) contribute zeros.
  for (Bucket& b : buckets_) {
    if (b.ready < b.params.size()) {
      for (size_t s = 0; s < b.params.size(); ++s) {
        const torch::Tensor& p = params_[b.params[s]];
        torch::Tensor view = b.flat.narrow(0, b.offsets[s], p.numel());
        if (p.grad().defined()) {
          view.copy_(p.grad().reshape({-1}));
        } else {
          view.zero_();
        }
      }
      b.ready = b.params.size();
    }
  }
  LaunchReady();
  const double inv = 1.0 / dist_.world();
  for (Bucket& b : buckets_) {
    b.pending->Wait();
    b.flat.mul_(inv);
    for (size_t s = 0; s < b.params.size(); ++s) {
      torch::Tensor& p = params_[b.params[s]];
      torch::Tensor avg = b.flat.narrow(0, b.offsets[s], p.numel()).view_as(p);
      if (!p.grad().defined()) {
        p.mutable_grad() = avg.clone();
      } else {
        p.mutable_grad().copy_(avg);
      }
    }
  }
  sync_ = false;
}

}  // namespace convoy::trainer
