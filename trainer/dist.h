// The distributed backend: a TCPStore rendezvous and a Gloo (or NCCL) process group. Every
// c10d call of the trainer is in dist.cc, which serves LibTorch 1.13 (Debian) and 2.x.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace convoy::trainer {

class GradSync;
class ShmAllReduce;

// An in-flight collective.
class Pending {
 public:
  virtual ~Pending() = default;
  // Blocks until done; throws when the collective failed (a peer died, a timeout).
  virtual void Wait() = 0;
};

// A Pending for a std::future (the shared-memory all-reduce's).
class FuturePending : public Pending {
 public:
  explicit FuturePending(std::future<void> f) : f_(std::move(f)) {}
  void Wait() override { f_.get(); }

 private:
  std::future<void> f_;
};

// Where this rank runs, from torchrun's environment (LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE): its rank on its node, the ranks on each node, its node, the nodes.
struct Topology {
  int local_rank = 0;
  int local_world = 1;
  int node = 0;
  int nodes = 1;
};

class Dist {
 public:
  virtual ~Dist() = default;
  // world == 1 with Gloo: a no-op backend. Otherwise (NCCL at any world size, as PyTorch's
  // DDP forms a one-rank group) rank 0 serves a TCPStore on master_port and every rank joins
  // the process group. `backend`: "gloo" or "nccl" ("auto" resolved by caller).
  // `allreduce` (Gloo only): "shm" sums float32 tensors through shared memory (every rank on
  // one host, else an error), "gloo" never does, "auto" does when every rank can. With
  // "auto", several nodes (`topology`) and more than one rank on each, the all-reduce is
  // hierarchical: each node sums through its own segment, the nodes' leaders (local rank 0)
  // all-reduce the node sums over a Gloo group of their own, and each leader's result reaches
  // its node's ranks through the segment (AllReduceSumAsync; see dist.cc).
  static std::unique_ptr<Dist> Create(int rank, int world, const std::string& master_addr,
                                      int master_port, const std::string& backend,
                                      std::chrono::seconds timeout,
                                      const std::string& allreduce = "gloo",
                                      int64_t shm_capacity_floats = 1 << 20,
                                      const Topology& topology = {});

  virtual int rank() const = 0;
  virtual int world() const = 0;
  // False for the no-op backend of a one-rank Gloo job: nothing to all-reduce. A one-rank
  // NCCL group all-reduces its gradients on the GPU as torchrun's DDP does.
  virtual bool collective() const { return true; }
  // How float32 CPU all-reduces travel, for the log: "none", "gloo", "nccl", "shared memory",
  // "hierarchical: shared memory within N nodes, gloo across".
  virtual std::string allreduce_path() const = 0;
  // In place, from `root`.
  virtual void Broadcast(std::vector<torch::Tensor>& tensors, int root) = 0;
  // In-place sum across ranks, asynchronous.
  virtual std::unique_ptr<Pending> AllReduceSumAsync(torch::Tensor& tensor) = 0;
  void AllReduceSum(torch::Tensor& tensor) { AllReduceSumAsync(tensor)->Wait(); }
  // outputs[i] receives rank i's `input` (every rank's of the same shape and type; any type
  // the backend copies: float16 is, bfloat16 is not with Gloo 1.13). Asynchronous.
  virtual std::unique_ptr<Pending> AllGatherAsync(std::vector<torch::Tensor>& outputs,
                                                  torch::Tensor& input) = 0;
  // The segment when float32 all-reduces go through shared memory, else nullptr (also when
  // hierarchical: the segment is the node's, not the world's).
  virtual ShmAllReduce* shared_memory() { return nullptr; }
  // Hierarchical only: how many all-reduces this rank has issued across nodes (on the
  // leaders' group; always 0 on a rank that is not its node's leader), and that group's
  // size (0 on the others). For tests and the log; -1 and 0 when not hierarchical.
  virtual int64_t cross_node_allreduces() const { return -1; }
  virtual int leaders_group_size() const { return 0; }
  // Whether AllReduceSumAsync is hierarchical (the same on every rank).
  virtual bool hierarchical() const { return false; }
  // Hierarchical, on a node's leader: the leaders' group as a Dist (rank: the node, world:
  // the nodes), for a compressor that runs on the cross-node hop alone; nullptr elsewhere.
  virtual Dist* leaders() { return nullptr; }
  // Hierarchical only: AllReduceSumAsync of a float32 contiguous CPU tensor, with `across`
  // in place of the leaders' Gloo all-reduce: run on each node's leader, on the all-reduce's
  // thread, with the node's sum, which it must replace (in place) with the sum over nodes.
  // Throws std::logic_error when not hierarchical.
  virtual std::unique_ptr<Pending> HierarchicalSumAsync(
      torch::Tensor& /*tensor*/, std::function<void(torch::Tensor&)> /*across*/) {
    throw std::logic_error("HierarchicalSumAsync: the all-reduce is not hierarchical");
  }
  // DDP through c10d::Reducer (collective). Throws where this LibTorch cannot (2.x builds).
  virtual std::unique_ptr<GradSync> NewReducer(std::vector<torch::Tensor> params,
                                               double bucket_mb) = 0;
};

// True when this build can use NCCL and a GPU is visible.
bool NcclAvailable();

}  // namespace convoy::trainer
