#include "trainer/resume.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace convoy::trainer {

AttemptPresence::AttemptPresence(std::string dir, int attempt)
    : dir_(std::move(dir)), attempt_(attempt) {
  if (dir_.empty()) return;
  const std::string path = dir_ + "/alive-" + std::to_string(attempt_);
  fd_ = open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ >= 0 && flock(fd_, LOCK_SH) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

AttemptPresence::~AttemptPresence() {
  if (fd_ >= 0) close(fd_);
}

double AttemptPresence::WaitForEarlierAttempts(std::chrono::milliseconds timeout) const {
  if (dir_.empty()) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> earlier;
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("alive-", 0) != 0) continue;
      char* end = nullptr;
      const long n = std::strtol(name.c_str() + 6, &end, 10);
      if (end != name.c_str() + 6 && *end == '\0' && n < attempt_) earlier.push_back(name);
    }
    closedir(d);
  }
  bool gave_up = false;
  for (const std::string& name : earlier) {
    const std::string path = dir_ + "/" + name;
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    // Polled, not blocking: a rank that never exits must not hold the restart forever.
    bool free = false;
    while (!(free = flock(fd, LOCK_EX | LOCK_NB) == 0) &&
           std::chrono::steady_clock::now() - t0 < timeout) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (free) {
      unlink(path.c_str());
    } else {
      gave_up = true;
    }
    close(fd);
  }
  if (gave_up) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::optional<StateOffer> Newer(std::optional<StateOffer> a, std::optional<StateOffer> b) {
  if (!a) return b;
  if (!b) return a;
  // Returned by move: a state is megabytes.
  if (b->step > a->step) return b;
  return a;
}

namespace {

// Broadcasts `n` bytes at `data` from `root` (every rank's `data` holds n bytes; the root's are
// sent). On the CPU the buffer itself travels, so that a state of megabytes is not copied on
// the way (each copy of fresh memory is thousands of page faults); a GPU backend goes through
// a device tensor.
void BroadcastBytes(Dist& dist, torch::Device device, char* data, int64_t n, int root) {
  if (n == 0) return;
  torch::Tensor t = torch::from_blob(data, {n}, torch::kUInt8);
  if (device.is_cpu()) {
    std::vector<torch::Tensor> v{t};
    dist.Broadcast(v, root);
    return;
  }
  std::vector<torch::Tensor> v{t.to(device)};
  dist.Broadcast(v, root);
  if (dist.rank() != root) t.copy_(v[0].cpu());
}

}  // namespace

std::optional<AgreedState> AgreeOnNewestState(Dist& dist, torch::Device device,
                                              std::optional<StateOffer> mine) {
  const int world = dist.world();
  const int rank = dist.rank();
  // In each rank's four slots: its step + 1 (0: it holds nothing), the lengths of its
  // "<kind> <path>" and of its bytes, and 1 when its offer is lazy (no bytes yet); the sum is
  // everyone's.
  const std::string head = mine ? mine->kind + " " + mine->path : "";
  torch::Tensor offers = torch::zeros({world, 4}, torch::kInt64);
  if (mine) {
    offers[rank][0] = mine->step + 1;
    offers[rank][1] = static_cast<int64_t>(head.size());
    offers[rank][2] = mine->lazy() ? 0 : static_cast<int64_t>(mine->data().size());
    offers[rank][3] = mine->lazy() ? 1 : 0;
  }
  offers = offers.to(device);
  dist.AllReduceSum(offers);
  offers = offers.cpu().contiguous();
  const auto s = offers.accessor<int64_t, 2>();
  int64_t newest = 0;
  for (int r = 0; r < world; ++r) newest = std::max(newest, s[r][0]);
  if (newest == 0) return std::nullopt;
  // The holder: the lowest rank with the newest step as bytes, else the lowest with it lazily.
  int holder = -1;
  for (int r = 0; r < world && holder < 0; ++r) {
    if (s[r][0] == newest && s[r][3] == 0) holder = r;
  }
  for (int r = 0; r < world && holder < 0; ++r) {
    if (s[r][0] == newest) holder = r;
  }
  // Every rank holds the newest step itself, as bytes (DDP keeps the ranks' states
  // identical): each loads its own copy, nothing is sent.
  bool everyone = true;
  for (int r = 0; r < world; ++r) everyone = everyone && s[r][0] == newest && s[r][3] == 0;
  if (everyone) {
    AgreedState out;
    out.holder = rank;
    out.state = std::move(*mine);
    return out;
  }

  // The holder's "<kind> <path>", then its bytes, sent from and received into the offer itself.
  AgreedState out;
  out.holder = holder;
  if (rank == holder) out.state = std::move(*mine);
  int64_t n = s[holder][2];
  if (s[holder][3] != 0) {
    // A lazy holder makes its bytes now, and says how many.
    torch::Tensor len = torch::zeros({1}, torch::kInt64);
    if (rank == holder) {
      StateOffer& o = out.state;
      auto fill = std::move(o.materialise);
      o.materialise = nullptr;
      fill(o);
      len[0] = static_cast<int64_t>(o.data().size());
    }
    len = len.to(device);
    dist.AllReduceSum(len);
    n = len.cpu().item<int64_t>();
  }
  if (world == 1) return out;
  std::string h = rank == holder ? head : std::string(static_cast<size_t>(s[holder][1]), '\0');
  BroadcastBytes(dist, device, h.data(), s[holder][1], holder);
  if (rank != holder) out.state.bytes.resize(static_cast<size_t>(n));
  // The holder's buffer is only read (a mapped snapshot's is read-only).
  char* bytes =
      rank == holder ? const_cast<char*>(out.state.data().data()) : out.state.bytes.data();
  BroadcastBytes(dist, device, bytes, n, holder);
  const size_t sp = h.find(' ');
  if (sp == std::string::npos) {
    throw std::runtime_error("resume: rank " + std::to_string(holder) + " sent a malformed state");
  }
  out.state.kind = h.substr(0, sp);
  out.state.path = h.substr(sp + 1);
  out.state.step = s[holder][0] - 1;
  return out;
}

}  // namespace convoy::trainer
