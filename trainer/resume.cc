#include "trainer/resume.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <torch/torch.h>
#include <unistd.h>

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
  // Every rank holds the newest step itself (DDP keeps the ranks' states identical): each
  // loads its own copy, nothing is sent.
  bool everyone = true;
  for (int r = 0; r < world; ++r) everyone = everyone && s[r] == s[holder];
  if (everyone) {
    AgreedState out;
    out.holder = rank;
    out.state = std::move(*mine);
    return out;
  }

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
