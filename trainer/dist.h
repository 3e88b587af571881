// The distributed backend: a TCPStore rendezvous and a Gloo (or NCCL) process group. Every
// c10d call of the trainer is in dist.cc, which serves LibTorch 1.13 (Debian) and 2.x.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace convoy::trainer {

// An in-flight collective.
class Pending {
 public:
  virtual ~Pending() = default;
  // Blocks until done; throws when the collective failed (a peer died, a timeout).
  virtual void Wait() = 0;
};

class Dist {
 public:
  virtual ~Dist() = default;
  // world == 1: a no-op backend. Otherwise rank 0 serves a TCPStore on master_port and every
  // rank joins the process group. `backend`: "gloo" or "nccl" ("auto" resolved by caller).
  static std::unique_ptr<Dist> Create(int rank, int world, const std::string& master_addr,
                                      int master_port, const std::string& backend,
                                      std::chrono::seconds timeout);

  virtual int rank() const = 0;
  virtual int world() const = 0;
  // In place, from `root`.
  virtual void Broadcast(std::vector<torch::Tensor>& tensors, int root) = 0;
  // In-place sum across ranks, asynchronous.
  virtual std::unique_ptr<Pending> AllReduceSumAsync(torch::Tensor& tensor) = 0;
  void AllReduceSum(torch::Tensor& tensor) { AllReduceSumAsync(tensor)->Wait(); }
};

// True when this build can use NCCL and a GPU is visible.
bool NcclAvailable();

}  // namespace convoy::trainer
