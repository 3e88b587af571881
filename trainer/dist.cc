#include "trainer/dist.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <type_traits>

#include "trainer/shm_allreduce.h"

#include <torch/version.h>

#include "trainer/compression.h"
#include "trainer/ddp.h"

// The Reducer's constructor and the ProcessGroup/Backend split changed in 2.x: the Reducer
// path is built against 1.x (Debian's LibTorch 1.13), the hooks path everywhere.
#if TORCH_VERSION_MAJOR < 2
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#define CONVOY_HAVE_REDUCER 1
#endif

#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/cuda.h>

namespace convoy::trainer {
namespace {

// c10d::Work is the handle in 1.13 and 2.x alike. The process group is held by its
// concrete type: in 1.13 it derives from ProcessGroup, in 2.x from Backend.
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

class WorkPending : public Pending {
 public:
  explicit WorkPending(WorkPtr work) : work_(std::move(work)) {}
  void Wait() override { work_->wait(); }

 private:
  WorkPtr work_;
};

class NodeHierarchy;

#ifdef CONVOY_HAVE_REDUCER
// The Reducer's communication hook for the hierarchical all-reduce: divide by the world size,
// then NodeHierarchy's sum (its runHook is defined after NodeHierarchy).
class HierarchyCommHook : public c10d::CommHookInterface {
 public:
  HierarchyCommHook(NodeHierarchy* hierarchy, int world) : hierarchy_(hierarchy), world_(world) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  NodeHierarchy* hierarchy_;
  int world_;
};

// The Reducer's communication hook for shared memory: divide by the world size, as the
// built-in all-reduce does, then sum across ranks; the future completes on the
// all-reduce's thread.
class ShmCommHook : public c10d::CommHookInterface {
 public:
  ShmCommHook(ShmAllReduce* shm, int world) : shm_(shm), world_(world) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    buffer.div_(world_);
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    shm_->SumAsync(buffer.data_ptr<float>(), buffer.numel(),
                   [future, buffer](std::exception_ptr error) {
                     if (error) {
                       future->setError(error);
                     } else {
                       future->markCompleted(c10::IValue(buffer));
                     }
                   });
    return future;
  }
  // (c10d::detail::parseCppCommHookResult is not exported by libtorch_cpu 1.13.)
  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  ShmAllReduce* shm_;
  int world_;
};

// Python 1.13 DistributedDataParallel's sequence: verify the parameters' shapes across
// ranks; bucket by size (1 MiB first, then the cap), reversed; a Reducer with a Logger;
// per step prepare_for_forward, rebuild_buckets (once, after step 1), forward,
// prepare_for_backward, backward (which ends with averaged gradients in .grad()).
class ReducerGradSync : public GradSync {
 public:
  ReducerGradSync(std::vector<torch::Tensor> params, c10::intrusive_ptr<c10d::ProcessGroup> pg,
                  ShmAllReduce* shm, NodeHierarchy* hierarchy, int world, double bucket_mb) {
    const int64_t first = 1 << 20;
    const auto cap = static_cast<int64_t>(bucket_mb * (1 << 20));
    const std::vector<bool> sparse(params.size(), false);
    c10d::verify_params_across_processes(pg, params, c10::nullopt);
    auto [indices, limits] = c10d::compute_bucket_assignment_by_size(
        params, {static_cast<size_t>(first), static_cast<size_t>(cap)}, sparse);
    std::reverse(indices.begin(), indices.end());
    std::reverse(limits.begin(), limits.end());
    buckets_ = indices.size();
    reducer_ = std::make_shared<c10d::Reducer>(
        params, indices, limits, pg, sparse, cap, /*find_unused_parameters=*/false,
        /*gradient_as_bucket_view=*/true, std::unordered_map<size_t, std::string>(), first);
    logger_ = std::make_shared<c10d::Logger>(reducer_);
    reducer_->set_logger(logger_);
    if (shm != nullptr) reducer_->register_comm_hook(std::make_unique<ShmCommHook>(shm, world));
    if (hierarchy != nullptr) {
      reducer_->register_comm_hook(std::make_unique<HierarchyCommHook>(hierarchy, world));
    }
  }
  void BeforeForward(bool sync) override {
    sync_ = sync;
    if (sync_) reducer_->prepare_for_forward();
    reducer_->rebuild_buckets();
  }
  void BeforeBackward() override {
    if (sync_) reducer_->prepare_for_backward({});
  }
  void Finish() override {}
  size_t num_buckets() const override { return buckets_; }

 private:
  std::shared_ptr<c10d::Reducer> reducer_;
  std::shared_ptr<c10d::Logger> logger_;
  size_t buckets_ = 0;
  bool sync_ = false;
};
#endif

class DonePending : public Pending {
 public:
  void Wait() override {}
};

class SingleProcess : public Dist {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  bool collective() const override { return false; }
  std::string allreduce_path() const override { return "none"; }
  void Broadcast(std::vector<torch::Tensor>&, int) override {}
  std::unique_ptr<GradSync> NewReducer(std::vector<torch::Tensor>, double) override {
    throw std::logic_error("NewReducer: world size 1 has nothing to reduce");
  }
  std::unique_ptr<Pending> AllReduceSumAsync(torch::Tensor&) override {
    return std::make_unique<DonePending>();
  }
  std::unique_ptr<Pending> AllGatherAsync(std::vector<torch::Tensor>& outputs,
                                          torch::Tensor& input) override {
    outputs.at(0).copy_(input);
    return std::make_unique<DonePending>();
  }
};

// The local address a connection to `master` leaves from: the address peers can reach this
// rank at (loopback for a loopback master).
std::string LocalAddressTowards(const std::string& master) {
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(9);
  if (inet_pton(AF_INET, master.c_str(), &dst.sin_addr) != 1) return "";
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return "";
  sockaddr_in src{};
  socklen_t len = sizeof(src);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&src), &len) == 0) {
    char buf[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &src.sin_addr, buf, sizeof(buf)) != nullptr) out = buf;
  }
  close(fd);
  return out;
}

// An NCCL group of LibTorch 2.x is shut down before it is destroyed (its destructor warns,
// and may wait on its watchdog, otherwise); Gloo and LibTorch 1.13 need nothing.
template <typename PG>
auto ShutDownNccl(PG* pg, int) -> decltype(pg->shutdown(), void()) {
#ifdef USE_C10D_NCCL
  if constexpr (std::is_same_v<PG, c10d::ProcessGroupNCCL>) {
    try {
      pg->shutdown();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "convoy-trainer: shutting NCCL down: %s\n", e.what());
    }
  }
#endif
}
template <typename PG>
void ShutDownNccl(PG*, long) {}

// The hierarchical all-reduce of a job on several nodes with several ranks on each. Per
// tensor, on one thread per rank (so the operations of every rank run in the order they were
// started, as the collectives require, while the training thread goes on with backward):
//  1. the node's ranks sum it through the node's segment (each gets the node's sum);
//  2. the node's leader (local rank 0) all-reduces that sum with the other nodes' leaders
//     over their own Gloo group: the only traffic that leaves the node, one rank per node;
//     the other ranks zero their copy;
//  3. a second sum through the segment: the leader's total plus zeros, which is that total
//     exactly (a sum starts from local rank 0's slot, and x + 0 is x), so every rank of every
//     node ends with the leaders' all-reduce result, bit for bit.
// Against the flat all-reduce only the order of the float32 additions differs (node sums
// first): the results agree to float32 rounding (tests/trainer/hierarchical_allreduce_test.cc
// allows 1e-6 of the sum of the magnitudes added; the trainer's 2x2 run, 1e-5 of the
// parameters' scale after 20 steps).
class NodeHierarchy {
 public:
  // `leaders`: the leaders' group (rank: the node), on a leader; nullptr on the other ranks.
  NodeHierarchy(std::unique_ptr<ShmAllReduce> node, std::unique_ptr<Dist> leaders, int nodes)
      : node_(std::move(node)), leaders_(std::move(leaders)), nodes_(nodes) {}
  std::string path() const {
    return "hierarchical: shared memory within " + std::to_string(nodes_) + " nodes, gloo across";
  }
  // `tensor`: float32, contiguous, on the CPU; kept alive until done. `across` (on a leader):
  // turns the node's sum into the sum over nodes; empty: the leaders' Gloo all-reduce.
  std::unique_ptr<Pending> SumAsync(const torch::Tensor& tensor,
                                    std::function<void(torch::Tensor&)> across) {
    return std::make_unique<FuturePending>(
        executor_.Submit([this, tensor, across = std::move(across)] { Sum(tensor, across); }));
  }
  // SumAsync with the leaders' all-reduce, calling `done` on the all-reduce's thread (with nullptr,
  // or the failure).
  void SumThen(const torch::Tensor& tensor, std::function<void(std::exception_ptr)> done) {
    executor_.Submit([this, tensor, done = std::move(done)] {
      std::exception_ptr error;
      try {
        Sum(tensor, nullptr);
      } catch (...) {
        error = std::current_exception();
      }
      done(error);
    });
  }
  int64_t cross_node_allreduces() const { return cross_node_.load(std::memory_order_relaxed); }
  int leaders_group_size() const { return leaders_ != nullptr ? nodes_ : 0; }
  Dist* leaders() { return leaders_.get(); }

 private:
  void Sum(torch::Tensor t, const std::function<void(torch::Tensor&)>& across) {
    float* data = t.data_ptr<float>();
    const int64_t n = t.numel();
    node_->SumAsync(data, n).get();
    if (leaders_ != nullptr) {
      if (across) {
        across(t);
      } else {
        leaders_->AllReduceSum(t);
      }
      cross_node_.fetch_add(1, std::memory_order_relaxed);
    } else {
      std::fill_n(data, n, 0.0f);
    }
    node_->SumAsync(data, n).get();
  }

  std::unique_ptr<ShmAllReduce> node_;
  std::unique_ptr<Dist> leaders_;
  const int nodes_;
  std::atomic<int64_t> cross_node_{0};
  // Last, so that it is destroyed first: its queued operations use the members above.
  SerialExecutor executor_;
};

#ifdef CONVOY_HAVE_REDUCER
c10::intrusive_ptr<c10::ivalue::Future> HierarchyCommHook::runHook(c10d::GradBucket& bucket) {
  at::Tensor buffer = bucket.getBufferRef();
  buffer.div_(world_);
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  hierarchy_->SumThen(buffer, [future, buffer](std::exception_ptr error) {
    if (error) {
      future->setError(error);
    } else {
      future->markCompleted(c10::IValue(buffer));
    }
  });
  return future;
}
#endif

template <typename PG>
class Group : public Dist {
 public:
  Group(int rank, int world, c10::intrusive_ptr<PG> pg, c10::intrusive_ptr<c10d::Store> store,
        std::string path, std::unique_ptr<ShmAllReduce> shm = nullptr,
        std::unique_ptr<NodeHierarchy> hierarchy = nullptr)
      : rank_(rank),
        world_(world),
        pg_(std::move(pg)),
        store_(std::move(store)),
        path_(std::move(path)),
        shm_(std::move(shm)),
        hierarchy_(std::move(hierarchy)) {}
  ~Group() override { ShutDownNccl(pg_.get(), 0); }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string allreduce_path() const override { return path_; }
  ShmAllReduce* shared_memory() override { return shm_.get(); }
  int64_t cross_node_allreduces() const override {
    return hierarchy_ != nullptr ? hierarchy_->cross_node_allreduces() : -1;
  }
  int leaders_group_size() const override {
    return hierarchy_ != nullptr ? hierarchy_->leaders_group_size() : 0;
  }
  bool hierarchical() const override { return hierarchy_ != nullptr; }
  Dist* leaders() override { return hierarchy_ != nullptr ? hierarchy_->leaders() : nullptr; }
  std::unique_ptr<Pending> HierarchicalSumAsync(
      torch::Tensor& tensor, std::function<void(torch::Tensor&)> across) override {
    if (hierarchy_ == nullptr || !tensor.device().is_cpu() ||
        tensor.scalar_type() != torch::kFloat32 || !tensor.is_contiguous()) {
      return Dist::HierarchicalSumAsync(tensor, std::move(across));
    }
    return hierarchy_->SumAsync(tensor, std::move(across));
  }
  void Broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    for (auto& t : tensors) {
      std::vector<torch::Tensor> one{t};
      pg_->broadcast(one, opts)->wait();
    }
  }
  std::unique_ptr<GradSync> NewReducer(std::vector<torch::Tensor> params,
                                       double bucket_mb) override {
#ifdef CONVOY_HAVE_REDUCER
    return std::make_unique<ReducerGradSync>(std::move(params), pg_, shm_.get(), hierarchy_.get(),
                                             world_, bucket_mb);
#else
    throw std::runtime_error("--ddp reducer: not available with LibTorch " TORCH_VERSION
                             " in this build; use --ddp hooks");
#endif
  }
  std::unique_ptr<Pending> AllReduceSumAsync(torch::Tensor& tensor) override {
    const bool plain = tensor.device().is_cpu() && tensor.scalar_type() == torch::kFloat32 &&
                       tensor.is_contiguous();
    if (shm_ != nullptr && plain) {
      return std::make_unique<FuturePending>(
          shm_->SumAsync(tensor.data_ptr<float>(), tensor.numel()));
    }
    if (hierarchy_ != nullptr && plain) return hierarchy_->SumAsync(tensor, nullptr);
    std::vector<torch::Tensor> one{tensor};
    return std::make_unique<WorkPending>(pg_->allreduce(one, c10d::AllreduceOptions()));
  }
  std::unique_ptr<Pending> AllGatherAsync(std::vector<torch::Tensor>& outputs,
                                          torch::Tensor& input) override {
    std::vector<std::vector<torch::Tensor>> out{outputs};
    std::vector<torch::Tensor> in{input};
    return std::make_unique<WorkPending>(pg_->allgather(out, in, c10d::AllgatherOptions()));
  }

 private:
  const int rank_;
  const int world_;
  c10::intrusive_ptr<PG> pg_;
  c10::intrusive_ptr<c10d::Store> store_;
  const std::string path_;
  std::unique_ptr<ShmAllReduce> shm_;
  std::unique_ptr<NodeHierarchy> hierarchy_;  // last: destroyed (its thread stopped) first
};

}  // namespace

bool NcclAvailable() {
#ifdef USE_C10D_NCCL
  return torch::cuda::is_available();
#else
  return false;
#endif
}

std::unique_ptr<Dist> Dist::Create(int rank, int world, const std::string& master_addr,
                                   int master_port, const std::string& backend,
                                   std::chrono::seconds timeout, const std::string& allreduce,
                                   int64_t shm_capacity_floats, const Topology& topology) {
  if (world == 1 && backend != "nccl") return std::make_unique<SingleProcess>();
  if (rank != 0) {
    // A TCPStore client that dials before rank 0's server listens backs off for about a
    // second: wait until the port accepts connections, then connect at once.
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(static_cast<uint16_t>(master_port));
    if (inet_pton(AF_INET, master_addr.c_str(), &dst.sin_addr) == 1) {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (std::chrono::steady_clock::now() < deadline) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const bool up = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) == 0;
        if (fd >= 0) close(fd);
        if (up) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
  c10d::TCPStoreOptions store_opts;
  store_opts.port = static_cast<uint16_t>(master_port);
  store_opts.isServer = rank == 0;
  store_opts.numWorkers = world;
  store_opts.waitWorkers = true;
  store_opts.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(master_addr, store_opts);

  if (backend == "nccl") {
#ifdef USE_C10D_NCCL
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, opts);
    return std::make_unique<Group<c10d::ProcessGroupNCCL>>(rank, world, pg, store, "nccl");
#else
    throw std::runtime_error("--backend nccl: this convoy-trainer was built without NCCL");
#endif
  }
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->timeout = timeout;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else {
    std::string local = LocalAddressTowards(master_addr);
    opts->devices.push_back(local.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                          : c10d::ProcessGroupGloo::createDeviceForHostname(local));
  }
  opts->threads = 2 * static_cast<int>(opts->devices.size());
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
  std::unique_ptr<ShmAllReduce> shm;
  std::unique_ptr<NodeHierarchy> hierarchy;
  std::string path = "gloo";
  SetupChannel channel;
  channel.set = [&](const std::string& key, const std::string& value) {
    store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  };
  channel.get = [&](const std::string& key) {
    const std::vector<uint8_t> v = store->get(key);
    return std::string(v.begin(), v.end());
  };
  const auto timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  const int64_t capacity = std::max<int64_t>(shm_capacity_floats, 1 << 16);
  // Several nodes with several ranks each (as every rank's environment says alike):
  // hierarchical. One segment per node, its setup keys under the node's prefix in the job's
  // own store (the segment itself has no name: two nodes on one host cannot collide).
  if (allreduce == "auto" && topology.nodes > 1 && topology.local_world > 1 &&
      world == topology.nodes * topology.local_world) {
    const std::string prefix = "convoy/node" + std::to_string(topology.node) + "/";
    SetupChannel node_channel;
    node_channel.set = [&](const std::string& key, const std::string& value) {
      channel.set(prefix + key, value);
    };
    node_channel.get = [&](const std::string& key) { return channel.get(prefix + key); };
    std::string why;
    std::unique_ptr<ShmAllReduce> node = ShmAllReduce::Create(
        topology.local_rank, topology.local_world, node_channel, timeout_ms, &why, capacity);
    // Every node must have its segment, or none uses one: the collectives must match.
    channel.set("convoy/hierarchy/" + std::to_string(rank),
                node != nullptr ? "ok" : "node " + std::to_string(topology.node) + ": " + why);
    std::string first_error;
    for (int r = 0; r < world && first_error.empty(); ++r) {
      const std::string v = channel.get("convoy/hierarchy/" + std::to_string(r));
      if (v != "ok") first_error = v;
    }
    if (first_error.empty()) {
      std::unique_ptr<Dist> leaders;
      if (topology.local_rank == 0) {
        auto leaders_store = c10::make_intrusive<c10d::PrefixStore>("convoy/leaders", store);
        auto leaders_pg = c10::make_intrusive<c10d::ProcessGroupGloo>(leaders_store, topology.node,
                                                                      topology.nodes, opts);
        leaders = std::make_unique<Group<c10d::ProcessGroupGloo>>(topology.node, topology.nodes,
                                                                  leaders_pg, store, "gloo");
      }
      hierarchy =
          std::make_unique<NodeHierarchy>(std::move(node), std::move(leaders), topology.nodes);
      path = hierarchy->path();
    } else {
      path = "gloo (hierarchical all-reduce unavailable: " + first_error + ")";
    }
  } else if (allreduce != "gloo") {
    std::string why;
    shm = ShmAllReduce::Create(rank, world, channel, timeout_ms, &why, capacity);
    if (shm != nullptr) {
      path = "shared memory";
    } else if (allreduce == "shm") {
      throw std::runtime_error("--allreduce shm: " + why);
    } else {
      path = "gloo (shared memory unavailable: " + why + ")";
    }
  }
  return std::make_unique<Group<c10d::ProcessGroupGloo>>(rank, world, pg, store, path,
                                                         std::move(shm), std::move(hierarchy));
}

}  // namespace convoy::trainer
