// The coordinator's Prometheus /metrics (prometheus-cpp). Series per rank exist only for
// jobs that are not finished, so label cardinality does not grow with history.
//
// Threading: Update is called from one thread (the Coordinator's ticker, no lock held) with
// the counts and the active jobs' summaries; prometheus-cpp serves scrapes from its own
// threads. Update is O(active jobs' ranks), never O(every job ever run).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "convoy/v1/job.pb.h"
#include "coordinator/job_manager.h"

namespace prometheus {
class Exposer;
class Registry;
template <typename T>
class Family;
class Gauge;
}  // namespace prometheus

namespace convoy {

class MetricsExporter {
 public:
  // Serves /metrics on `listen` (HOST:PORT). Throws std::runtime_error when it cannot bind.
  explicit MetricsExporter(const std::string& listen);
  ~MetricsExporter();

  // Sets the gauges: jobs and workers by state from `stats`, and per-job/per-rank series of
  // the `active` jobs (series of jobs no longer active are removed).
  void Update(const JobManager::Stats& stats, const std::vector<v1::Job>& active);

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Family<prometheus::Gauge>* workers_;
  prometheus::Family<prometheus::Gauge>* restarts_;
  prometheus::Family<prometheus::Gauge>* step_;
  prometheus::Family<prometheus::Gauge>* loss_;
  prometheus::Family<prometheus::Gauge>* samples_per_s_;
  // Per-job and per-rank series currently exported, by job id.
  std::map<std::string,
           std::set<std::pair<prometheus::Family<prometheus::Gauge>*, prometheus::Gauge*>>>
      job_series_;
};

}  // namespace convoy
