// libFuzzer target: the metric-line parser and the line splitter (worker/exec/metrics_parse.h).
// Besides "no crash, no sanitizer report" it checks:
//  - ParseMetricLine never throws; it accepts exactly the JSON objects of at most
//    kMaxMetricLineBytes (as nlohmann::json judges them), else INVALID_ARGUMENT with a short
//    message;
//  - an accepted record is bounded (at most 64 values, names of 1..64 bytes, a kind of at
//    most 64 bytes), holds only finite numbers, agrees with the JSON on step and loss, and
//    encodes as a proto that decodes to the same record (every string valid UTF-8: the
//    worker forwards records to the coordinator);
//  - MetricLineSplitter, fed the input in arbitrary chunks, yields exactly the lines of at
//    most kMaxMetricLineBytes, drops and counts the longer ones, and reports an unterminated
//    tail. An input starting with '#' is repeated to make lines longer than the limit.
// Input: one metric line as a rank writes it (corpus/metrics_parse/), or a stream of them.
#include <google/protobuf/util/message_differencer.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convoy/v1/common.pb.h"
#include "worker/exec/metrics_parse.h"

namespace {

using convoy::kMaxMetricLineBytes;

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "PROPERTY VIOLATED: %s\n  %s\n", what, detail.substr(0, 2000).c_str());
  std::abort();
}

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    i += n + 1;
  }
  return true;
}

bool FiniteNumber(const nlohmann::json& v) {
  return v.is_number() && std::isfinite(v.get<double>());
}

void CheckLine(const std::string& line) {
  auto rec = convoy::ParseMetricLine(line);  // an exception escaping here aborts: a finding

  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const bool acceptable = line.size() <= kMaxMetricLineBytes && !j.is_discarded() && j.is_object();
  if (!rec.ok()) {
    if (acceptable) Fail("a JSON object line is refused", rec.status().message());
    if (rec.status().code() != convoy::StatusCode::kInvalidArgument) {
      Fail("error code is not INVALID_ARGUMENT", rec.status().message());
    }
    if (rec.status().message().empty() || rec.status().message().size() > 200) {
      Fail("error message empty or long", rec.status().message());
    }
    return;
  }
  if (!acceptable) Fail("a line that is not a JSON object is accepted", line.substr(0, 200));

  const convoy::v1::MetricRecord& r = *rec;
  if (r.values_size() > 64) Fail("more than 64 values", std::to_string(r.values_size()));
  for (const auto& [name, value] : r.values()) {
    if (name.empty() || name.size() > 64) Fail("value name empty or over 64 bytes", name);
    if (!std::isfinite(value)) Fail("value not finite", name);
  }
  if (r.kind().size() > 64) Fail("kind over 64 bytes", r.kind());
  if (!std::isfinite(r.loss()) || !std::isfinite(r.seconds())) Fail("loss/seconds not finite", "");
  if (!IsValidUtf8(r.kind())) Fail("kind is not valid UTF-8", r.kind());
  for (const auto& [name, value] : r.values()) {
    if (!IsValidUtf8(name)) Fail("value name is not valid UTF-8", name);
  }

  // Agreement with the JSON on the well-known fields (the last of duplicate keys wins in
  // nlohmann::json, which the parser iterates too).
  const bool has_step = j.contains("step") && FiniteNumber(j["step"]);
  if (r.has_step() != has_step) Fail("has_step disagrees with the line", line.substr(0, 200));
  const bool has_loss = j.contains("loss") && FiniteNumber(j["loss"]);
  if (r.has_loss() != has_loss) Fail("has_loss disagrees with the line", line.substr(0, 200));
  if (has_loss && r.loss() != j["loss"].get<double>()) Fail("loss differs", line.substr(0, 200));
  if (j.contains("step") && j["step"].is_number_integer() && !j["step"].is_number_unsigned() &&
      r.step() != j["step"].get<int64_t>()) {
    Fail("step differs", line.substr(0, 200));
  }

  std::string wire;
  if (!r.SerializeToString(&wire)) Fail("record does not encode", r.ShortDebugString());
  convoy::v1::MetricRecord decoded;
  if (!decoded.ParseFromString(wire) ||
      !google::protobuf::util::MessageDifferencer::Equals(decoded, r)) {
    Fail("record does not decode to itself", r.ShortDebugString());
  }
}

void CheckSplitter(const uint8_t* data, size_t size) {
  std::string stream(reinterpret_cast<const char*>(data), size);
  if (size > 0 && data[0] == '#') {
    const std::string once = stream;
    while (stream.size() <= kMaxMetricLineBytes + 2 && !once.empty()) stream += once;
  }

  // The model: split at '\n'.
  std::vector<std::string> want;
  int64_t want_dropped = 0;
  size_t start = 0;
  for (;;) {
    const size_t nl = stream.find('\n', start);
    if (nl == std::string::npos) break;
    if (nl - start <= kMaxMetricLineBytes) {
      want.push_back(stream.substr(start, nl - start));
    } else {
      ++want_dropped;
    }
    start = nl + 1;
  }
  const size_t tail = stream.size() - start;
  if (tail > kMaxMetricLineBytes) ++want_dropped;
  const bool want_truncated = tail > 0 && tail <= kMaxMetricLineBytes;

  // Chunk sizes from a generator seeded by the input.
  uint64_t x = 0x9E3779B97F4A7C15ull ^ size;
  for (size_t i = 0; i < size && i < 16; ++i) x = x * 131 + data[i];
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  convoy::MetricLineSplitter splitter;
  std::vector<std::string> got;
  size_t at = 0;
  while (at < stream.size()) {
    const uint64_t r = next();
    size_t n = (r & 3) == 0 ? 1 + (r >> 8) % 8 : 1 + (r >> 8) % 9000;
    n = std::min(n, stream.size() - at);
    for (auto& line : splitter.Feed(stream.data() + at, n)) {
      if (line.size() > kMaxMetricLineBytes) Fail("splitter yields an over-long line", "");
      if (line.find('\n') != std::string::npos) Fail("splitter yields a newline", line);
      got.push_back(std::move(line));
    }
    at += n;
  }
  if (got != want) {
    Fail("splitter lines differ from the stream's lines",
         std::to_string(got.size()) + " vs " + std::to_string(want.size()));
  }
  if (splitter.dropped_long() != want_dropped) {
    Fail("splitter dropped count differs",
         std::to_string(splitter.dropped_long()) + " vs " + std::to_string(want_dropped));
  }
  if (splitter.Finish() != want_truncated) Fail("splitter Finish() differs", "");
  // Each line is an input of its own too: a few suffice here (a repeated stream has many).
  for (size_t i = 0; i < got.size() && i < 4; ++i) CheckLine(got[i]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckLine(std::string(reinterpret_cast<const char*>(data), size));
  CheckSplitter(data, size);
  return 0;
}
