// Pictures of a job's metric history (v1.JobMetrics) for a terminal: a sparkline of Unicode
// blocks (▁▂▃▄▅▆▇█), a line chart in Braille dots with axis labels, and the series as CSV or
// JSON for other tools. Pure functions of their arguments, tested with fixed data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convoy/v1/job.pb.h"

namespace convoy {

enum class PlotMetric { kLoss, kSamplesPerSecond, kAccuracy };

// "loss", "samples_per_second", "accuracy" (the --metric names); false for anything else.
bool ParsePlotMetric(const std::string& name, PlotMetric* out);
std::string PlotMetricName(PlotMetric metric);

// One point of a series: x is the step.
struct PlotPoint {
  int64_t step = 0;
  int32_t epoch = 0;
  int32_t attempt = 0;
  int64_t time_unix_ms = 0;
  double value = 0;
};

// One rank's values of one metric, in the history's order (training points, then the
// latest record; for accuracy, the evaluations).
struct PlotSeries {
  int rank = 0;
  std::vector<PlotPoint> points;
};

// The series of `metric`, one per rank (all ranks when `rank` < 0, else only that one),
// ranks ascending; points without the metric are left out, and so are ranks left empty.
std::vector<PlotSeries> ExtractSeries(const v1::JobMetrics& metrics, PlotMetric metric, int rank);

// "rank,attempt,epoch,step,time_unix_ms,<metric>" and one line per point; values printed
// with 9 significant digits, so the same history always gives the same text.
std::string SeriesCsv(const std::vector<PlotSeries>& series, PlotMetric metric);
// {"metric": "...", "series": [{"rank": 0, "points": [{"step":..,"epoch":..,"attempt":..,
// "time_unix_ms":..,"value":..}, ...]}, ...]} on one line.
std::string SeriesJson(const std::vector<PlotSeries>& series, PlotMetric metric);

// `values` squeezed (bucket means) or spread to `width` characters (fewer when there are
// fewer values), each one of ▁▂▃▄▅▆▇█ by its place between the smallest and the largest
// value; all ▄ when they are equal. Empty for no values.
std::string Sparkline(const std::vector<double>& values, size_t width);

struct ChartOptions {
  // Whole chart, labels included, in characters (at least 20 × 5 are used).
  int width = 80;
  int height = 16;
  // The first line (empty: none).
  std::string title;
  // ANSI colours, one per series (for a terminal); off: the series share one plain colour.
  bool color = false;
};

// A line chart of `series` (x = step, y = value) in Braille dots (2 × 4 per character), the
// y axis labelled at its top, middle and bottom, the x axis with its first and last step,
// and a legend of the ranks when there are several. Lines join consecutive points of a rank.
// "(no data)" when no series has a point.
std::string RenderChart(const std::vector<PlotSeries>& series, const ChartOptions& options);

// `convoy status`'s history section: the loss of the lowest rank as a sparkline, with its
// first and last value, then the test accuracy per epoch. Empty when there is neither.
std::string FormatHistorySummary(const v1::JobMetrics& metrics, size_t sparkline_width = 40);

}  // namespace convoy
