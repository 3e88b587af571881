#include "client/top.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "client/format.h"
#include "client/sick_nodes.h"

namespace convoy {
namespace {}  // namespace

std::string ProgressBar(double fraction, int width) {
  const double f = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  const int full = static_cast<int>(std::lround(f * width));
  std::string out;
  for (int i = 0; i < width; ++i) out += i < full ? "█" : "░";
  return out;
}

std::string FormatTop(const v1::ListJobsResponse& jobs, int64_t now) {
  std::map<v1::JobState, int> counts;
  std::vector<std::vector<std::string>> rows;
  for (const v1::Job& j : jobs.jobs()) {
    if (IsTerminalState(j.state())) continue;
    ++counts[j.state()];
    std::vector<const v1::MetricRecord*> recs;
    for (const auto& m : j.latest()) {
      if (m.attempt() == j.attempt() && m.has_step()) recs.push_back(&m);
    }
    std::string progress = "-", rate = "-", loss = "-", slowest = "-";
    if (!recs.empty()) {
      const auto [lo, hi] = std::minmax_element(recs.begin(), recs.end(), [](auto* a, auto* b) {
        return a->step() < b->step() || (a->step() == b->step() && a->rank() > b->rank());
      });
      const v1::MetricRecord& slow = **lo;
      double total = 0;
      if (auto t = slow.values().find("total_steps"); t != slow.values().end()) total = t->second;
      progress = total > 0
                     ? ProgressBar(static_cast<double>(slow.step()) / total, 10) + " " +
                           Printf("%3.0f%%", 100.0 * static_cast<double>(slow.step()) / total) +
                           " " + std::to_string(slow.step()) + Printf("/%.0f", total)
                     : "step " + std::to_string(slow.step());
      double rate_sum = 0, loss_sum = 0;
      int rates = 0, losses = 0;
      for (const auto* m : recs) {
        if (auto r = m->values().find("samples_per_s"); r != m->values().end()) {
          rate_sum += r->second;
          ++rates;
        }
        if (m->has_loss()) {
          loss_sum += m->loss();
          ++losses;
        }
      }
      if (rates > 0) rate = Printf("%.0f/s", rate_sum);
      if (losses > 0) loss = Printf("%.4f", loss_sum / losses);
      if (const BadSteps bad = JobBadSteps(j); bad.skipped > 0) {
        loss += " (" + std::to_string(bad.skipped) + " bad)";  // steps skipped: README
      }
      const int64_t behind = (*hi)->step() - slow.step();
      slowest = recs.size() < 2 ? "-"
                : behind == 0   ? "even"
                                : "rank " + std::to_string(slow.rank()) + " (-" +
                                    std::to_string(behind) + " steps)";
    }
    if (const std::string straggler = TopStragglerCell(j); !straggler.empty()) slowest = straggler;
    rows.push_back({j.id(), j.spec().name(), StateText(j.state()), std::to_string(recs.size()),
                    progress, rate, loss, slowest,
                    j.created_unix_ms() > 0 ? FormatDuration(now - j.created_unix_ms()) : "-"});
  }
  std::string head = "convoy top  " + FormatClock(now) + "  ";
  if (rows.empty()) return head + "no jobs running\n";
  std::vector<std::string> parts;
  for (const auto& [state, n] : counts) parts.push_back(std::to_string(n) + " " + StateText(state));
  for (size_t i = 0; i < parts.size(); ++i) head += (i > 0 ? ", " : "") + parts[i];
  return head + "\n\n" +
         FormatTable({"ID", "NAME", "STATE", "RANKS", "PROGRESS", "RATE", "LOSS", "SLOWEST", "AGE"},
                     rows);
}

}  // namespace convoy
