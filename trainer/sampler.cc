#include "trainer/sampler.h"

#include <algorithm>
#include <stdexcept>

namespace convoy::trainer {

int64_t StepSamples(int64_t n, int64_t position, const StepShape& shape) {
  return std::max<int64_t>(0, std::min(shape.full(), n - position));
}

int64_t RankSamples(int64_t count, int rank, int world) {
  return count > rank ? (count - rank + world - 1) / world : 0;
}

int64_t StepsLeft(int64_t n, int64_t position, const StepShape& shape) {
  const int64_t left = std::max<int64_t>(0, n - position);
  return (left + shape.full() - 1) / shape.full();
}

std::vector<int64_t> MicroBatchPositions(int64_t n, int64_t position, const StepShape& shape,
                                         int rank, int micro) {
  const int64_t mine = RankSamples(StepSamples(n, position, shape), rank, shape.world);
  const int64_t lo = std::min(mine, int64_t{micro} * shape.batch);
  const int64_t hi = std::min(mine, lo + shape.batch);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(hi - lo));
  for (int64_t k = lo; k < hi; ++k) out.push_back(position + rank + k * shape.world);
  return out;
}

void SampleCounts::AddStep(const std::vector<int64_t>& permutation, int64_t position,
                           const StepShape& shape) {
  const int64_t n = static_cast<int64_t>(permutation.size());
  if (n != size()) throw std::logic_error("SampleCounts: permutation of another data set");
  for (int r = 0; r < shape.world; ++r) {
    for (int a = 0; a < shape.accumulate; ++a) {
      for (int64_t p : MicroBatchPositions(n, position, shape, r, a)) {
        uint8_t& c = counts_[static_cast<size_t>(permutation[static_cast<size_t>(p)])];
        if (c < 255) ++c;
      }
    }
  }
}

SampleCounts::Check SampleCounts::Verify() const {
  Check c;
  c.samples = size();
  for (uint8_t v : counts_) {
    if (v == 0) ++c.skipped;
    if (v > 1) ++c.repeated;
  }
  return c;
}

std::string EpochCheckLine(int64_t epoch, const SampleCounts::Check& check) {
  const std::string e = "epoch " + std::to_string(epoch) + " sample check";
  if (check.ok()) {
    return e + ": " + std::to_string(check.samples) + " of " + std::to_string(check.samples) +
           " samples seen exactly once";
  }
  return e + " FAILED: " + std::to_string(check.repeated) + " repeated, " +
         std::to_string(check.skipped) + " skipped";
}

}  // namespace convoy::trainer
