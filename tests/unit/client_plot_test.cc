// The terminal pictures of `convoy status`, `convoy plot` and `convoy top`, from fixed data:
// sparklines, the Braille chart, the CSV/JSON series and the top table.
#include "client/plot.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

#include "client/top.h"

namespace convoy {
namespace client_plot_test {

constexpr int64_t kT0 = 1'700'000'000'000;  // 2023-11-14 22:13:20 UTC

// Characters (not bytes) of a UTF-8 string.
size_t Chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Two ranks: loss falling from 2.0 to 0.5 over steps 0..30 (rank 1 a little higher), rate,
// the last record held apart, and two evaluations.
v1::JobMetrics History() {
  v1::JobMetrics m;
  m.set_job_id("j-000001");
  m.set_max_points(512);
  for (int rank : {1, 0}) {  // stored out of order: readers sort
    v1::RankHistory* r = m.add_ranks();
    r->set_rank(rank);
    r->set_stride(2);
    for (int s = 0; s <= 28; s += 2) {
      v1::MetricPoint* p = r->add_points();
      p->set_step(s);
      p->set_epoch(s / 16);
      p->set_time_unix_ms(kT0 + s * 100);
      p->set_loss(2.0 - 1.5 * s / 30.0 + 0.1 * rank);
      p->set_has_loss(true);
      p->set_samples_per_second(1000 + 10 * s);
      p->set_has_samples_per_second(true);
    }
    v1::MetricPoint* last = r->mutable_last();
    last->set_step(30);
    last->set_epoch(1);
    last->set_time_unix_ms(kT0 + 3000);
    last->set_loss(0.5 + 0.1 * rank);
    last->set_has_loss(true);
    for (int e : {0, 1}) {
      v1::EvalPoint* ev = r->add_evals();
      ev->set_epoch(e);
      ev->set_step(16 * (e + 1));
      ev->set_test_accuracy(0.8 + 0.05 * e);
      ev->set_has_test_accuracy(true);
    }
  }
  return m;
}

TEST(ClientPlotTest, SparklineSpansTheBlocksAndSqueezesToItsWidth) {
  EXPECT_EQ(Sparkline({}, 10), "");
  EXPECT_EQ(Sparkline({0, 1, 2, 3, 4, 5, 6, 7}, 20), "▁▂▃▄▅▆▇█");
  EXPECT_EQ(Sparkline({7, 0}, 20), "█▁");
  EXPECT_EQ(Sparkline({3, 3, 3}, 20), "▄▄▄");
  // 100 values into 10 cells: bucket means, still from the lowest to the highest block.
  std::vector<double> falling;
  for (int i = 0; i < 100; ++i) falling.push_back(100 - i);
  const std::string s = Sparkline(falling, 10);
  EXPECT_EQ(Chars(s), 10u);
  EXPECT_EQ(s.substr(0, 3), "█");
  EXPECT_EQ(s.substr(s.size() - 3), "▁");
}

TEST(ClientPlotTest, SeriesAreSortedByRankAndIncludeTheLastRecord) {
  PlotMetric metric;
  ASSERT_TRUE(ParsePlotMetric("samples_per_second", &metric));
  EXPECT_FALSE(ParsePlotMetric("lost", &metric));
  auto loss = ExtractSeries(History(), PlotMetric::kLoss, -1);
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_EQ(loss[0].rank, 0);
  ASSERT_EQ(loss[0].points.size(), 16u);  // 15 points and the last record
  EXPECT_EQ(loss[0].points.back().step, 30);
  // The last record carries no rate: left out of that series.
  EXPECT_EQ(ExtractSeries(History(), PlotMetric::kSamplesPerSecond, 1)[0].points.size(), 15u);
  auto acc = ExtractSeries(History(), PlotMetric::kAccuracy, 0);
  ASSERT_EQ(acc.size(), 1u);
  ASSERT_EQ(acc[0].points.size(), 2u);
  EXPECT_DOUBLE_EQ(acc[0].points[1].value, 0.85);
  EXPECT_TRUE(ExtractSeries(History(), PlotMetric::kLoss, 7).empty());
}

TEST(ClientPlotTest, CsvAndJsonGiveEveryPoint) {
  auto acc = ExtractSeries(History(), PlotMetric::kAccuracy, -1);
  EXPECT_EQ(SeriesCsv(acc, PlotMetric::kAccuracy),
            "rank,attempt,epoch,step,time_unix_ms,accuracy\n"
            "0,0,0,16,0,0.8\n"
            "0,0,1,32,0,0.85\n"
            "1,0,0,16,0,0.8\n"
            "1,0,1,32,0,0.85\n");
  auto one = ExtractSeries(History(), PlotMetric::kAccuracy, 1);
  EXPECT_EQ(SeriesJson(one, PlotMetric::kAccuracy),
            "{\"metric\":\"accuracy\",\"series\":[{\"rank\":1,\"points\":["
            "{\"step\":16,\"epoch\":0,\"attempt\":0,\"time_unix_ms\":0,\"value\":0.8},"
            "{\"step\":32,\"epoch\":1,\"attempt\":0,\"time_unix_ms\":0,\"value\":0.85}]}]}");
  EXPECT_EQ(
      Lines(SeriesCsv(ExtractSeries(History(), PlotMetric::kLoss, -1), PlotMetric::kLoss)).size(),
      1u + 32u);
}

TEST(ClientPlotTest, ChartHasItsSizeAxesAndAFallingLine) {
  ChartOptions o;
  o.width = 40;
  o.height = 10;
  o.title = "loss";
  const std::string chart = RenderChart(ExtractSeries(History(), PlotMetric::kLoss, 0), o);
  std::vector<std::string> lines = Lines(chart);
  ASSERT_EQ(lines.size(), 10u) << chart;
  EXPECT_EQ(lines[0], "loss");
  for (const auto& l : lines) EXPECT_LE(Chars(l), 40u) << l;
  // y labels: the largest value on top, the middle, the smallest at the bottom.
  EXPECT_TRUE(StartsWith(lines[1], "   2 ┤")) << chart;
  EXPECT_TRUE(StartsWith(lines[4], "1.25 ┤")) << chart;
  EXPECT_TRUE(StartsWith(lines[7], " 0.5 ┤")) << chart;
  EXPECT_TRUE(StartsWith(lines[2], "     │")) << chart;
  // The x axis and its labels: first step, "step", last step.
  EXPECT_TRUE(StartsWith(lines[8], "     └──")) << chart;
  EXPECT_EQ(Chars(lines[8]), 40u);
  EXPECT_TRUE(StartsWith(lines[9], "      0 ")) << chart;
  EXPECT_NE(lines[9].find(" step "), std::string::npos);
  EXPECT_EQ(lines[9].substr(lines[9].size() - 3), " 30");
  EXPECT_EQ(Chars(lines[9]), 40u);
  // The falling line starts in the top row's first cell (a Braille character, U+28xx) and
  // ends in the bottom row's last; the top row ends early (no trailing blanks).
  EXPECT_TRUE(StartsWith(lines[1], "   2 ┤\xE2\xA0")) << chart;
  EXPECT_LT(Chars(lines[1]), 15u);
  EXPECT_EQ(Chars(lines[7]), 40u);
  // Every plot row has dots (the points are joined by lines, not scattered).
  for (int r = 1; r <= 7; ++r) {
    EXPECT_TRUE(lines[r].find("\xE2\xA0") != std::string::npos ||
                lines[r].find("\xE2\xA1") != std::string::npos ||
                lines[r].find("\xE2\xA2") != std::string::npos ||
                lines[r].find("\xE2\xA3") != std::string::npos)
        << r << "\n"
        << chart;
  }
}

TEST(ClientPlotTest, SeveralRanksGetALegendAndColoursOnlyWhenAsked) {
  ChartOptions o;
  o.width = 60;
  o.height = 12;
  const std::string plain = RenderChart(ExtractSeries(History(), PlotMetric::kLoss, -1), o);
  EXPECT_NE(plain.find("━━ rank 0  ━━ rank 1"), std::string::npos) << plain;
  EXPECT_EQ(plain.find('\x1b'), std::string::npos);
  o.color = true;
  const std::string colored = RenderChart(ExtractSeries(History(), PlotMetric::kLoss, -1), o);
  EXPECT_NE(colored.find("\x1b[31m"), std::string::npos);
  EXPECT_NE(colored.find("\x1b[32m"), std::string::npos);
  EXPECT_EQ(RenderChart({}, o), "(no data)\n");
}

TEST(ClientPlotTest, AFlatSeriesStillDraws) {
  PlotSeries s;
  s.points = {{0, 0, 0, 0, 1.0}, {10, 0, 0, 0, 1.0}};
  const std::string chart = RenderChart({s}, ChartOptions());
  EXPECT_NE(chart.find("1.05 ┤"), std::string::npos) << chart;
  EXPECT_NE(chart.find("0.95 ┤"), std::string::npos) << chart;
  EXPECT_NE(chart.find("\xE2\xA0"), std::string::npos);
}

TEST(ClientPlotTest, ASinglePointIsCentredAndTheAxisNamesItsOneStep) {
  // One epoch's test accuracy: one point, at step 300. The axis read "300 ... 301" before.
  PlotSeries s;
  s.points = {{300, 0, 0, 0, 0.9}};
  ChartOptions o;
  o.width = 40;
  o.height = 8;
  const std::string chart = RenderChart({s}, o);
  const std::vector<std::string> lines = Lines(chart);
  ASSERT_EQ(lines.size(), 8u) << chart;
  const std::string& labels = lines.back();
  EXPECT_NE(labels.find("step 300"), std::string::npos) << chart;
  EXPECT_EQ(labels.find("301"), std::string::npos) << chart;
  EXPECT_EQ(labels.find("299"), std::string::npos) << chart;
  // The label and the point are both in the middle of the plot's columns.
  const std::string& axis = lines[lines.size() - 2];
  const size_t plot_start = Chars(axis.substr(0, axis.find("└"))) + 1;
  const size_t plot_cols = Chars(axis) - plot_start;
  const size_t label_mid = labels.find("step 300") + 4 - plot_start;
  EXPECT_NEAR(static_cast<double>(label_mid), plot_cols / 2.0, 2.0) << chart;
  int dot_col = -1;
  for (size_t r = 0; r + 2 < lines.size(); ++r) {
    const std::string& l = lines[r];
    for (size_t i = 0; i + 1 < l.size(); ++i) {
      const auto b = static_cast<unsigned char>(l[i + 1]);
      if (l[i] == '\xE2' && b >= 0xA0 && b <= 0xA3) {  // Braille: U+2800-U+28FF
        dot_col = static_cast<int>(Chars(l.substr(0, i)));
        break;
      }
    }
  }
  ASSERT_GE(dot_col, 0) << chart;
  EXPECT_NEAR(dot_col - static_cast<double>(plot_start), plot_cols / 2.0, 1.5) << chart;
}

TEST(ClientPlotTest, PointsSharingADotColumnAreDrawnAsTheirMean) {
  // A per-step loss that jumps between 0 and 1 every step: 1,000 points on about 70 dot
  // columns read as a flat line near 0.5, not a band from 0 to 1.
  PlotSeries s;
  for (int i = 0; i < 1000; ++i) s.points.push_back({i, 0, 0, 0, i % 2 == 0 ? 0.0 : 1.0});
  ChartOptions o;
  o.width = 40;
  o.height = 8;
  const std::vector<std::string> lines = Lines(RenderChart({s}, o));
  ASSERT_GE(lines.size(), 3u);
  const double top = std::atof(lines[0].c_str());
  const double bottom = std::atof(lines[lines.size() - 3].c_str());
  EXPECT_GT(bottom, 0.4) << lines[lines.size() - 3];
  EXPECT_LT(top, 0.6) << lines[0];
  // The x axis still spans the raw steps.
  EXPECT_TRUE(StartsWith(lines.back().substr(lines.back().find_first_not_of(' ')), "0 "))
      << lines.back();
  EXPECT_EQ(lines.back().substr(lines.back().size() - 4), " 999");
}

TEST(ClientPlotTest, StatusSummaryShowsTheLossSparklineAndAccuracyPerEpoch) {
  const std::string text = FormatHistorySummary(History(), 16);
  EXPECT_EQ(text,
            "history (rank 0, steps 0-30):\n"
            "  loss       ██▇▇▆▆▅▅▄▄▃▃▂▂▁▁  2.0000 → 0.5000\n"
            "  samples/s  ▁▂▂▃▃▄▄▅▅▆▆▇▇██  1000 → 1280\n"
            "  test accuracy per epoch:  0: 80.00%  1: 85.00%\n");
  EXPECT_EQ(FormatHistorySummary(v1::JobMetrics()), "");
}

v1::MetricRecord Rec(int rank, int attempt, int64_t step, double loss, double rate) {
  v1::MetricRecord m;
  m.set_rank(rank);
  m.set_attempt(attempt);
  m.set_step(step);
  m.set_has_step(true);
  m.set_loss(loss);
  m.set_has_loss(true);
  (*m.mutable_values())["samples_per_s"] = rate;
  (*m.mutable_values())["total_steps"] = 200;
  return m;
}

TEST(ClientTopTest, OneRowPerActiveJobWithProgressRateAndSlowestRank) {
  setenv("TZ", "UTC", 1);
  tzset();
  v1::ListJobsResponse jobs;
  v1::Job* running = jobs.add_jobs();
  running->set_id("j-000002");
  running->mutable_spec()->set_name("fmnist");
  running->set_state(v1::RUNNING);
  running->set_attempt(1);
  running->set_created_unix_ms(kT0 - 65'000);
  *running->add_latest() = Rec(0, 1, 100, 0.5, 1000);
  *running->add_latest() = Rec(1, 1, 88, 0.7, 900);
  *running->add_latest() = Rec(2, 0, 10, 9.0, 5);  // an earlier attempt: not counted
  v1::Job* done = jobs.add_jobs();
  done->set_id("j-000001");
  done->set_state(v1::SUCCEEDED);
  v1::Job* waiting = jobs.add_jobs();
  waiting->set_id("j-000003");
  waiting->mutable_spec()->set_name("big");
  waiting->set_state(v1::PENDING);
  waiting->set_created_unix_ms(kT0 - 5'000);
  EXPECT_EQ(FormatTop(jobs, kT0),
            "convoy top  22:13:20  1 PENDING, 1 RUNNING\n"
            "\n"
            "ID        NAME    STATE    RANKS  PROGRESS                RATE    LOSS    "
            "SLOWEST             AGE\n"
            "j-000002  fmnist  RUNNING  2      ████░░░░░░  44% 88/200  1900/s  0.6000  "
            "rank 1 (-12 steps)  1m05s\n"
            "j-000003  big     PENDING  0      -                       -       -       "
            "-                   5s\n");
  v1::ListJobsResponse none;
  *none.add_jobs() = *done;
  EXPECT_EQ(FormatTop(none, kT0), "convoy top  22:13:20  no jobs running\n");
  EXPECT_EQ(ProgressBar(0.5, 4), "██░░");
  EXPECT_EQ(ProgressBar(7, 2), "██");
}

}  // namespace client_plot_test
}  // namespace convoy
