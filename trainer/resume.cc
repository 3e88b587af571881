#include "trainer/resume.h"

#include <torch/torch.h>

#include <cstring>
#include <stdexcept>
#include <vector>

namespace convoy::trainer {

std::optional<StateOffer> Newer(std::optional<StateOffer> a, std::optional<StateOffer> b) {
  if (!a) return b;
  if (!b) return a;
  return b->step > a->step ? b : a;
}

std::optional<AgreedState> AgreeOnNewestState(Dist& dist, torch::Device device,
                                              std::optional<StateOffer> mine) {
  const int world = dist.world();
  const int rank = dist.rank();
  // Every rank's step + 1 in its own slot (0: holds nothing); the sum is everyone's.
  torch::Tensor steps = torch::zeros({world}, torch::kInt64);
  if (mine) steps[rank] = mine->step + 1;
  steps = steps.to(device);
  dist.AllReduceSum(steps);
  steps = steps.cpu();
  const int64_t* s = steps.data_ptr<int64_t>();
  int holder = -1;
  for (int r = 0; r < world; ++r) {
    if (s[r] > 0 && (holder < 0 || s[r] > s[holder])) holder = r;
  }
  if (holder < 0) return std::nullopt;

  // The holder's "<kind> <path>\n<bytes>", its length first.
  std::string blob;
  if (rank == holder) blob = mine->kind + " " + mine->path + "\n" + mine->bytes;
  torch::Tensor size = torch::tensor({static_cast<int64_t>(blob.size())}, torch::kInt64);
  std::vector<torch::Tensor> v{size.to(device)};
  dist.Broadcast(v, holder);
  const int64_t n = v[0].cpu().item<int64_t>();
  torch::Tensor bytes = torch::empty({n}, torch::kUInt8);
  if (rank == holder) std::memcpy(bytes.data_ptr(), blob.data(), static_cast<size_t>(n));
  std::vector<torch::Tensor> b{bytes.to(device)};
  dist.Broadcast(b, holder);
  if (rank != holder) {
    bytes = b[0].cpu().contiguous();
    blob.assign(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(n));
  }
  const size_t nl = blob.find('\n');
  const size_t sp = blob.find(' ');
  if (nl == std::string::npos || sp == std::string::npos || sp > nl) {
    throw std::runtime_error("resume: rank " + std::to_string(holder) + " sent a malformed state");
  }
  AgreedState out;
  out.holder = holder;
  out.state.kind = blob.substr(0, sp);
  out.state.path = blob.substr(sp + 1, nl - sp - 1);
  out.state.step = s[holder] - 1;
  out.state.bytes = blob.substr(nl + 1);
  return out;
}

}  // namespace convoy::trainer
