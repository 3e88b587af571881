#include "trainer/shm_allreduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <sstream>
#include <stdexcept>

#include "common/proc_stat.h"

namespace convoy::trainer {

namespace {

constexpr uint64_t kMagic = 0x434f4e564f594152ULL;  // "CONVOYAR"
constexpr int kMaxRanks = 64;
constexpr size_t kHeaderBytes = 8192;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// out[k][i] = in[0][i] + in[1][i] + ... in rank order, for every output k; blocks of 16 so
// that the compiler vectorises the inner loops.
void SumInto(const std::vector<float*>& out, const std::vector<const float*>& in, int64_t lo,
             int64_t hi) {
  constexpr int64_t kBlock = 16;
  float acc[kBlock];
  for (int64_t i = lo; i < hi; i += kBlock) {
    const int64_t m = std::min(kBlock, hi - i);
    if (m == kBlock) {
      for (int j = 0; j < kBlock; ++j) acc[j] = in[0][i + j];
      for (size_t k = 1; k < in.size(); ++k) {
        const float* __restrict b = in[k] + i;
        for (int j = 0; j < kBlock; ++j) acc[j] += b[j];
      }
      for (float* o : out) std::memcpy(o + i, acc, sizeof(acc));
    } else {
      for (int64_t j = 0; j < m; ++j) {
        float v = in[0][i + j];
        for (size_t k = 1; k < in.size(); ++k) v += in[k][i + j];
        for (float* o : out) o[i + j] = v;
      }
    }
  }
}

}  // namespace

struct ShmAllReduce::Header {
  uint64_t magic;
  uint64_t nonce;
  uint32_t world;
  uint32_t reserved;
  int64_t chunk;
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) pid_t pids[kMaxRanks];
  uint64_t starts[kMaxRanks];
};

std::unique_ptr<ShmAllReduce> ShmAllReduce::Create(int rank, int world, const SetupChannel& channel,
                                                   std::chrono::milliseconds timeout,
                                                   std::string* why, int64_t capacity_floats) {
  const size_t bytes = kHeaderBytes + static_cast<size_t>(2 * world) *
                                          static_cast<size_t>(capacity_floats) * sizeof(float);
  std::string error;
  void* base = MAP_FAILED;
  std::string name;
  uint64_t nonce = 0;
  if (world > kMaxRanks) error = "more than " + std::to_string(kMaxRanks) + " ranks";

  // Rank 0 makes the segment as an unnamed file in /dev/shm (O_TMPFILE: it never has a name,
  // so nothing is left there however any rank ends, even killed -9 during setup) and publishes
  // where its descriptor is; the others open it through /proc, which the kernel allows a process
  // of the same user. The file goes when the last rank unmaps it.
  int fd = -1;
  struct CloseOnExit {
    int& fd;
    ~CloseOnExit() {
      if (fd >= 0) close(fd);
    }
  } close_fd{fd};
  if (rank == 0) {
    std::random_device rd;
    nonce = (uint64_t{rd()} << 32) | rd();
    if (error.empty()) {
      fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
      if (fd < 0) error = Errno("an unnamed file in /dev/shm");
    }
    // Reserve the pages now: on a full tmpfs a later first touch would be a SIGBUS.
    if (error.empty()) {
      const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      if (rc != 0)
        error =
            "reserving " + std::to_string(bytes >> 20) + " MB in /dev/shm: " + std::strerror(rc);
    }
    if (error.empty()) {
      base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (base == MAP_FAILED) error = Errno("mmap");
    }
    if (error.empty()) {
      auto* h = new (base) Header();
      h->nonce = nonce;
      h->world = static_cast<uint32_t>(world);
      h->chunk = capacity_floats;
      h->magic = kMagic;
      name = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd);
    }
    std::ostringstream v;
    v << "ok " << name << " " << nonce;
    channel.set("convoy/shm/name", error.empty() ? v.str() : "error " + error);
  } else {
    const std::string v = channel.get("convoy/shm/name");
    std::istringstream in(v);
    std::string status;
    in >> status >> name >> nonce;
    if (status != "ok") {
      error = "rank 0: " + (v.size() > 6 ? v.substr(6) : std::string("no segment"));
    } else {
      int peer_fd = open(name.c_str(), O_RDWR | O_CLOEXEC);
      struct stat st {};
      if (peer_fd < 0) {
        error = Errno("opening rank 0's segment " + name);
      } else if (fstat(peer_fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
        error = name + ": not the size rank 0 made";
      } else {
        base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, peer_fd, 0);
        if (base == MAP_FAILED) error = Errno("mmap");
      }
      if (peer_fd >= 0) close(peer_fd);
      if (error.empty()) {
        const auto* h = static_cast<const Header*>(base);
        if (h->magic != kMagic || h->nonce != nonce || h->world != static_cast<uint32_t>(world) ||
            h->chunk != capacity_floats) {
          error = name + ": another job's segment (another PID namespace?)";
        }
      }
    }
  }
  auto* header = static_cast<Header*>(base == MAP_FAILED ? nullptr : base);
  if (error.empty()) {
    header->pids[rank] = getpid();
    ProcStat self;
    if (ReadProcStat(0, &self)) header->starts[rank] = self.start_ticks;
  }

  // Round 1: did every rank map it? Round 2: can every rank see every other's process (the
  // same PID namespace), which is how a dead peer is told from a slow one?
  auto agree = [&](const std::string& round) {
    channel.set("convoy/shm/" + round + "/" + std::to_string(rank),
                error.empty()                  ? "ok"
                : error.rfind("rank ", 0) == 0 ? error
                                               : "rank " + std::to_string(rank) + ": " + error);
    // Every rank reports the first rank's failure, so that all of them log the same cause.
    std::string first_error;
    for (int r = 0; r < world; ++r) {
      const std::string v = channel.get("convoy/shm/" + round + "/" + std::to_string(r));
      if (v != "ok" && first_error.empty()) first_error = v;
    }
    if (!first_error.empty()) error = first_error;
    return error.empty();
  };
  const bool mapped = agree("mapped");
  // Every rank has opened it (or given up): rank 0's descriptor is no longer needed.
  if (fd >= 0) close(fd);
  fd = -1;
  if (mapped) {
    for (int r = 0; r < world && error.empty(); ++r) {
      ProcStat peer;
      if (!ReadProcStat(header->pids[r], &peer) || peer.start_ticks != header->starts[r]) {
        error = "cannot see rank " + std::to_string(r) + "'s process (another PID namespace?)";
      }
    }
  }
  agree("visible");
  if (!error.empty()) {
    if (base != MAP_FAILED) munmap(base, bytes);
    if (why != nullptr) *why = error;
    return nullptr;
  }
  return std::unique_ptr<ShmAllReduce>(
      new ShmAllReduce(rank, world, base, bytes, capacity_floats, timeout));
}

ShmAllReduce::ShmAllReduce(int rank, int world, void* base, size_t bytes, int64_t chunk,
                           std::chrono::milliseconds timeout)
    : rank_(rank),
      world_(world),
      base_(base),
      bytes_(bytes),
      chunk_(chunk),
      timeout_(timeout),
      header_(static_cast<Header*>(base)) {
  static_assert(sizeof(Header) <= kHeaderBytes, "header too large");
  auto* data = reinterpret_cast<float*>(static_cast<char*>(base) + kHeaderBytes);
  for (int r = 0; r < world; ++r) slots_.push_back(data + static_cast<size_t>(r) * chunk);
  for (int r = 0; r < world; ++r) {
    results_.push_back(data + static_cast<size_t>(world + r) * chunk);
  }
  result_ = results_[static_cast<size_t>(rank)];
  for (int r = 0; r < world; ++r) peers_.push_back(header_->pids[r]);
  thread_ = std::thread([this] { Loop(); });
}

ShmAllReduce::~ShmAllReduce() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  munmap(base_, bytes_);
}

std::future<void> ShmAllReduce::SumAsync(float* data, int64_t n) {
  auto promise = std::make_shared<std::promise<void>>();
  std::future<void> f = promise->get_future();
  SumAsync(data, n, [promise](std::exception_ptr error) {
    if (error) {
      promise->set_exception(error);
    } else {
      promise->set_value();
    }
  });
  return f;
}

void ShmAllReduce::SumAsync(float* data, int64_t n, std::function<void(std::exception_ptr)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Op{data, 0, n, std::move(done)});
  }
  cv_.notify_all();
}

std::future<void> ShmAllReduce::SumRangeAsync(int64_t offset, int64_t n) {
  if (offset < 0 || n < 0 || offset + n > chunk_) {
    throw std::out_of_range("ShmAllReduce::SumRangeAsync: range beyond the segment");
  }
  auto promise = std::make_shared<std::promise<void>>();
  std::future<void> f = promise->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Op{nullptr, offset, n, [promise](std::exception_ptr error) {
                          if (error) {
                            promise->set_exception(error);
                          } else {
                            promise->set_value();
                          }
                        }});
  }
  cv_.notify_all();
  return f;
}

void ShmAllReduce::Loop() {
  for (;;) {
    Op op;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      if (broken_) throw std::runtime_error("shared-memory all-reduce: an earlier one failed");
      if (op.data != nullptr) {
        Sum(op.data, op.n);
      } else {
        SumRange(op.offset, op.n);
      }
    } catch (...) {
      broken_ = true;
      error = std::current_exception();
    }
    op.done(error);
  }
}

void ShmAllReduce::Sum(float* data, int64_t n) {
  for (int64_t off = 0; off < n; off += chunk_) {
    const int64_t len = std::min(chunk_, n - off);
    std::memcpy(slots_[rank_], data + off, static_cast<size_t>(len) * sizeof(float));
    SumRange(0, len);
    std::memcpy(data + off, result_, static_cast<size_t>(len) * sizeof(float));
  }
}

void ShmAllReduce::SumRange(int64_t offset, int64_t n) {
  std::vector<const float*> in(slots_.begin(), slots_.end());
  Barrier();
  // This rank's share, in whole cache lines.
  const int64_t share = ((n + world_ - 1) / world_ + 15) / 16 * 16;
  const int64_t lo = offset + std::min(n, share * rank_);
  const int64_t hi = std::min(offset + n, lo + share);
  if (lo < hi) SumInto(results_, in, lo, hi);
  Barrier();
}

void ShmAllReduce::Barrier() {
  const uint32_t gen = header_->generation.load(std::memory_order_acquire);
  if (header_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<uint32_t>(world_)) {
    header_->arrived.store(0, std::memory_order_relaxed);
    header_->generation.fetch_add(1, std::memory_order_acq_rel);
    Futex(&header_->generation, FUTEX_WAKE, INT32_MAX, nullptr);
    return;
  }
  // A short spin (the peer is usually a few microseconds behind), then sleep in the kernel:
  // on a machine whose cores all train, a spinning waiter would slow the peer it waits for.
  for (int i = 0; i < 256; ++i) {
    if (header_->generation.load(std::memory_order_acquire) != gen) return;
    CpuRelax();
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const timespec tick{0, 50 * 1000 * 1000};
  while (header_->generation.load(std::memory_order_acquire) == gen) {
    Futex(&header_->generation, FUTEX_WAIT, gen, &tick);
    if (header_->generation.load(std::memory_order_acquire) != gen) return;
    for (int r = 0; r < world_; ++r) {
      ProcStat peer;
      if (r != rank_ && (!ReadProcStat(peers_[r], &peer) || peer.state == 'Z' ||
                         peer.state == 'X' || peer.start_ticks != header_->starts[r])) {
        throw std::runtime_error("shared-memory all-reduce: rank " + std::to_string(r) + " (pid " +
                                 std::to_string(peers_[r]) + ") has exited");
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("shared-memory all-reduce: timed out after " +
                               std::to_string(timeout_.count() / 1000) +
                               " s waiting for the other ranks");
    }
  }
}

}  // namespace convoy::trainer
