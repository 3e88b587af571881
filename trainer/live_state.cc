#include "trainer/live_state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>

#include "common/data_cache.h"
#include "trainer/train_helpers.h"

namespace convoy::trainer {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'C', 'V', 'L', 'I', 'V', 'E', '1', '\0'};
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kAlign = 64;
constexpr size_t kIdentityBytes = 2048;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A mapping, unmapped when the last tensor viewing it is gone.
struct Mapping {
  void* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base != nullptr) munmap(base, size);
  }
};

std::string IdentityText(const SnapshotMeta& m) {
  return m.job + "\n" + m.job_uid + "\n" + m.cluster_id + "\n" + m.model + "\n" +
         std::to_string(m.seed) + "\n" + std::to_string(m.samples);
}

// What the file holds, in order: the parameters, the optimiser's tensors (SGD's momentum
// buffers when it has momentum; Adam's two moments, and the maximum with amsgrad, of each
// parameter), the model's buffers; then Adam's step counts (int64, one a parameter) and the
// epoch's counts. Its signature (names, shapes, types) is in the header, so that a file is
// read only into the same layout.
struct Layout {
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> moments;
  std::vector<torch::Tensor> buffers;
  std::vector<size_t> offsets;                      // of every tensor above, in that order
  std::vector<torch::optim::AdamParamState*> adam;  // whose step counts the file keeps
  size_t steps_offset = 0;
  size_t counts_offset = 0;
  size_t size = 0;
  uint64_t signature = 0;

  std::vector<torch::Tensor> All() const {
    std::vector<torch::Tensor> all = params;
    all.insert(all.end(), moments.begin(), moments.end());
    all.insert(all.end(), buffers.begin(), buffers.end());
    return all;
  }
};

// Adam's state of each parameter, made where its first step has not yet made it, as that
// step would (step 0, zero moments): its step then computes exactly what it would have.
std::string AdamLayout(
    torch::optim::Adam& adam, Layout* out,
    const std::function<void(const std::string&, const torch::Tensor&)>& describe) {
  auto& state = adam.state();
  for (auto& group : adam.param_groups()) {
    const bool amsgrad = static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad();
    for (const auto& p : group.params()) {
      const auto key = StateKey(state, p);
      auto it = state.find(key);
      if (it == state.end()) {
        auto fresh = std::make_unique<torch::optim::AdamParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (amsgrad) fresh->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state.emplace(key, std::move(fresh)).first;
      }
      auto& st = static_cast<torch::optim::AdamParamState&>(*it->second);
      std::vector<torch::Tensor> moments = {st.exp_avg(), st.exp_avg_sq()};
      if (amsgrad) moments.push_back(st.max_exp_avg_sq());
      for (const torch::Tensor& m : moments) {
        if (!m.defined() || !m.is_contiguous() || m.scalar_type() != torch::kFloat32 ||
            m.sizes() != p.sizes()) {
          return "an Adam moment of another layout";
        }
        out->moments.push_back(m);
        describe(amsgrad ? "adam-amsgrad" : "adam", m);
      }
      out->adam.push_back(&st);
    }
  }
  return "";
}

// The layout of `model` and `optimizer`, making SGD's missing momentum buffers (zero: with
// dampening 0, SGD's step then computes exactly what its first step would have) and Adam's
// missing states (AdamLayout). "" or why this state cannot be kept in place.
std::string MakeLayout(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                       size_t counts_size, Layout* out) {
  auto* sgd = dynamic_cast<torch::optim::SGD*>(&optimizer);
  auto* adam = dynamic_cast<torch::optim::Adam*>(&optimizer);
  if (sgd == nullptr && adam == nullptr) return "the optimiser is neither SGD nor Adam";
  bool momentum = false;
  for (auto& group : optimizer.param_groups()) {
    if (sgd == nullptr) break;
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    if (o.dampening() != 0) return "SGD with dampening";
    momentum = momentum || o.momentum() != 0;
  }
  std::string sig = adam != nullptr ? "adam;" : momentum ? "momentum;" : "plain;";
  auto describe = [&](const std::string& name, const torch::Tensor& t) {
    sig += name + ":" + std::string(c10::toString(t.scalar_type()));
    for (int64_t d : t.sizes()) sig += "," + std::to_string(d);
    sig += ";";
  };
  for (const auto& p : model.named_parameters()) {
    const torch::Tensor& t = p.value();
    if (!t.device().is_cpu() || t.scalar_type() != torch::kFloat32 || !t.is_contiguous()) {
      return "parameter " + p.key() + " is not a contiguous float32 CPU tensor";
    }
    out->params.push_back(t);
    describe(p.key(), t);
  }
  if (adam != nullptr) {
    const std::string why = AdamLayout(*adam, out, describe);
    if (!why.empty()) return why;
  }
  if (momentum) {
    auto& state = sgd->state();
    for (auto& group : sgd->param_groups()) {
      for (const auto& p : group.params()) {
        const auto key = StateKey(state, p);
        auto it = state.find(key);
        if (it == state.end()) {
          auto fresh = std::make_unique<torch::optim::SGDParamState>();
          fresh->momentum_buffer(torch::zeros_like(p));
          it = state.emplace(key, std::move(fresh)).first;
        }
        const torch::Tensor& b =
            static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
        if (!b.defined() || !b.is_contiguous() || b.scalar_type() != torch::kFloat32 ||
            b.sizes() != p.sizes()) {
          return "a momentum buffer of another layout";
        }
        out->moments.push_back(b);
        describe("momentum", b);
      }
    }
  }
  for (const auto& b : model.named_buffers()) {
    if (!b.value().device().is_cpu() || !b.value().is_contiguous()) {
      return "buffer " + b.key() + " is not a contiguous CPU tensor";
    }
    out->buffers.push_back(b.value());
    describe(b.key(), b.value());
  }
  size_t off = kHeaderBytes;
  for (const auto& t : out->All()) {
    out->offsets.push_back(off);
    off = AlignUp(off + t.nbytes());
  }
  out->steps_offset = off;
  off = AlignUp(off + out->adam.size() * sizeof(int64_t));
  out->counts_offset = off;
  out->size = AlignUp(off + counts_size);
  // The reader is this same program: std::hash is the same there.
  out->signature = std::hash<std::string>{}(sig + "steps:" + std::to_string(out->adam.size()) +
                                            ";counts:" + std::to_string(counts_size));
  return "";
}

}  // namespace

struct LiveState::Header {
  char magic[8];
  std::atomic<uint64_t> seq;  // odd: being updated; even and > 0: `step` committed
  int64_t step;
  int64_t epoch;
  int64_t sample;
  uint64_t signature;
  uint64_t size;
  uint64_t counts_size;
  char identity[kIdentityBytes];
};
static_assert(sizeof(LiveState::Header) <= kHeaderBytes);
static_assert(offsetof(LiveState::Header, seq) == kLiveStateSeqOffset);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

LiveState::Header* LiveState::header() const { return static_cast<Header*>(base_); }

std::unique_ptr<LiveState> LiveState::Attach(const std::string& dir, int rank,
                                             const SnapshotMeta& identity, torch::nn::Module& model,
                                             torch::optim::Optimizer& optimizer,
                                             const Position& pos,
                                             const std::vector<uint8_t>& counts, std::string* why) {
  const std::string id_text = IdentityText(identity);
  if (id_text.size() >= kIdentityBytes) {
    *why = "the job's identity is too long";
    return nullptr;
  }
  Layout layout;
  *why = MakeLayout(model, optimizer, counts.size(), &layout);
  if (!why->empty()) return nullptr;
  // The directory as the snapshots make it (the worker has, for a job's ranks); a new file
  // (an earlier attempt's rank that still maps the old one keeps its own pages).
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = "cannot create " + dir + ": " + std::strerror(errno);
    return nullptr;
  }
  const std::string path = dir + "/live-" + std::to_string(rank) + ".state";
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = "cannot create " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  void* base = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(layout.size)) == 0) {
    base = ::mmap(nullptr, layout.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  }
  const int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    ::unlink(path.c_str());
    *why = "cannot map " + path + ": " + std::strerror(err);
    return nullptr;
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->base = base;
  mapping->size = layout.size;
  std::unique_ptr<LiveState> live(new LiveState(path, mapping, base, layout.size));
  Header* h = new (base) Header{};
  std::memcpy(h->magic, kMagic, sizeof(kMagic));
  h->seq.store(1, std::memory_order_relaxed);  // being written
  h->signature = layout.signature;
  h->size = layout.size;
  h->counts_size = counts.size();
  std::memcpy(h->identity, id_text.data(), id_text.size());

  // The values copied in, then the parameters and momentum buffers pointed at them: the same
  // tensors (the optimiser's keys, the gradient hooks stay), their storage the file's.
  torch::NoGradGuard no_grad;
  char* bytes = static_cast<char*>(base);
  const std::vector<torch::Tensor> all = layout.All();
  const size_t n_moved = layout.params.size() + layout.moments.size();
  for (size_t i = 0; i < all.size(); ++i) {
    const torch::Tensor& t = all[i];
    if (i >= n_moved) {
      live->buffers_.push_back(t);
      live->buffer_offsets_.push_back(layout.offsets[i]);
      continue;
    }
    torch::Tensor view = torch::from_blob(
        bytes + layout.offsets[i], t.sizes(), [mapping](void*) {}, t.options());
    view.copy_(t);
    torch::Tensor target = t;  // shares the TensorImpl: set_data re-points it in place
    target.set_data(view);
  }
  live->adam_ = layout.adam;
  live->steps_offset_ = layout.steps_offset;
  live->counts_offset_ = layout.counts_offset;
  live->counts_capacity_ = counts.size();
  live->WriteBuffersAndPosition(pos, counts);
  h->seq.store(2, std::memory_order_release);
  return live;
}

LiveState::~LiveState() = default;  // the mapping goes with the last holder

void LiveState::BeginUpdate() {
  Header* h = header();
  h->seq.store(h->seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}

void LiveState::Commit(const Position& pos, const std::vector<uint8_t>& counts) {
  WriteBuffersAndPosition(pos, counts);
  Header* h = header();
  h->seq.store(h->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void LiveState::WriteBuffersAndPosition(const Position& pos, const std::vector<uint8_t>& counts) {
  char* bytes = static_cast<char*>(base_);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    std::memcpy(bytes + buffer_offsets_[i], buffers_[i].data_ptr(), buffers_[i].nbytes());
  }
  auto* steps = reinterpret_cast<int64_t*>(bytes + steps_offset_);
  for (size_t i = 0; i < adam_.size(); ++i) steps[i] = adam_[i]->step();
  std::memcpy(bytes + counts_offset_, counts.data(), std::min(counts.size(), counts_capacity_));
  Header* h = header();
  h->step = pos.global_step;
  h->epoch = pos.epoch;
  h->sample = pos.sample;
}

std::optional<StateOffer> ReadLiveState(const std::string& dir, const SnapshotMeta& identity,
                                        const StateIdentity& state_id, int64_t newer_than,
                                        torch::nn::Module& model,
                                        torch::optim::Optimizer& optimizer) {
  const std::string id_text = IdentityText(identity);
  struct Found {
    std::string path;
    std::shared_ptr<const Bytes> map;
    uint64_t seq = 0;
  };
  std::optional<Found> best;
  int64_t best_step = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("live-", 0) != 0 || name.size() < 11 ||
        name.compare(name.size() - 6, 6, ".state") != 0) {
      continue;
    }
    const std::string path = e.path().string();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st {};
    std::shared_ptr<const Bytes> map;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
        static_cast<size_t>(st.st_size) >= kHeaderBytes) {
      map = MapReadOnly(fd, static_cast<size_t>(st.st_size));
    }
    ::close(fd);
    if (map == nullptr) continue;
    const auto* h = reinterpret_cast<const LiveState::Header*>(map->data());
    if (std::memcmp(h->magic, kMagic, sizeof(kMagic)) != 0 || h->size != map->size() ||
        std::string(h->identity, strnlen(h->identity, kIdentityBytes)) != id_text) {
      continue;
    }
    const uint64_t seq = h->seq.load(std::memory_order_acquire);
    if (seq == 0 || seq % 2 == 1) {
      std::cout << "live state " << path << ": being updated when its rank died (torn); not used"
                << std::endl;
      continue;
    }
    if (h->step > best_step) {
      best_step = h->step;
      best = Found{path, map, seq};
    }
  }
  if (!best || best_step <= newer_than) return std::nullopt;
  const auto* h = reinterpret_cast<const LiveState::Header*>(best->map->data());
  Layout layout;
  std::string why = MakeLayout(model, optimizer, h->counts_size, &layout);
  if (why.empty() && (layout.signature != h->signature || layout.size != h->size)) {
    why = "another model or optimiser layout";
  }
  if (!why.empty()) {
    std::cout << "live state " << best->path << " not used: " << why << std::endl;
    return std::nullopt;
  }
  // Read in place: the wait for the earlier attempts' ranks (resume.h AttemptPresence) has
  // seen every writer gone. A value that is not finite is looked for now (a NaN or an
  // infinity makes the minimum or the maximum one), so that a chosen offer always loads.
  const char* bytes = reinterpret_cast<const char*>(best->map->data());
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> all = layout.All();
  std::vector<torch::Tensor> read;
  for (size_t i = 0; i < all.size(); ++i) {
    read.push_back(torch::from_blob(const_cast<char*>(bytes) + layout.offsets[i], all[i].sizes(),
                                    all[i].options()));
    if (read.back().is_floating_point() && read.back().numel() > 0) {
      const auto [lo, hi] = torch::aminmax(read.back());
      if (!std::isfinite(lo.item<double>()) || !std::isfinite(hi.item<double>())) {
        std::cout << "live state " << best->path << " holds a value that is not finite; not used"
                  << std::endl;
        return std::nullopt;
      }
    }
  }
  Position pos;
  pos.global_step = h->step;
  pos.epoch = h->epoch;
  pos.sample = h->sample;
  StateOffer offer;
  offer.kind = "live";
  offer.path = best->path;
  offer.step = pos.global_step;
  // Only when this offer is the one the ranks load (resume.h): loaded into the model and
  // optimiser, then offered as SaveState's bytes.
  offer.materialise = [map = best->map, all, read = std::move(read), pos, &model, &optimizer,
                       state_id, counts_at = bytes + layout.counts_offset,
                       counts_size = h->counts_size, adam = layout.adam,
                       steps_at = bytes + layout.steps_offset](StateOffer& o) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < all.size(); ++i) {
      torch::Tensor t = all[i];
      t.copy_(read[i]);
    }
    for (size_t i = 0; i < adam.size(); ++i) {
      int64_t step;
      std::memcpy(&step, steps_at + i * sizeof(int64_t), sizeof(step));
      adam[i]->step(step);
    }
    const std::vector<uint8_t> counts(counts_at, counts_at + counts_size);
    o.bytes = SaveState(model, optimizer, pos, counts, state_id);
  };
  return offer;
}

}  // namespace convoy::trainer
