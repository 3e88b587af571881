#include "worker/daemon/worker_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

namespace convoy {

std::optional<ProcUsage> ReadProcUsage(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream stat(dir + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // The command name (field 2) may hold spaces and ')': count fields from the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  ProcUsage u;
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 3) u.state = field[0];
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  static const long ticks = sysconf(_SC_CLK_TCK);
  u.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
  std::ifstream statm(dir + "/statm");
  int64_t size = 0, resident = 0;
  if (statm >> size >> resident) {
    static const long page = sysconf(_SC_PAGESIZE);
    u.rss_bytes = resident * (page > 0 ? page : 4096);
  }
  return u;
}

std::string ProcStateName(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk_sleep";
    case 'T':
      return "stopped";
    case 't':
      return "traced";
    case 'Z':
      return "zombie";
    case 'X':
    case 'x':
      return "dead";
    case 'I':
      return "idle";
    default:
      return "unknown";
  }
}

// ---- The collectable.

namespace {

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void Add(prometheus::MetricFamily& f, std::vector<prometheus::ClientMetric::Label> labels,
         double value) {
  prometheus::ClientMetric m;
  // Sorted by name, as prometheus-cpp's own families write them.
  std::sort(labels.begin(), labels.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  m.label = std::move(labels);
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

}  // namespace

WorkerMetrics::WorkerMetrics(std::string worker, int slots, SamplesFn samples, CountersFn counters,
                             std::unique_ptr<Nvml> nvml, ProcFn proc)
    : worker_(std::move(worker)),
      slots_(slots),
      samples_(std::move(samples)),
      counters_(std::move(counters)),
      nvml_(std::move(nvml)),
      proc_(std::move(proc)) {}

std::vector<prometheus::MetricFamily> WorkerMetrics::Collect() const {
  using prometheus::MetricType;
  const prometheus::ClientMetric::Label w{"worker", worker_};
  auto info =
      Family("convoy_worker_info", "This worker's name and version (always 1)", MetricType::Gauge);
  Add(info, {w, {"version", CONVOY_VERSION}}, 1);
  auto slots = Family("convoy_worker_slots", "Rank slots this worker offers", MetricType::Gauge);
  Add(slots, {w}, slots_);

  auto ranks = Family("convoy_worker_ranks", "Ranks this worker knows, running or exited",
                      MetricType::Gauge);
  auto state = Family("convoy_worker_rank_state",
                      "1 for each rank, labelled with its process state (exited once it ended)",
                      MetricType::Gauge);
  auto cpu = Family("convoy_worker_rank_cpu_seconds_total",
                    "User and system CPU time of each running rank's process", MetricType::Counter);
  auto rss = Family("convoy_worker_rank_resident_memory_bytes",
                    "Resident memory of each running rank's process", MetricType::Gauge);
  // The supervisor's lock is held only inside samples_(): /proc is read afterwards.
  const std::vector<Supervisor::RankSample> samples = samples_();
  int running = 0, exited = 0;
  for (const Supervisor::RankSample& s : samples) {
    std::vector<prometheus::ClientMetric::Label> labels = {w,
                                                           {"job_id", s.job_id},
                                                           {"attempt", std::to_string(s.attempt)},
                                                           {"rank", std::to_string(s.rank)}};
    std::optional<ProcUsage> usage;
    if (s.running && s.pid > 0) usage = proc_(s.pid);
    if (!usage) {
      ++exited;
      auto l = labels;
      l.push_back({"state", "exited"});
      Add(state, std::move(l), 1);
      continue;
    }
    ++running;
    auto l = labels;
    l.push_back({"state", ProcStateName(usage->state)});
    Add(state, std::move(l), 1);
    Add(cpu, labels, usage->cpu_seconds);
    Add(rss, labels, static_cast<double>(usage->rss_bytes));
  }
  Add(ranks, {w, {"state", "running"}}, running);
  Add(ranks, {w, {"state", "exited"}}, exited);

  const Supervisor::Counters c = counters_();
  auto restarts = Family("convoy_worker_restarts_seen_total",
                         "Attempts after a job's first that this worker was asked to launch",
                         MetricType::Counter);
  Add(restarts, {w}, static_cast<double>(c.restarts_seen));
  auto log = Family("convoy_worker_log_bytes_total", "Rank output written to the rank logs",
                    MetricType::Counter);
  Add(log, {w}, static_cast<double>(c.log_bytes));
  auto received =
      Family("convoy_worker_metric_records_received_total",
             "Metric records read from the ranks' metrics sockets", MetricType::Counter);
  Add(received, {w}, static_cast<double>(c.records_received));
  auto dropped = Family("convoy_worker_metric_records_dropped_total",
                        "Metric records dropped: malformed, or queued past the bound while the "
                        "coordinator was away",
                        MetricType::Counter);
  Add(dropped, {w}, static_cast<double>(c.records_dropped));

  std::vector<prometheus::MetricFamily> out = {
      std::move(info),     std::move(slots),  std::move(ranks),    std::move(state),
      std::move(cpu),      std::move(rss),    std::move(restarts), std::move(log),
      std::move(received), std::move(dropped)};
  if (nvml_) {
    auto util = Family("convoy_worker_gpu_utilization_ratio",
                       "Fraction of the last sample period a kernel ran on each GPU (NVML)",
                       MetricType::Gauge);
    auto used = Family("convoy_worker_gpu_memory_used_bytes", "GPU memory in use (NVML)",
                       MetricType::Gauge);
    auto total = Family("convoy_worker_gpu_memory_total_bytes", "GPU memory in all (NVML)",
                        MetricType::Gauge);
    for (const GpuSample& g : nvml_->Sample()) {
      const std::vector<prometheus::ClientMetric::Label> l = {w, {"gpu", std::to_string(g.index)}};
      Add(util, l, g.utilization_ratio);
      Add(used, l, static_cast<double>(g.memory_used_bytes));
      Add(total, l, static_cast<double>(g.memory_total_bytes));
    }
    out.push_back(std::move(util));
    out.push_back(std::move(used));
    out.push_back(std::move(total));
  }
  return out;
}

}  // namespace convoy
