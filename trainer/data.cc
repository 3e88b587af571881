#include "trainer/data.h"

#include "common/data_cache.h"
#include "common/rank_contract.h"

#include <array>
#include <stdexcept>

namespace convoy::trainer {
namespace {

// Fashion-MNIST's training-set mean and standard deviation of [0, 1] pixels.
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;

uint32_t BigEndian(const Bytes& b, size_t off) {
  const uint8_t* s = b.data();
  return (uint32_t(s[off]) << 24) | (uint32_t(s[off + 1]) << 16) | (uint32_t(s[off + 2]) << 8) |
         uint32_t(s[off + 3]);
}

}  // namespace

Dataset LoadFashionMnist(const std::string& dir, const std::string& prefix, int64_t limit,
                         const std::string& cache_dir, const std::function<void()>& while_waiting) {
  const std::string ipath = rank_contract::DataFile(dir, prefix, "images");
  const std::string lpath = rank_contract::DataFile(dir, prefix, "labels");
  CachedFile img_file = LoadGzCached(ipath, cache_dir, while_waiting);
  CachedFile lab_file = LoadGzCached(lpath, cache_dir, while_waiting);
  const Bytes& img = *img_file.bytes;
  const Bytes& lab = *lab_file.bytes;
  if (img.size() < 16) throw std::runtime_error(ipath + ": truncated header");
  if (BigEndian(img, 0) != 2051) {
    throw std::runtime_error(ipath + ": wrong magic number " + std::to_string(BigEndian(img, 0)) +
                             " (an IDX image file has 2051)");
  }
  const int64_t n = BigEndian(img, 4), rows = BigEndian(img, 8), cols = BigEndian(img, 12);
  if (rows != 28 || cols != 28) {
    throw std::runtime_error(ipath + ": images are " + std::to_string(rows) + "x" +
                             std::to_string(cols) + ", expected 28x28");
  }
  if (static_cast<int64_t>(img.size()) != 16 + n * 784) {
    throw std::runtime_error(ipath + ": " + std::to_string(img.size() - 16) +
                             " bytes of pixels for " + std::to_string(n) +
                             " images (truncated or wrong length)");
  }
  if (lab.size() < 8) throw std::runtime_error(lpath + ": truncated header");
  if (BigEndian(lab, 0) != 2049) {
    throw std::runtime_error(lpath + ": wrong magic number " + std::to_string(BigEndian(lab, 0)) +
                             " (an IDX label file has 2049)");
  }
  const int64_t nl = BigEndian(lab, 4);
  if (static_cast<int64_t>(lab.size()) != 8 + nl) {
    throw std::runtime_error(lpath + ": " + std::to_string(lab.size() - 8) + " labels for " +
                             std::to_string(nl) + " declared (truncated or wrong length)");
  }
  if (nl != n) {
    throw std::runtime_error(lpath + ": " + std::to_string(nl) + " labels for " +
                             std::to_string(n) + " images in " + ipath);
  }
  for (int64_t i = 0; i < nl; ++i) {
    if (lab.data()[8 + i] > 9) {
      throw std::runtime_error(lpath + ": label " + std::to_string(lab.data()[8 + i]) +
                               " at index " + std::to_string(i) + " is outside 0..9");
    }
  }
  const int64_t keep = limit > 0 ? std::min(limit, n) : n;
  Dataset d;
  // The images stay where they are (a read-only mapping of the cache, shared by the ranks of
  // the host, or the decompressed buffer): the tensor keeps them alive and is only read.
  std::shared_ptr<const Bytes> keep_alive = img_file.bytes;
  d.images = torch::from_blob(
      const_cast<uint8_t*>(img.data()) + 16, {keep, 1, 28, 28}, [keep_alive](void*) {},
      torch::kUInt8);
  d.labels = torch::from_blob(const_cast<uint8_t*>(lab.data()) + 8, {keep}, torch::kUInt8)
                 .to(torch::kInt64);
  d.source_note = prefix + " images: " + img_file.note + "; labels: " + lab_file.note;
  return d;
}

torch::Tensor Dataset::Batch(const int64_t* idx, int64_t n) const {
  static const std::array<float, 256> kTable = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[v] = (static_cast<float>(v) / 255.0f - kMean) / kStd;
    return t;
  }();
  constexpr int64_t kPixels = 28 * 28;
  torch::Tensor out = torch::empty({n, 1, 28, 28}, torch::kFloat32);
  const uint8_t* src = images.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* image = src + idx[i] * kPixels;
    for (int64_t k = 0; k < kPixels; ++k) dst[k] = kTable[image[k]];
    dst += kPixels;
  }
  return out;
}

torch::Tensor Dataset::Labels(const int64_t* idx, int64_t n) const {
  torch::Tensor out = torch::empty({n}, torch::kInt64);
  const int64_t* src = labels.data_ptr<int64_t>();
  int64_t* dst = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) dst[i] = src[idx[i]];
  return out;
}

std::vector<int64_t> EpochPermutation(int64_t n, int64_t seed, int64_t epoch) {
  torch::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed + epoch));
  torch::Tensor perm = torch::randperm(n, gen, torch::kInt64);
  const int64_t* p = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + n);
}

Prefetcher::Prefetcher(const Dataset& data, std::vector<std::vector<int64_t>> batches)
    : data_(data), batches_(std::move(batches)) {
  thread_ = std::thread([this] { Run(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Prefetcher::Run() {
  for (const std::vector<int64_t>& idx : batches_) {
    std::pair<torch::Tensor, torch::Tensor> item;
    if (!idx.empty()) {
      const auto n = static_cast<int64_t>(idx.size());
      item = std::make_pair(data_.Batch(idx.data(), n), data_.Labels(idx.data(), n));
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stop_ || queue_.size() < 4; });
    if (stop_) return;
    queue_.push_back(std::move(item));
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

bool Prefetcher::Next(torch::Tensor* x, torch::Tensor* y) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_ || !queue_.empty(); });
  if (queue_.empty()) return false;
  *x = std::move(queue_.front().first);
  *y = std::move(queue_.front().second);
  queue_.pop_front();
  cv_.notify_all();
  return true;
}

}  // namespace convoy::trainer
