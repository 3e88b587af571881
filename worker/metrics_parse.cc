#include "worker/metrics_parse.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace convoy {

StatusOr<v1::MetricRecord> ParseMetricLine(const std::string& line) {
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
    if (key == "kind" && v.is_string()) {
      rec.set_kind(v.get<std::string>().substr(0, 64));
      continue;
    }
    if (!v.is_number()) continue;  // strings, lists, nested objects: ignored
    const double d = v.get<double>();
    if (!std::isfinite(d)) continue;
    if (key == "step") {
      rec.set_step(v.get<int64_t>());
      rec.set_has_step(true);
    } else if (key == "epoch") {
      rec.set_epoch(static_cast<int32_t>(v.get<int64_t>()));
    } else if (key == "loss") {
      rec.set_loss(d);
      rec.set_has_loss(true);
    } else if (key == "samples") {
      rec.set_samples(v.get<int64_t>());
    } else if (key == "seconds") {
      rec.set_seconds(d);
    } else if (key == "rank") {
      rec.set_rank(static_cast<int32_t>(v.get<int64_t>()));
    } else if (rec.values_size() < 64 && key.size() <= 64) {
      (*rec.mutable_values())[key] = d;
    }
  }
  return rec;
}

}  // namespace convoy
