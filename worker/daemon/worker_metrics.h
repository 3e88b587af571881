// The worker's Prometheus series (served by MetricsHttpServer on --metrics-listen), built
// afresh at every scrape so that a rank's series exist exactly as long as the supervisor
// knows the rank (no stale series to remove):
//   convoy_worker_info{worker,version}                        1
//   convoy_worker_slots{worker}                               slots this worker offers
//   convoy_worker_ranks{worker,state="running|exited"}        ranks the supervisor knows
//   convoy_worker_rank_state{worker,job_id,attempt,rank,state}    1; state from /proc (running,
//       sleeping, disk_sleep, stopped, zombie, ...) or "exited"
//   convoy_worker_rank_cpu_seconds_total{worker,job_id,attempt,rank}      user+system CPU
//   convoy_worker_rank_resident_memory_bytes{worker,job_id,attempt,rank}  RSS
//   convoy_worker_restarts_seen_total{worker}                 Launches of a later attempt
//   convoy_worker_log_bytes_total{worker}                     rank output written to logs
//   convoy_worker_metric_records_received_total{worker}
//   convoy_worker_metric_records_dropped_total{worker}        malformed or queued too long
//   convoy_worker_gpu_utilization_ratio{worker,gpu}           0..1, only where NVML loads
//   convoy_worker_gpu_memory_used_bytes{worker,gpu}, convoy_worker_gpu_memory_total_bytes
// Only the rank's own process is measured (its pid, the process-group leader), not helper
// processes it forks.
//
// Threading: Collect may run on several scrape threads at once. It calls `samples` (which
// copies pids under the supervisor's lock and returns) and reads /proc afterwards, never
// under that lock.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/host/nvml.h"
#include "worker/supervise/supervisor.h"

namespace convoy {

// What /proc says about one process.
struct ProcUsage {
  char state = '?';        // /proc/<pid>/stat field 3
  double cpu_seconds = 0;  // fields 14 + 15 (utime + stime) / clock ticks per second
  int64_t rss_bytes = 0;   // /proc/<pid>/statm field 2 × page size
};
// Reads /proc/<pid>/stat and statm; nullopt when the process is gone.
std::optional<ProcUsage> ReadProcUsage(pid_t pid);
// "running" for 'R', "sleeping" for 'S', "disk_sleep", "stopped", "traced", "zombie",
// "dead", "idle", else "unknown".
std::string ProcStateName(char state);

class WorkerMetrics : public prometheus::Collectable {
 public:
  using SamplesFn = std::function<std::vector<Supervisor::RankSample>()>;
  using CountersFn = std::function<Supervisor::Counters()>;
  using ProcFn = std::function<std::optional<ProcUsage>(pid_t)>;

  // `proc` defaults to ReadProcUsage; `nvml` may be null (no GPU series).
  WorkerMetrics(std::string worker, int slots, SamplesFn samples, CountersFn counters,
                std::unique_ptr<Nvml> nvml = nullptr, ProcFn proc = ReadProcUsage);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string worker_;
  const int slots_;
  const SamplesFn samples_;
  const CountersFn counters_;
  const std::unique_ptr<Nvml> nvml_;
  const ProcFn proc_;
};

}  // namespace convoy
