#include "trainer/dist.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <thread>

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

class DonePending : public Pending {
 public:
  void Wait() override {}
};

class SingleProcess : public Dist {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  void Broadcast(std::vector<torch::Tensor>&, int) override {}
  std::unique_ptr<Pending> AllReduceSumAsync(torch::Tensor&) override {
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

template <typename PG>
class Group : public Dist {
 public:
  Group(int rank, int world, c10::intrusive_ptr<PG> pg, c10::intrusive_ptr<c10d::Store> store)
      : rank_(rank), world_(world), pg_(std::move(pg)), store_(std::move(store)) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void Broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    for (auto& t : tensors) {
      std::vector<torch::Tensor> one{t};
      pg_->broadcast(one, opts)->wait();
    }
  }
  std::unique_ptr<Pending> AllReduceSumAsync(torch::Tensor& tensor) override {
    std::vector<torch::Tensor> one{tensor};
    return std::make_unique<WorkPending>(pg_->allreduce(one, c10d::AllreduceOptions()));
  }

 private:
  const int rank_;
  const int world_;
  c10::intrusive_ptr<PG> pg_;
  c10::intrusive_ptr<c10d::Store> store_;
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
                                   std::chrono::seconds timeout) {
  if (world == 1) return std::make_unique<SingleProcess>();
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
    return std::make_unique<Group<c10d::ProcessGroupNCCL>>(rank, world, pg, store);
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
  return std::make_unique<Group<c10d::ProcessGroupGloo>>(rank, world, pg, store);
}

}  // namespace convoy::trainer
