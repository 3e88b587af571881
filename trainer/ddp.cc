#include "trainer/ddp.h"

#include <torch/torch.h>

#include <algorithm>
#include <future>

#include "trainer/shm_allreduce.h"

namespace convoy::trainer {

std::unique_ptr<GradSync> MakeGradSync(const std::string& kind, std::vector<torch::Tensor> params,
                                       Dist& dist, double bucket_mb,
                                       const CompressionOptions& compression) {
  if (kind == "reducer" && dist.collective()) {
    if (compression.kind != "none") {
      throw std::invalid_argument("--compression " + compression.kind + ": needs --ddp hooks");
    }
    return dist.NewReducer(std::move(params), bucket_mb);
  }
  return std::make_unique<HookGradSync>(std::move(params), dist, bucket_mb, compression);
}

void BroadcastFromRankZero(Dist& dist, std::vector<torch::Tensor> params,
                           std::vector<torch::Tensor> buffers) {
  torch::NoGradGuard no_grad;
  for (auto& b : buffers) params.push_back(b);
  dist.Broadcast(params, 0);
}

void ClearGrads(const std::vector<torch::Tensor>& params) {
  for (const auto& p : params) {
    if (p.grad().defined()) const_cast<torch::Tensor&>(p).mutable_grad() = torch::Tensor();
  }
}

HookGradSync::~HookGradSync() = default;

HookGradSync::HookGradSync(std::vector<torch::Tensor> params, Dist& dist, double bucket_mb,
                           const CompressionOptions& compression)
    : params_(std::move(params)),
      dist_(dist),
      where_(params_.size()),
      inv_(torch::scalar_tensor(1.0 / dist.world(), torch::kFloat64)) {
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
  for (Bucket& b : buckets_) {
    for (size_t s = 0; s < b.params.size(); ++s) {
      const torch::Tensor& p = params_[b.params[s]];
      b.layout.shapes.push_back(p.sizes().vec());
      b.layout.offsets.push_back(b.offsets[s]);
      b.layout.numel += p.numel();
    }
  }
  // The control floats after the last bucket's gradients.
  {
    Bucket& last = buckets_.back();
    control_offset_ = last.flat.numel();
    last.flat = torch::cat({last.flat, torch::zeros({kControlFloats}, last.flat.options())});
  }
  if (!dist_.collective()) return;  // nothing to synchronise
  compressed_ = compression.kind != "none";
  if (compressed_ && dist_.hierarchical()) {
    if (dist_.leaders() != nullptr) compressor_ = MakeCompressor(compression, *dist_.leaders());
  } else {
    compressor_ = MakeCompressor(compression, dist_);
    if (compressor_ != nullptr) executor_ = std::make_unique<SerialExecutor>();
  }
  int64_t total = kControlFloats;
  bool plain = true;
  for (const auto& p : params_) {
    total += p.numel();
    plain = plain && p.device().is_cpu() && p.scalar_type() == torch::kFloat32;
  }
  ShmAllReduce* shm = dist_.shared_memory();
  if (shm != nullptr && plain && total <= shm->capacity() && !compressed_) {
    arena_ = shm;
    int64_t offset = 0;
    for (Bucket& b : buckets_) {
      const int64_t n = b.flat.numel();
      b.arena_offset = offset;
      b.flat = torch::from_blob(shm->slot() + offset, {n}, torch::kFloat32);
      b.result = torch::from_blob(const_cast<float*>(shm->result()) + offset, {n}, torch::kFloat32);
      offset += n;
    }
  } else {
    for (Bucket& b : buckets_) b.result = b.flat;
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    params_[k].register_hook([this, k](torch::Tensor grad) {
      OnGrad(k, grad);
      return grad;
    });
  }
}

void HookGradSync::BeforeForward(bool sync) {
  sync_ = sync && dist_.collective();
  next_launch_ = 0;
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.pending.reset();
  }
}

void HookGradSync::SetControl(const torch::Tensor& values) {
  if (!dist_.collective()) {
    local_control_ = values;  // what a world of one sums to, read in Control()
    return;
  }
  torch::NoGradGuard no_grad;
  Bucket& last = buckets_.back();
  last.flat.narrow(0, control_offset_, kControlFloats).copy_(values);
}

std::array<float, GradSync::kControlFloats> HookGradSync::Control() const {
  if (dist_.collective() || !local_control_.defined()) return control_;
  std::array<float, kControlFloats> out{};
  torch::Tensor c = local_control_.to(torch::kCPU, torch::kFloat32).contiguous();
  std::copy_n(c.data_ptr<float>(), kControlFloats, out.begin());
  return out;
}

void HookGradSync::DiscardStep() {
  if (compressor_ != nullptr) compressor_->Forget();
}

void HookGradSync::OnGrad(size_t k, const torch::Tensor& grad) {
  if (!sync_) return;
  auto [bi, slot] = where_[k];
  Bucket& b = buckets_[bi];
  torch::NoGradGuard no_grad;
  torch::Tensor view = b.flat.narrow(0, b.offsets[slot], grad.numel());
  // Divided by the world size on the way in, as PyTorch's Reducer does (one pass; exact for
  // a power-of-two world). The hook runs before accumulation: what .grad() holds is earlier
  // micro-batches' sum.
  const torch::Tensor& acc = params_[k].grad();
  if (acc.defined()) {
    torch::add_out(view, acc.reshape({-1}), grad.reshape({-1}));
    view.mul_(inv_);
  } else {
    torch::mul_out(view, grad.reshape({-1}), inv_);
  }
  if (++b.ready == b.params.size()) LaunchReady();
}

void HookGradSync::LaunchReady() {
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].ready == buckets_[next_launch_].params.size()) {
    Bucket& b = buckets_[next_launch_++];
    if (next_launch_ == 1) first_launch_ = std::chrono::steady_clock::now();
    if (compressed_ && executor_ == nullptr) {
      // Hierarchical: the leaders compress the node's sum for the hop between nodes.
      const size_t index = next_launch_ - 1;
      b.pending = dist_.HierarchicalSumAsync(b.flat, [this, index](torch::Tensor& node_sum) {
        compressor_->Reduce(index, node_sum, buckets_[index].layout);
      });
    } else if (executor_ != nullptr) {
      const size_t index = next_launch_ - 1;
      b.pending = std::make_unique<FuturePending>(executor_->Submit([this, index] {
        Bucket& bucket = buckets_[index];
        compressor_->Reduce(index, bucket.flat, bucket.layout);
        bucket.done = std::chrono::steady_clock::now();
      }));
    } else if (arena_ != nullptr) {
      b.pending =
          std::make_unique<FuturePending>(arena_->SumRangeAsync(b.arena_offset, b.flat.numel()));
    } else {
      b.pending = dist_.AllReduceSumAsync(b.flat);
    }
  }
}

void HookGradSync::Finish() {
  if (!sync_) return;
  torch::NoGradGuard no_grad;
  // Parameters that took no part in this backward (unused) contribute zeros.
  for (Bucket& b : buckets_) {
    if (b.ready < b.params.size()) {
      for (size_t s = 0; s < b.params.size(); ++s) {
        const torch::Tensor& p = params_[b.params[s]];
        torch::Tensor view = b.flat.narrow(0, b.offsets[s], p.numel());
        if (p.grad().defined()) {
          torch::mul_out(view, p.grad().reshape({-1}), inv_);
        } else {
          view.zero_();
        }
      }
      b.ready = b.params.size();
    }
  }
  LaunchReady();
  using SteadyClock = std::chrono::steady_clock;
  SteadyClock::time_point last_done = first_launch_;
  double waited = 0;
  for (Bucket& b : buckets_) {
    const SteadyClock::time_point t0 = SteadyClock::now();
    b.pending->Wait();
    const SteadyClock::time_point t1 = SteadyClock::now();
    waited += std::chrono::duration<double>(t1 - t0).count();
    // A compressed bucket knows when it finished; a backend all-reduce finished by the end of
    // the wait (exact when the wait blocked; when it did not, nothing of it was exposed).
    last_done = std::max(last_done, executor_ != nullptr ? b.done : t1);
    if (&b == &buckets_.back() && !compressed_) {
      torch::Tensor c = b.result.narrow(0, control_offset_, kControlFloats).cpu();
      std::copy_n(c.data_ptr<float>(), kControlFloats, control_.begin());
    }
    // The averaged gradients are views of the bucket (gradient_as_bucket_view): no copy. The
    // bucket is rewritten only by the next synchronising backward, after ClearGrads (in
    // shared memory: once every rank has started that backward).
    for (size_t s = 0; s < b.params.size(); ++s) {
      torch::Tensor& p = params_[b.params[s]];
      p.mutable_grad() = b.result.narrow(0, b.offsets[s], p.numel()).view_as(p);
    }
  }
  if (compressor_ != nullptr) compressor_->EndStep();  // the executor is idle: all waited for
  window_s_ += std::chrono::duration<double>(last_done - first_launch_).count();
  exposed_s_ += waited;
  sync_ = false;
}

bool HookGradSync::Overlap(double* window_s, double* exposed_s) const {
  if (!dist_.collective()) return false;
  *window_s = window_s_;
  *exposed_s = exposed_s_;
  return true;
}

}  // namespace convoy::trainer
