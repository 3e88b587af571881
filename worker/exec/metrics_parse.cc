#include "worker/exec/metrics_parse.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/rank_contract.h"

namespace convoy {
namespace {

namespace metric = rank_contract::metric;

// JSON numbers as integers without undefined behaviour (a double out of range, a huge
// unsigned): clamped to the type's range.
template <typename Int>
Int ToInt(const nlohmann::json& v) {
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    const int64_t i = v.get<int64_t>();
    if (i < std::numeric_limits<Int>::min()) return std::numeric_limits<Int>::min();
    if (i > std::numeric_limits<Int>::max()) return std::numeric_limits<Int>::max();
    return static_cast<Int>(i);
  }
  const double d = v.get<double>();
  if (d <= static_cast<double>(std::numeric_limits<Int>::min())) {
    return std::numeric_limits<Int>::min();
  }
  if (d >= static_cast<double>(std::numeric_limits<Int>::max())) {
    return std::numeric_limits<Int>::max();
  }
  return static_cast<Int>(d);
}

// At most `max` bytes of the UTF-8 text `s`, cut at a character boundary: protobuf refuses
// to decode a string field that is not UTF-8, and the record goes on to the coordinator.
std::string Utf8Prefix(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

StatusOr<v1::MetricRecord> ParseMetricLine(const std::string& line, bool* has_rank) {
  if (has_rank != nullptr) *has_rank = false;
  if (line.size() > kMaxMetricLineBytes) {
    return Status::InvalidArgument("metric line of " + std::to_string(line.size()) +
                                   " bytes is too long");
  }
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("metric line is not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument("metric line is not a JSON object");
  v1::MetricRecord rec;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == metric::kKind && v.is_string()) {
      rec.set_kind(Utf8Prefix(v.get<std::string>(), 64));
      continue;
    }
    if (key == metric::kCheckpointPath && v.is_string()) {
      // Checked by whoever acts on it (worker/files/checkpoint_keeper.h); a path cut short
      // would name another file, so a longer one is dropped whole.
      const std::string& path = v.get_ref<const std::string&>();
      if (path.size() <= kMaxCheckpointPathBytes) rec.set_checkpoint_path(path);
      continue;
    }
    if (!v.is_number()) continue;  // strings, lists, nested objects, booleans: ignored
    const double d = v.get<double>();
    if (!std::isfinite(d)) continue;
    if (key == metric::kStep) {
      rec.set_step(ToInt<int64_t>(v));
      rec.set_has_step(true);
    } else if (key == metric::kEpoch) {
      rec.set_epoch(ToInt<int32_t>(v));
    } else if (key == metric::kLoss) {
      rec.set_loss(d);
      rec.set_has_loss(true);
    } else if (key == metric::kSamples) {
      rec.set_samples(ToInt<int64_t>(v));
    } else if (key == metric::kSeconds) {
      rec.set_seconds(d);
    } else if (key == metric::kRank) {
      rec.set_rank(ToInt<int32_t>(v));
      if (has_rank != nullptr) *has_rank = true;
    } else if (rec.values_size() < 64 && !key.empty() && key.size() <= 64) {
      (*rec.mutable_values())[key] = d;
    }
  }
  return rec;
}

std::vector<std::string> MetricLineSplitter::Feed(const char* data, size_t n) {
  std::vector<std::string> lines;
  size_t i = 0;
  while (i < n) {
    const void* nl = std::memchr(data + i, '\n', n - i);
    const size_t end = nl == nullptr ? n : static_cast<size_t>(static_cast<const char*>(nl) - data);
    if (!discarding_) {
      buffer_.append(data + i, end - i);
      if (buffer_.size() > kMaxMetricLineBytes) {
        buffer_.clear();
        discarding_ = true;
        ++dropped_long_;
      }
    }
    if (nl == nullptr) break;
    if (!discarding_) lines.push_back(std::move(buffer_));
    buffer_.clear();
    discarding_ = false;
    i = end + 1;
  }
  return lines;
}

bool MetricLineSplitter::Finish() {
  const bool truncated = !buffer_.empty();
  buffer_.clear();
  discarding_ = false;
  return truncated;
}

}  // namespace convoy
