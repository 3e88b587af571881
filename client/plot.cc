#include "client/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "client/format.h"

namespace convoy {
namespace {

// A value for CSV and JSON: 9 significant digits, "nan"/"inf" (CSV) or null (JSON) when not
// finite.
std::string Num(double v, bool json) {
  if (!std::isfinite(v)) return json ? "null" : Printf("%g", v);
  return Printf("%.9g", v);
}

// An axis label: 4 significant digits.
std::string Label(double v) { return Printf("%.4g", v); }

// The UTF-8 encoding of U+2800 + dots (a Braille pattern).
std::string Braille(unsigned dots) {
  std::string s(3, '\0');
  s[0] = static_cast<char>(0xE2);
  s[1] = static_cast<char>(0xA0 | (dots >> 6));
  s[2] = static_cast<char>(0x80 | (dots & 0x3F));
  return s;
}

// Bit of the dot at (x, y) within a Braille cell (x in 0..1, y in 0..3).
unsigned DotBit(int x, int y) {
  static const unsigned kBits[2][4] = {{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}};
  return kBits[x][y];
}

const char* const kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};

std::string Color(size_t series) { return "\x1b[3" + std::to_string(1 + series % 6) + "m"; }

}  // namespace

bool ParsePlotMetric(const std::string& name, PlotMetric* out) {
  if (name == "loss") {
    *out = PlotMetric::kLoss;
  } else if (name == "samples_per_second") {
    *out = PlotMetric::kSamplesPerSecond;
  } else if (name == "accuracy") {
    *out = PlotMetric::kAccuracy;
  } else {
    return false;
  }
  return true;
}

std::string PlotMetricName(PlotMetric metric) {
  switch (metric) {
    case PlotMetric::kLoss:
      return "loss";
    case PlotMetric::kSamplesPerSecond:
      return "samples_per_second";
    case PlotMetric::kAccuracy:
      return "accuracy";
  }
  return "?";
}

std::vector<PlotSeries> ExtractSeries(const v1::JobMetrics& metrics, PlotMetric metric, int rank) {
  std::vector<const v1::RankHistory*> ranks;
  for (const auto& r : metrics.ranks()) {
    if (rank < 0 || r.rank() == rank) ranks.push_back(&r);
  }
  std::sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) { return a->rank() < b->rank(); });
  std::vector<PlotSeries> out;
  for (const v1::RankHistory* r : ranks) {
    PlotSeries s;
    s.rank = r->rank();
    auto add_point = [&](const v1::MetricPoint& p) {
      const bool has = metric == PlotMetric::kLoss ? p.has_loss() : p.has_samples_per_second();
      if (!has) return;
      s.points.push_back({p.step(), p.epoch(), p.attempt(), p.time_unix_ms(),
                          metric == PlotMetric::kLoss ? p.loss() : p.samples_per_second()});
    };
    if (metric == PlotMetric::kAccuracy) {
      for (const auto& e : r->evals()) {
        if (!e.has_test_accuracy()) continue;
        s.points.push_back({e.step(), e.epoch(), e.attempt(), e.time_unix_ms(), e.test_accuracy()});
      }
    } else {
      for (const auto& p : r->points()) add_point(p);
      if (r->has_last()) add_point(r->last());
    }
    if (!s.points.empty()) out.push_back(std::move(s));
  }
  return out;
}

std::string SeriesCsv(const std::vector<PlotSeries>& series, PlotMetric metric) {
  std::string out = "rank,attempt,epoch,step,time_unix_ms," + PlotMetricName(metric) + "\n";
  for (const PlotSeries& s : series) {
    for (const PlotPoint& p : s.points) {
      out += std::to_string(s.rank) + "," + std::to_string(p.attempt) + "," +
             std::to_string(p.epoch) + "," + std::to_string(p.step) + "," +
             std::to_string(p.time_unix_ms) + "," + Num(p.value, false) + "\n";
    }
  }
  return out;
}

std::string SeriesJson(const std::vector<PlotSeries>& series, PlotMetric metric) {
  std::string out = "{\"metric\":\"" + PlotMetricName(metric) + "\",\"series\":[";
  for (size_t i = 0; i < series.size(); ++i) {
    if (i > 0) out += ",";
    out += "{\"rank\":" + std::to_string(series[i].rank) + ",\"points\":[";
    for (size_t j = 0; j < series[i].points.size(); ++j) {
      const PlotPoint& p = series[i].points[j];
      if (j > 0) out += ",";
      out += "{\"step\":" + std::to_string(p.step) + ",\"epoch\":" + std::to_string(p.epoch) +
             ",\"attempt\":" + std::to_string(p.attempt) +
             ",\"time_unix_ms\":" + std::to_string(p.time_unix_ms) +
             ",\"value\":" + Num(p.value, true) + "}";
    }
    out += "]}";
  }
  return out + "]}";
}

std::string Sparkline(const std::vector<double>& values, size_t width) {
  if (values.empty() || width == 0) return "";
  std::vector<double> cells;
  if (values.size() <= width) {
    cells = values;
  } else {
    for (size_t i = 0; i < width; ++i) {
      const size_t from = i * values.size() / width, to = (i + 1) * values.size() / width;
      double sum = 0;
      for (size_t k = from; k < to; ++k) sum += values[k];
      cells.push_back(sum / static_cast<double>(to - from));
    }
  }
  const auto [lo, hi] = std::minmax_element(cells.begin(), cells.end());
  const double min = *lo, max = *hi;
  std::string out;
  for (double v : cells) {
    int level = 3;
    if (max > min) level = static_cast<int>(std::lround((v - min) / (max - min) * 7));
    out += kBlocks[std::clamp(level, 0, 7)];
  }
  return out;
}

namespace {

// The x and y range of the finite points; false when there are none.
bool Range(const std::vector<PlotSeries>& series, double* xmin, double* xmax, double* ymin,
           double* ymax) {
  bool any = false;
  for (const PlotSeries& s : series) {
    for (const PlotPoint& p : s.points) {
      const double x = static_cast<double>(p.step);
      if (!std::isfinite(p.value)) continue;
      if (!any) {
        *xmin = *xmax = x;
        *ymin = *ymax = p.value;
        any = true;
      }
      *xmin = std::min(*xmin, x);
      *xmax = std::max(*xmax, x);
      *ymin = std::min(*ymin, p.value);
      *ymax = std::max(*ymax, p.value);
    }
  }
  return any;
}

// Consecutive finite points of a series that fall into the same one of `columns` dot
// columns between xmin and xmax become one, their mean: a noisy per-step loss reads as a
// curve instead of a band, and the y axis spans what is drawn.
std::vector<PlotSeries> MeanPerColumn(const std::vector<PlotSeries>& series, double xmin,
                                      double xmax, int columns) {
  std::vector<PlotSeries> out;
  for (const PlotSeries& s : series) {
    PlotSeries m;
    m.rank = s.rank;
    int column = -1;
    double steps = 0, sum = 0;
    int n = 0;
    auto emit = [&] {
      if (n == 0) return;
      m.points.push_back({static_cast<int64_t>(std::llround(steps / n)), 0, 0, 0, sum / n});
      steps = sum = 0;
      n = 0;
    };
    for (const PlotPoint& p : s.points) {
      if (!std::isfinite(p.value)) {
        emit();
        m.points.push_back(p);  // a gap in the line
        column = -1;
        continue;
      }
      const int c = static_cast<int>(
          std::lround((static_cast<double>(p.step) - xmin) / (xmax - xmin) * (columns - 1)));
      if (c != column) emit();
      column = c;
      steps += static_cast<double>(p.step);
      sum += p.value;
      ++n;
    }
    emit();
    out.push_back(std::move(m));
  }
  return out;
}

// The chart's dots: rows x cols braille cells of 2 x 4 dots each, and per cell the series
// that drew last (for its colour).
struct Canvas {
  Canvas(int rows, int cols)
      : cols(cols),
        dw(cols * 2),
        dh(rows * 4),
        cells(static_cast<size_t>(rows * cols), 0),
        owner(cells.size(), -1) {}
  void Dot(int x, int y, int s) {
    if (x < 0 || y < 0 || x >= dw || y >= dh) return;
    const size_t c = static_cast<size_t>((y / 4) * cols + x / 2);
    cells[c] |= DotBit(x % 2, y % 4);
    owner[c] = s;
  }
  // A straight line from (x0, y0) to (x, y) (Bresenham).
  void Line(int x0, int y0, int x, int y, int s) {
    const int dx = std::abs(x - x0), dy = -std::abs(y - y0);
    const int sx = x0 < x ? 1 : -1, sy = y0 < y ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      Dot(x0, y0, s);
      if (x0 == x && y0 == y) break;
      const int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  const int cols, dw, dh;
  std::vector<unsigned> cells;
  std::vector<int> owner;
};

// Each series as lines between its points (a point that is not finite breaks the line), on
// axes from (xmin, ymin) to (xmax, ymax).
void DrawSeries(const std::vector<PlotSeries>& series, double xmin, double xmax, double ymin,
                double ymax, Canvas* canvas) {
  auto to_dot = [&](const PlotPoint& p, int* x, int* y) {
    *x = static_cast<int>(
        std::lround((static_cast<double>(p.step) - xmin) / (xmax - xmin) * (canvas->dw - 1)));
    *y = static_cast<int>(std::lround((ymax - p.value) / (ymax - ymin) * (canvas->dh - 1)));
  };
  for (size_t si = 0; si < series.size(); ++si) {
    bool have_prev = false;
    int px = 0, py = 0;
    for (const PlotPoint& p : series[si].points) {
      if (!std::isfinite(p.value)) {
        have_prev = false;
        continue;
      }
      int x, y;
      to_dot(p, &x, &y);
      if (!have_prev) {
        canvas->Dot(x, y, static_cast<int>(si));
      } else {
        canvas->Line(px, py, x, y, static_cast<int>(si));
      }
      px = x;
      py = y;
      have_prev = true;
    }
  }
}

// The x axis's labels under a plot `cols` wide after `label_w` columns of y labels: the first
// and last steps, and "step" between them where it fits.
std::string StepLabels(size_t label_w, int cols, double xmin, double xmax) {
  const std::string first = Printf("%.0f", xmin), last = Printf("%.0f", xmax), name = "step";
  std::string xl = std::string(label_w + 2, ' ') + first;
  const int inner = cols - static_cast<int>(first.size() + last.size());
  if (inner >= static_cast<int>(name.size()) + 2) {
    const int left = (inner - static_cast<int>(name.size())) / 2;
    xl += std::string(static_cast<size_t>(left), ' ') + name +
          std::string(static_cast<size_t>(inner - left - static_cast<int>(name.size())), ' ') +
          last;
  } else {
    xl += " " + last;
  }
  return xl;
}

}  // namespace

std::string RenderChart(const std::vector<PlotSeries>& raw, const ChartOptions& o) {
  double xmin = 0, xmax = 0, ymin = 0, ymax = 0;
  std::string out;
  if (!o.title.empty()) out += o.title + "\n";
  if (!Range(raw, &xmin, &xmax, &ymin, &ymax)) return out + "(no data)\n";
  // Every point at one step (one epoch's accuracy): it is drawn in the middle, and the axis
  // is labelled with that step alone.
  const bool one_step = xmax == xmin;
  const int64_t the_step = static_cast<int64_t>(xmin);
  if (one_step) {
    xmin -= 1;
    xmax += 1;
  }
  const bool legend = raw.size() > 1;
  const int height = std::max(o.height, 5);
  const int rows = std::max(3, height - 2 - (o.title.empty() ? 0 : 1) - (legend ? 1 : 0));
  // The width of the y labels decides the plot's; the labels come from what is drawn: first
  // with the raw range's labels, then with the means'.
  auto label_width = [](double lo, double hi) {
    return std::max({Label(hi).size(), Label((lo + hi) / 2).size(), Label(lo).size()});
  };
  const int width = std::max(o.width, 20);
  const int cols0 = std::max(10, width - static_cast<int>(label_width(ymin, ymax)) - 2);
  const std::vector<PlotSeries> series = MeanPerColumn(raw, xmin, xmax, cols0 * 2);
  double mean_xmin = 0, mean_xmax = 0;  // the x axis keeps the raw steps' range
  Range(series, &mean_xmin, &mean_xmax, &ymin, &ymax);
  if (ymax == ymin) {
    const double pad = ymin == 0 ? 1 : std::fabs(ymin) * 0.05;
    ymin -= pad;
    ymax += pad;
  }
  const std::string top = Label(ymax), mid = Label((ymin + ymax) / 2), bottom = Label(ymin);
  const size_t label_w = std::max({top.size(), mid.size(), bottom.size()});
  const int cols = std::max(10, width - static_cast<int>(label_w) - 2);

  Canvas canvas(rows, cols);
  DrawSeries(series, xmin, xmax, ymin, ymax, &canvas);
  const std::vector<unsigned>& cells = canvas.cells;
  const std::vector<int>& owner = canvas.owner;

  if (legend) {
    std::string line(label_w + 2, ' ');
    for (size_t si = 0; si < series.size(); ++si) {
      if (si > 0) line += "  ";
      const std::string mark = "━━ rank " + std::to_string(series[si].rank);
      line += o.color ? Color(si) + mark + "\x1b[0m" : mark;
    }
    out += line + "\n";
  }
  auto pad = [&](const std::string& s) { return std::string(label_w - s.size(), ' ') + s; };
  for (int r = 0; r < rows; ++r) {
    std::string line;
    if (r == 0) {
      line = pad(top) + " ┤";
    } else if (r == rows / 2) {
      line = pad(mid) + " ┤";
    } else if (r == rows - 1) {
      line = pad(bottom) + " ┤";
    } else {
      line = std::string(label_w, ' ') + " │";
    }
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      if (cells[i] == 0) {
        line += " ";
      } else if (o.color) {
        line += Color(static_cast<size_t>(owner[i])) + Braille(cells[i]) + "\x1b[0m";
      } else {
        line += Braille(cells[i]);
      }
    }
    // No trailing blanks.
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  std::string axis = std::string(label_w, ' ') + " └";
  for (int c = 0; c < cols; ++c) axis += "─";
  out += axis + "\n";
  if (one_step) {
    const std::string label = "step " + std::to_string(the_step);
    const int left = std::max(0, (cols - static_cast<int>(label.size())) / 2);
    return out + std::string(label_w + 2 + static_cast<size_t>(left), ' ') + label + "\n";
  }
  return out + StepLabels(label_w, cols, xmin, xmax) + "\n";
}

std::string FormatHistorySummary(const v1::JobMetrics& metrics, size_t width) {
  std::ostringstream out;
  const auto loss = ExtractSeries(metrics, PlotMetric::kLoss, -1);
  const auto rate = ExtractSeries(metrics, PlotMetric::kSamplesPerSecond, -1);
  const auto acc = ExtractSeries(metrics, PlotMetric::kAccuracy, -1);
  if (loss.empty() && acc.empty()) return "";
  out << "history";
  if (!loss.empty()) {
    const PlotSeries& s = loss.front();
    out << " (rank " << s.rank << ", steps " << s.points.front().step << "-" << s.points.back().step
        << ")";
  }
  out << ":\n";
  auto line = [&](const char* name, const PlotSeries& s, const char* format) {
    std::vector<double> v;
    for (const PlotPoint& p : s.points) v.push_back(p.value);
    out << "  " << name << Sparkline(v, width) << "  " << Printf(format, v.front()) << " → "
        << Printf(format, v.back()) << "\n";
  };
  if (!loss.empty()) line("loss       ", loss.front(), "%.4f");
  if (!rate.empty()) line("samples/s  ", rate.front(), "%.0f");
  if (!acc.empty()) {
    out << "  test accuracy per epoch:";
    for (const PlotPoint& p : acc.front().points) {
      out << "  " << p.epoch << ": " << Printf("%.2f%%", p.value * 100);
      if (p.attempt > 0) out << " (attempt " << p.attempt << ")";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace convoy
