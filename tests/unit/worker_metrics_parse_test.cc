// Metric records as ranks write them: parsing a line, and cutting a stream into lines.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "worker/exec/metrics_parse.h"

namespace convoy {
namespace worker_metrics_parse_test {

TEST(ParseMetricLineTest, WellKnownFieldsAndValues) {
  auto rec = ParseMetricLine(
      R"({"kind":"step","step":12,"epoch":1,"loss":0.25,"samples":384,"seconds":1.5,)"
      R"("samples_per_s":256.0,"note":"text","nested":{"a":1}})");
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ(rec->kind(), "step");
  EXPECT_EQ(rec->step(), 12);
  EXPECT_TRUE(rec->has_step());
  EXPECT_EQ(rec->epoch(), 1);
  EXPECT_DOUBLE_EQ(rec->loss(), 0.25);
  EXPECT_TRUE(rec->has_loss());
  EXPECT_EQ(rec->samples(), 384);
  EXPECT_DOUBLE_EQ(rec->values().at("samples_per_s"), 256.0);
  EXPECT_EQ(rec->values().count("note"), 0u);  // only numbers are kept
  EXPECT_EQ(rec->values().count("nested"), 0u);
}

TEST(ParseMetricLineTest, GarbageIsRefusedNotFatal) {
  for (const std::string& bad :
       std::vector<std::string>{"", "not json", "{\"step\": 1", "[1,2,3]", "42", "\"text\"",
                                std::string(kMaxMetricLineBytes + 1, ' ')}) {
    EXPECT_FALSE(ParseMetricLine(bad).ok()) << bad.substr(0, 20);
  }
  auto minimal = ParseMetricLine("{}");
  ASSERT_TRUE(minimal.ok());
  EXPECT_FALSE(minimal->has_step());
}

TEST(ParseMetricLineTest, MissingFieldsStayUnset) {
  auto rec = ParseMetricLine(R"({"loss": 1.5})");
  ASSERT_TRUE(rec.ok());
  EXPECT_TRUE(rec->has_loss());
  EXPECT_FALSE(rec->has_step());
  EXPECT_EQ(rec->step(), 0);
  EXPECT_EQ(rec->kind(), "");
  EXPECT_TRUE(rec->values().empty());
}

TEST(ParseMetricLineTest, RankFieldAndOddNumbers) {
  auto rec = ParseMetricLine(
      R"({"rank": 3, "step": 1e30, "epoch": -5000000000, "samples": 18446744073709551615,)"
      R"( "flag": true, "kind": 7, "x": 2.5})");
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ(rec->rank(), 3);
  EXPECT_EQ(rec->step(), std::numeric_limits<int64_t>::max());  // clamped, no UB
  EXPECT_EQ(rec->epoch(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(rec->samples(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(rec->kind(), "");                  // not a string: ignored
  EXPECT_EQ(rec->values().count("flag"), 0u);  // booleans are not numbers here
  EXPECT_EQ(rec->values().count("rank"), 0u);
  EXPECT_DOUBLE_EQ(rec->values().at("x"), 2.5);
}

TEST(ParseMetricLineTest, BoundedValues) {
  std::string line = "{";
  for (int i = 0; i < 100; ++i) line += "\"v" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  line += "\"" + std::string(65, 'k') + "\":1}";
  auto rec = ParseMetricLine(line);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->values_size(), 64);
}

TEST(MetricLineSplitterTest, SplitsAcrossReads) {
  MetricLineSplitter s;
  EXPECT_TRUE(s.Feed("{\"a\":", 5).empty());
  auto lines = s.Feed("1}\n{\"b\":2}\n{\"c\"", 16);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "{\"a\":1}");
  EXPECT_EQ(lines[1], "{\"b\":2}");
  EXPECT_TRUE(s.Finish());  // {"c" was cut off
  EXPECT_FALSE(s.Finish());
}

TEST(MetricLineSplitterTest, OverlongLineIsDroppedWholeNotInPieces) {
  MetricLineSplitter s;
  // A huge line whose tail would parse on its own: none of it may come out.
  const std::string huge = std::string(kMaxMetricLineBytes, 'x') + "{\"step\":1}\n";
  std::vector<std::string> out;
  for (size_t i = 0; i < huge.size(); i += 1000) {
    auto lines = s.Feed(huge.data() + i, std::min<size_t>(1000, huge.size() - i));
    out.insert(out.end(), lines.begin(), lines.end());
  }
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.dropped_long(), 1);
  auto next = s.Feed("{\"step\":2}\n", 11);  // the next line is fine again
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0], "{\"step\":2}");
  // Exactly the limit is accepted.
  const std::string edge = std::string(kMaxMetricLineBytes, ' ') + "\n";
  EXPECT_EQ(s.Feed(edge.data(), edge.size()).size(), 1u);
}

}  // namespace worker_metrics_parse_test
}  // namespace convoy

// Regressions found by the fuzzer (tests/fuzz/metrics_parse_fuzz.cc).
namespace convoy {
namespace worker_metrics_parse_test {

// "kind" is cut to 64 bytes at a character boundary: a cut inside a UTF-8 sequence made a
// record that protobuf refuses to decode (the worker forwards records to the coordinator).
TEST(ParseMetricLineFuzzRegressionTest, KindIsCutAtACharacterBoundary) {
  const std::string a63(63, 'a');
  auto rec = ParseMetricLine(R"({"kind":")" + a63 + R"(\u00e9x","step":1})");
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ(rec->kind(), a63);
  std::string wire;
  ASSERT_TRUE(rec->SerializeToString(&wire));
  v1::MetricRecord decoded;
  EXPECT_TRUE(decoded.ParseFromString(wire));
  EXPECT_EQ(decoded.kind(), a63);

  rec = ParseMetricLine(R"({"kind":")" + std::string(62, 'a') + "\xc3\xa9" + R"(x"})");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->kind(), std::string(62, 'a') + "\xc3\xa9");  // fits exactly: kept whole
  rec = ParseMetricLine(R"({"kind":")" + std::string(61, 'a') + "\xf0\x9f\x98\x80" + R"("})");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->kind(), std::string(61, 'a'));
}

}  // namespace worker_metrics_parse_test
}  // namespace convoy
