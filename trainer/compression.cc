#include "trainer/compression.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/BFloat16.h>
#include <torch/torch.h>

#include <cstdint>
#include <stdexcept>

namespace convoy::trainer {
namespace {

// bf16 on the CPU, one pass each where PyTorch's operators take two or three (at 10 Gbit/s the
// link no longer hides the conversion: every pass over 6.5 MB shows in a step).
// v = g + e; wire = v rounded to bfloat16 (to nearest even, as PyTorch rounds); e = v - wire.
void RoundBf16WithFeedback(const float* g, float* e, uint16_t* wire, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = g[i] + e[i];
    const uint16_t b = c10::detail::round_to_nearest_even(v);
    wire[i] = b;
    e[i] = v - c10::detail::f32_from_bits(b);
  }
}

// out = the sum of the ranks' bfloat16 copies, in float32.
void SumBf16(const std::vector<torch::Tensor>& copies, float* out, int64_t n) {
  const auto* a = reinterpret_cast<const uint16_t*>(copies[0].data_ptr());
  if (copies.size() == 2) {
    const auto* b = reinterpret_cast<const uint16_t*>(copies[1].data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      out[i] = c10::detail::f32_from_bits(a[i]) + c10::detail::f32_from_bits(b[i]);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = c10::detail::f32_from_bits(a[i]);
  for (size_t r = 1; r < copies.size(); ++r) {
    const auto* b = reinterpret_cast<const uint16_t*>(copies[r].data_ptr());
    for (int64_t i = 0; i < n; ++i) out[i] += c10::detail::f32_from_bits(b[i]);
  }
}

// bf16 / fp16: all-gathers of 16-bit copies, summed in float32, a chunk at a time. Chunks
// pipeline the conversion and the additions with the transfer, and keep each message small:
// one 3.2 MB all-gather over a 1 Gbit/s link took 38 ms where the same bytes as 0.5 MB chunks
// took 27-28 ms (26.7 ms on the wire), because a large burst overflows the link's queue and
// TCP backs off (bench/README "DDP over a shaped link").
class HalfCompressor : public Compressor {
 public:
  HalfCompressor(torch::ScalarType type, bool error_feedback, Dist& dist)
      : type_(type), error_feedback_(error_feedback), dist_(dist) {}

  void Reduce(size_t bucket, torch::Tensor flat, const BucketLayout& layout) override {
    torch::NoGradGuard no_grad;
    torch::Tensor grads = flat.narrow(0, 0, layout.numel);
    Buffers& buf = buffers_[bucket];
    if (!buf.wire.defined()) {
      buf.wire = torch::empty({layout.numel}, grads.options().dtype(torch::kHalf));
      for (int64_t at = 0; at < layout.numel; at += kHalfChunkElements) {
        const int64_t n = std::min(kHalfChunkElements, layout.numel - at);
        buf.chunks.push_back({at, n, buf.wire.narrow(0, at, n), {}});
        for (int r = 0; r < dist_.world(); ++r) {
          buf.chunks.back().outputs.push_back(
              torch::empty({n}, grads.options().dtype(torch::kHalf)));
        }
      }
    }
    // bfloat16 travels as its bits typed float16 (Gloo 1.13 has no bfloat16); an all-gather
    // only copies them. Every chunk is issued (in order, from this one thread) before the
    // first is waited for.
    std::vector<std::unique_ptr<Pending>> pending;
    pending.reserve(buf.chunks.size());
    if (error_feedback_ && !buf.residual.defined()) buf.residual = torch::zeros_like(grads);
    // bf16 on the CPU: the loops above (the buffers are contiguous, float32 and 16-bit).
    const bool loops = type_ == torch::kBFloat16 && grads.is_cpu();
    for (Chunk& c : buf.chunks) {
      torch::Tensor wire = c.input.view(type_);
      if (error_feedback_ && loops) {
        RoundBf16WithFeedback(grads.data_ptr<float>() + c.offset,
                              buf.residual.data_ptr<float>() + c.offset,
                              reinterpret_cast<uint16_t*>(c.input.data_ptr()), c.numel);
      } else if (error_feedback_) {
        // Send this step's gradient plus what rounding left out of the last one's; keep what
        // it leaves out of this one.
        torch::Tensor e = buf.residual.narrow(0, c.offset, c.numel);
        e.add_(grads.narrow(0, c.offset, c.numel));
        wire.copy_(e);
        e.sub_(wire);
      } else {
        wire.copy_(grads.narrow(0, c.offset, c.numel));
      }
      pending.push_back(dist_.AllGatherAsync(c.outputs, c.input));
    }
    for (size_t k = 0; k < buf.chunks.size(); ++k) {
      pending[k]->Wait();
      Chunk& c = buf.chunks[k];
      torch::Tensor out = grads.narrow(0, c.offset, c.numel);
      if (loops) {
        SumBf16(c.outputs, out.data_ptr<float>(), c.numel);
        continue;
      }
      out.copy_(c.outputs[0].view(type_));
      for (size_t r = 1; r < c.outputs.size(); ++r) out.add_(c.outputs[r].view(type_));
    }
  }

  void Forget() override {
    for (auto& [bucket, buf] : buffers_) {
      if (buf.residual.defined()) buf.residual.zero_();
    }
  }

 private:
  struct Chunk {
    int64_t offset, numel;
    torch::Tensor input;                 // a view of Buffers::wire
    std::vector<torch::Tensor> outputs;  // one per rank
  };
  struct Buffers {
    torch::Tensor wire;      // this rank's 16-bit copy of the bucket
    torch::Tensor residual;  // with error feedback: what rounding left out, float32
    std::vector<Chunk> chunks;
  };
  const torch::ScalarType type_;
  const bool error_feedback_;
  Dist& dist_;
  std::map<size_t, Buffers> buffers_;  // per bucket, reused
};

// PyTorch's _should_compress with min_compression_rate 2.
bool WorthCompressing(int64_t n, int64_t m, int64_t rank) { return (n + m) * rank * 2 < n * m; }

class PowerSgdCompressor : public Compressor {
 public:
  PowerSgdCompressor(const CompressionOptions& o, Dist& dist)
      : rank_(o.powersgd_rank),
        start_step_(o.powersgd_start_step),
        seed_(o.seed),
        error_feedback_(o.powersgd_error_feedback),
        dist_(dist) {}

  void EndStep() override { ++step_; }

  void Forget() override {
    for (auto& [bucket, st] : states_) {
      if (st.error.defined()) st.error.zero_();
      st.p = torch::Tensor();
      st.q = torch::Tensor();  // the next Reduce draws the seeded Q again
    }
  }

  void Reduce(size_t bucket, torch::Tensor flat, const BucketLayout& layout) override {
    torch::NoGradGuard no_grad;
    torch::Tensor grads = flat.narrow(0, 0, layout.numel);
    if (step_ < start_step_ || layout.numel < kPowerSgdMinBucketElements) {
      dist_.AllReduceSum(grads);
      return;
    }
    State& st = states_[bucket];
    if (error_feedback_ && !st.error.defined()) st.error = torch::zeros_like(grads);
    // Split: matrices worth compressing, and the rest.
    struct Mat {
      torch::Tensor m;  // n x m view into grads
      int64_t offset, n, cols, r;
    };
    std::vector<Mat> mats;
    std::vector<torch::Tensor> plain;
    int64_t p_size = 0, q_size = 0, plain_size = 0;
    for (size_t s = 0; s < layout.shapes.size(); ++s) {
      const auto& shape = layout.shapes[s];
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      torch::Tensor view = grads.narrow(0, layout.offsets[s], numel);
      if (shape.size() >= 2 && numel > 0) {
        const int64_t n = shape[0], cols = numel / shape[0];
        const int64_t r = std::min<int64_t>({n, cols, rank_});
        if (WorthCompressing(n, cols, r)) {
          mats.push_back({view.view({n, cols}), layout.offsets[s], n, cols, r});
          p_size += n * r;
          q_size += cols * r;
          continue;
        }
      }
      plain.push_back(view);
      plain_size += numel;
    }
    // What is approximated: with error feedback, this step's gradient plus what the last
    // step's approximation left out, summed in the residual's own buffer (no copy; it becomes
    // this step's residual below). Only the compressed matrices carry a residual.
    std::vector<torch::Tensor> inputs;
    for (const Mat& x : mats) {
      if (!error_feedback_) {
        inputs.push_back(x.m);
        continue;
      }
      torch::Tensor e = st.error.narrow(0, x.offset, x.n * x.cols).view({x.n, x.cols});
      inputs.push_back(e.add_(x.m));
    }
    const bool fresh = !st.q.defined();
    if (fresh) {
      st.p = torch::empty({p_size}, grads.options());
      st.q = torch::empty({q_size}, grads.options());
    }
    std::vector<torch::Tensor> ps, qs;
    int64_t pi = 0, qi = 0;
    for (const Mat& x : mats) {
      ps.push_back(st.p.narrow(0, pi, x.n * x.r).view({x.n, x.r}));
      qs.push_back(st.q.narrow(0, qi, x.cols * x.r).view({x.cols, x.r}));
      pi += x.n * x.r;
      qi += x.cols * x.r;
    }
    if (fresh) {
      // The same random Q on every rank: a generator seeded alike everywhere.
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ + 1000003 * (bucket + 1));
      for (torch::Tensor& q : qs) {
        q.copy_(torch::randn(q.sizes(), gen, torch::TensorOptions().dtype(q.scalar_type())));
      }
    }
    // Warm start: last step's Q (orthogonalised again), else the random one.
    for (torch::Tensor& q : qs) OrthogonalizeColumns(q);
    for (size_t k = 0; k < mats.size(); ++k) torch::matmul_out(ps[k], inputs[k], qs[k]);
    torch::Tensor plain_flat = plain.empty() ? torch::Tensor() : torch::cat(plain);
    std::unique_ptr<Pending> plain_pending;
    if (plain_size > 0) plain_pending = dist_.AllReduceSumAsync(plain_flat);
    std::unique_ptr<Pending> p_pending;
    if (p_size > 0) p_pending = dist_.AllReduceSumAsync(st.p);
    if (plain_pending) {
      plain_pending->Wait();
      int64_t at = 0;
      for (torch::Tensor& v : plain) {
        v.copy_(plain_flat.narrow(0, at, v.numel()));
        at += v.numel();
      }
    }
    if (p_size == 0) return;
    p_pending->Wait();
    for (torch::Tensor& p : ps) OrthogonalizeColumns(p);
    for (size_t k = 0; k < mats.size(); ++k) torch::matmul_out(qs[k], inputs[k].t(), ps[k]);
    // The gradients were divided by the world size on the way in: Q's sum is the mean's.
    dist_.AllReduceSum(st.q);
    const double inv_world = 1.0 / dist_.world();
    for (size_t k = 0; k < mats.size(); ++k) {
      // This rank's share of what the approximation left out (the ranks' errors add up to
      // the mean's residual), in place: input - P Q^T / W.
      if (error_feedback_) inputs[k].addmm_(ps[k], qs[k].t(), /*beta=*/1, /*alpha=*/-inv_world);
      torch::matmul_out(mats[k].m, ps[k], qs[k].t());
    }
  }

 private:
  struct State {
    torch::Tensor error;  // bucket-sized (with error feedback); zero outside the matrices
    torch::Tensor p, q;   // every matrix's P and Q, back to back (q: the warm start)
  };
  const int64_t rank_;
  const int64_t start_step_;
  const uint64_t seed_;
  const bool error_feedback_;
  Dist& dist_;
  int64_t step_ = 0;
  std::map<size_t, State> states_;
};

}  // namespace

void OrthogonalizeColumns(torch::Tensor matrix, double epsilon) {
  torch::NoGradGuard no_grad;
  const int64_t cols = matrix.size(1);
  for (int64_t i = 0; i < cols; ++i) {
    torch::Tensor col = matrix.narrow(1, i, 1);
    col.div_(col.norm() + epsilon);
    if (i + 1 < cols) {
      torch::Tensor rest = matrix.narrow(1, i + 1, cols - i - 1);
      rest.sub_((col * rest).sum(0, /*keepdim=*/true) * col);
    }
  }
}

std::unique_ptr<Compressor> MakeCompressor(const CompressionOptions& o, Dist& dist) {
  if (o.kind == "none") return nullptr;
  if (o.kind == "bf16")
    return std::make_unique<HalfCompressor>(torch::kBFloat16, o.bf16_error_feedback, dist);
  if (o.kind == "fp16") return std::make_unique<HalfCompressor>(torch::kHalf, false, dist);
  if (o.kind == "powersgd") return std::make_unique<PowerSgdCompressor>(o, dist);
  throw std::invalid_argument("--compression: unknown kind '" + o.kind + "'");
}

SerialExecutor::SerialExecutor() : thread_([this] { Run(); }) {}

SerialExecutor::~SerialExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

std::future<void> SerialExecutor::Submit(std::function<void()> task) {
  std::packaged_task<void()> t(std::move(task));
  std::future<void> f = t.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(t));
  }
  cv_.notify_one();
  return f;
}

void SerialExecutor::Run() {
  for (;;) {
    std::packaged_task<void()> t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      t = std::move(queue_.front());
      queue_.pop_front();
    }
    t();
  }
}

}  // namespace convoy::trainer
