#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "common/rank_contract.h"
#include "trainer/data.h"
#include "trainer/snapshot_file.h"
#include "trainer/train_helpers.h"

namespace convoy::trainer {
namespace fs = std::filesystem;
namespace {

// The position record: {epoch, sample, global step, seed, samples, version}. Before global
// positions it was {epoch, step in epoch, global step, seed}.
constexpr int64_t kVersion = 2;

// An output stream buffer that appends to a string (an ostringstream would copy its whole
// content once more on str()).
class StringSink : public std::streambuf {
 public:
  explicit StringSink(std::string* out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* data, std::streamsize n) override {
    out_->append(data, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      out_->push_back(traits_type::to_char_type(c));
    }
    return traits_type::not_eof(c);
  }

 private:
  std::string* out_;
};

}  // namespace

std::string NonFiniteState(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  torch::NoGradGuard no_grad;
  auto finite = [](const torch::Tensor& t) {
    return !t.defined() || !t.is_floating_point() || torch::isfinite(t).all().item<bool>();
  };
  for (const auto& p : model.named_parameters()) {
    if (!finite(p.value())) return p.key();
  }
  for (const auto& b : model.named_buffers()) {
    if (!finite(b.value())) return b.key();
  }
  // The optimiser's state, by parameter (its map is keyed by the parameters' addresses).
  std::map<const void*, std::string> names;
  for (const auto& p : model.named_parameters()) {
    names[p.value().unsafeGetTensorImpl()] = p.key();
  }
  auto& state = optimizer.state();
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      const auto it = state.find(StateKey(state, p));
      if (it == state.end()) continue;
      std::vector<torch::Tensor> held;
      if (const auto* s = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
        held = {s->momentum_buffer()};
      } else if (const auto* a =
                     dynamic_cast<const torch::optim::AdamParamState*>(it->second.get())) {
        held = {a->exp_avg(), a->exp_avg_sq(), a->max_exp_avg_sq()};
      }
      for (const auto& t : held) {
        if (!finite(t)) {
          const auto name = names.find(p.unsafeGetTensorImpl());
          return "the optimiser's state of " +
                 (name == names.end() ? std::string("a parameter") : name->second);
        }
      }
    }
  }
  return "";
}

std::string SaveState(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                      const Position& pos, const std::vector<uint8_t>& counts,
                      const StateIdentity& id) {
  std::string out;
  SaveStateInto(&out, model, optimizer, pos, counts, id);
  return out;
}

void SaveStateInto(std::string* out, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                   const Position& pos, const std::vector<uint8_t>& counts,
                   const StateIdentity& id) {
  if (static_cast<int64_t>(counts.size()) != id.samples) {
    throw std::logic_error("SaveState: sample counts of another data set");
  }
  if (const std::string bad = NonFiniteState(model, optimizer); !bad.empty()) {
    throw std::runtime_error("the state of step " + std::to_string(pos.global_step) +
                             " is not saved: " + bad + " holds a value that is not finite");
  }
  torch::serialize::OutputArchive root, m, o;
  model.save(m);
  optimizer.save(o);
  root.write("model", m);
  root.write("optimizer", o);
  if (!id.job_uid.empty()) {
    // "<cluster id> <job uid>" as bytes: whose state this is (read back by LoadState).
    const std::string owner = id.cluster_id + " " + id.job_uid;
    root.write("identity",
               torch::tensor(std::vector<uint8_t>(owner.begin(), owner.end()), torch::kUInt8));
  }
  root.write("position",
             torch::tensor({pos.epoch, pos.sample, pos.global_step, id.seed, id.samples, kVersion},
                           torch::kInt64));
  // from_blob does not copy; the archive is written out before `counts` can change.
  root.write("sample_counts",
             torch::from_blob(const_cast<uint8_t*>(counts.data()),
                              {static_cast<int64_t>(counts.size())}, torch::kUInt8));
  out->clear();
  StringSink sink(out);
  std::ostream stream(&sink);
  root.save_to(stream);
  stream.flush();
}

Position LoadState(std::string_view bytes, torch::nn::Module& model,
                   torch::optim::Optimizer& optimizer, const StateIdentity& id,
                   const StepShape& legacy_shape, std::vector<uint8_t>* counts,
                   torch::Device device) {
  torch::serialize::InputArchive root, m, o;
  root.load_from(bytes.data(), bytes.size(), device);  // no copy into a stream
  {
    std::string found_cluster, found_uid;
    torch::Tensor owner;
    if (root.try_read("identity", owner)) {
      owner = owner.cpu().contiguous();
      if (owner.scalar_type() != torch::kUInt8 || owner.dim() != 1) {
        throw std::runtime_error("checkpoint: bad identity record");
      }
      const char* d = reinterpret_cast<const char*>(owner.data_ptr<uint8_t>());
      const std::string text(d, d + owner.numel());
      const size_t sp = text.find(' ');
      found_cluster = text.substr(0, sp);
      found_uid = sp == std::string::npos ? "" : text.substr(sp + 1);
    }
    const std::string foreign =
        IdentityMismatch(found_cluster, found_uid, id.cluster_id, id.job_uid);
    const bool named = id.resume_any || (!id.resume_uid.empty() && found_uid == id.resume_uid &&
                                         found_cluster == id.cluster_id);
    if (!foreign.empty() && !named) throw std::runtime_error(foreign);
  }
  torch::Tensor p;
  root.read("position", p);
  p = p.cpu();
  if (p.dim() != 1 || p.scalar_type() != torch::kInt64 || (p.numel() != 4 && p.numel() != 6)) {
    throw std::runtime_error("checkpoint: bad position record");
  }
  auto a = p.accessor<int64_t, 1>();
  const int64_t seed = a[3];
  if (seed != id.seed) {
    throw std::runtime_error("made with seed " + std::to_string(seed) + ", this run has " +
                             std::to_string(id.seed));
  }
  Position pos;
  if (p.numel() == 6) {
    if (a[5] != kVersion) throw std::runtime_error("unknown state version " + std::to_string(a[5]));
    if (a[4] != id.samples) {
      throw std::runtime_error("made with " + std::to_string(a[4]) +
                               " training samples, this run has " + std::to_string(id.samples));
    }
    pos = Position{a[0], a[1], a[2]};
    torch::Tensor c;
    root.read("sample_counts", c);
    c = c.cpu();
    if (c.numel() != id.samples || c.scalar_type() != torch::kUInt8 || !c.is_contiguous()) {
      throw std::runtime_error("checkpoint: bad sample counts");
    }
    if (pos.sample < 0 || pos.sample > id.samples || pos.epoch < 0 || pos.global_step < 0) {
      throw std::runtime_error("checkpoint: position out of range");
    }
    const uint8_t* d = c.data_ptr<uint8_t>();
    counts->assign(d, d + c.numel());
  } else {
    // Before issue 16: {epoch, steps done in it, global step, seed}, at an unknown world size;
    // taken to be this run's shape, as the trainer then required.
    pos = Position{a[0], std::min(id.samples, a[1] * legacy_shape.full()), a[2]};
    counts->assign(static_cast<size_t>(id.samples), 0);
    const std::vector<int64_t> perm = EpochPermutation(id.samples, id.seed, pos.epoch);
    for (int64_t i = 0; i < pos.sample; ++i) (*counts)[static_cast<size_t>(perm[i])] = 1;
    std::cerr << "warning: a checkpoint from before global positions: epoch " << pos.epoch
              << ", step " << a[1] << " of it taken as sample " << pos.sample << " at world "
              << legacy_shape.world << std::endl;
  }
  root.read("model", m);
  root.read("optimizer", o);
  model.load(m);
  optimizer.load(o);
  return pos;
}

void WarmUpStateLoading() {
  torch::nn::Linear model(2, 2);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  StateIdentity id;
  id.samples = 1;
  std::vector<uint8_t> counts(1, 0);
  const std::string bytes = SaveState(*model, optimizer, Position{}, counts, id);
  LoadState(bytes, *model, optimizer, id, StepShape{}, &counts);
}

std::string CheckpointPath(const std::string& dir, int64_t step) {
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%012lld", static_cast<long long>(step));
  return dir + "/" + rank_contract::kCheckpointPrefix + digits + rank_contract::kCheckpointSuffix;
}

std::string WriteCheckpoint(const std::string& dir, const std::string& bytes, int64_t step,
                            int keep_newest) {
  fs::create_directories(dir);
  const std::string path = CheckpointPath(dir, step);
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(tmp + ": cannot create");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      throw std::runtime_error(tmp + ": write failed");
    }
    done += static_cast<size_t>(n);
  }
  fsync(fd);
  close(fd);
  fs::rename(tmp, path);
  if (int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  std::vector<std::string> all, partial;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (rank_contract::IsCheckpointName(f)) all.push_back(e.path().string());
    // One rank writes checkpoints, one at a time: a temporary here now is what a writer
    // killed in the middle left (the soak found them).
    if (f.size() > 4 && f.compare(f.size() - 4, 4, ".tmp") == 0 &&
        rank_contract::IsCheckpointName(f.substr(0, f.size() - 4))) {
      partial.push_back(e.path().string());
    }
  }
  std::sort(all.begin(), all.end());
  const size_t keep = static_cast<size_t>(std::max(0, keep_newest));
  for (size_t i = 0; keep > 0 && i + keep < all.size(); ++i) fs::remove(all[i]);
  std::error_code ec;
  for (const std::string& p : partial) fs::remove(p, ec);
  return path;
}

std::optional<FoundCheckpoint> ReadNewestValid(
    const std::string& dir, const std::function<void(const std::string&)>& probe) {
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return std::nullopt;
  std::vector<std::string> all;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (rank_contract::IsCheckpointName(f)) all.push_back(e.path().string());
  }
  std::sort(all.rbegin(), all.rend());
  for (const std::string& path : all) {
    std::string bytes;
    if (!ReadWholeFile(path, &bytes)) continue;  // removed meanwhile
    try {
      probe(bytes);
      return FoundCheckpoint{path, std::move(bytes)};
    } catch (const std::exception& e) {
      // One write: the rank log interleaves stdout and stderr by the chunk the worker reads.
      std::cerr << ("not resuming from " + path + ": " + std::string(e.what()).substr(0, 200) +
                    "\n")
                << std::flush;
    }
  }
  return std::nullopt;
}

}  // namespace convoy::trainer
