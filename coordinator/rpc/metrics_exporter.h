// The coordinator's Prometheus /metrics (prometheus-cpp). Every name has the `convoy_`
// prefix and a base unit (`_seconds`, `_bytes`, `_ratio`); counters end in `_total`.
//
//   cluster   convoy_coordinator_info{version}, convoy_jobs{state},
//             convoy_owner_jobs{owner,state}, convoy_slots{kind=total|used},
//             convoy_workers{state}, convoy_worker_heartbeat_age_seconds{worker},
//             convoy_attempts_started_total, convoy_attempt_failures_total{cause},
//             convoy_job_restarts_total{cause}  (cause: rank_exit, signal, worker_lost, hang,
//             other), histograms convoy_job_queue_seconds, convoy_job_schedule_seconds
//             (submit -> first placement), convoy_job_rendezvous_seconds (placed -> every rank
//             started), convoy_job_first_step_seconds (placed -> first metric record)
//   per job   convoy_job_info{job_id,name,owner,state}, convoy_job_restarts{job_id},
//             convoy_job_samples_per_second{job_id}, convoy_job_step_skew{job_id} (fastest minus
//             slowest rank's step), convoy_job_slowest_rank{job_id,rank},
//             convoy_job_failed_attempts{job_id,cause} (the job's attempts that failed, by
//             root cause: a restart's cause, for the dashboard's annotations)
//   sick      (README "When nodes are sick") convoy_worker_healthy{worker} (0 while its health
//             check fails or its first one runs), convoy_worker_cordoned{worker},
//             convoy_node_faults_total (rank failures attributed to their node),
//             convoy_worker_auto_cordons_total, convoy_stragglers_named_total,
//             convoy_progress_hangs_total; per job convoy_job_stragglers{job_id} (ranks named
//             now), convoy_job_node_moves{job_id}; per rank convoy_rank_step_time_ratio
//             {job_id,rank} (its step time over its peers' median, once known); bad steps
//             (trainer.max_bad_steps): convoy_bad_steps_skipped_total, convoy_rewinds_total,
//             per job convoy_job_bad_steps{job_id} and convoy_job_rewinds{job_id} (its current
//             attempt's, from its ranks' latest records; 0 when none)
//   per rank  convoy_rank_step, convoy_rank_epoch, convoy_rank_loss,
//             convoy_rank_samples_per_second, convoy_rank_test_accuracy_ratio,
//             convoy_rank_last_record_age_seconds  {job_id,rank}
//   RPCs      convoy_grpc_server_handled_total{service,method,code},
//             convoy_grpc_server_handling_seconds{service,method} (an interceptor; methods
//             not in Convoy's protos are labelled "unknown", so clients cannot add series)
//   store     convoy_store_commit_seconds (each group commit), convoy_store_commit_writes_total
//
// Per-job labels are `job_id` (and `name`), never `job`: Prometheus gives every target a
// `job` label of its own (the scrape job), which an exported `job` would collide with.
//
// Cardinality: per-job and per-rank series exist while the job is unfinished and for
// `retention_ms` after it finished, with its final state and last records (so the last values can
// still be scraped and alerted on); then they are removed. Workers' series go when the worker is no
// longer known.
//
// Threading: Update runs on one thread (the Coordinator's ticker, no lock held); OnRpcDone
// on gRPC's threads and OnCommit on the commit thread, concurrently with it (prometheus-cpp's
// families and histograms are thread-safe; the exporter's own maps are Update's alone).
// Scrapes are served from prometheus-cpp's threads. Update is O(active and retained jobs'
// ranks + workers), never O(every job ever run).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/rpc_metrics_interceptor.h"

namespace prometheus {
class Exposer;
class Registry;
template <typename T>
class Family;
class Gauge;
class Counter;
class Histogram;
}  // namespace prometheus

namespace convoy {

class MetricsExporter : public RpcObserver {
 public:
  struct Options {
    // HOST:PORT of /metrics; empty: no HTTP server (tests read Serialize()).
    std::string listen;
    // How long a finished job's series stay (--metrics-retention).
    int64_t retention_ms = 10 * 60 * 1000;
  };
  // Throws std::runtime_error when it cannot bind `listen`.
  MetricsExporter(const Clock& clock, Options options);
  ~MetricsExporter() override;

  // Brings every series up to date with `snap` (the ticker's export).
  void Update(const Coordinator::ExportSnapshot& snap);
  // From the RPC interceptor (any gRPC thread).
  void OnRpcDone(const std::string& full_method, grpc::StatusCode code, double seconds) override;
  // From the commit thread.
  void OnCommit(double seconds, size_t writes);

  // The Prometheus text exposition of everything (what a scrape gets).
  std::string Serialize() const;
  // The port /metrics listens on (0 without listen).
  int port() const;

 private:
  // The families of the constructor, in the order /metrics lists them: the cluster's gauges,
  // attempts and their phases, jobs, ranks.
  void RegisterClusterMetrics(prometheus::Registry& r);
  void RegisterAttemptMetrics(prometheus::Registry& r);
  void RegisterJobMetrics(prometheus::Registry& r);
  void RegisterRankMetrics(prometheus::Registry& r);
  void RegisterSickMetrics(prometheus::Registry& r);
  using GaugeFamily = prometheus::Family<prometheus::Gauge>;
  using Series = std::set<std::pair<GaugeFamily*, prometheus::Gauge*>>;
  struct JobSeries {
    Series series;
    int64_t gone_since_ms = 0;  // monotonic; 0 while the job is active
  };
  // Sets (adding if new) a gauge and records it in `into`.
  static void Set(Series* into, GaugeFamily* family,
                  const std::map<std::string, std::string>& labels, double value);
  // Removes the series of `old` that are not in `now`.
  static void RemoveStale(const Series& old, const Series& now);
  void UpdateJobs(const std::vector<v1::Job>& active, const std::vector<v1::Job>& finished);
  // (Re)sets one job's series from its summary.
  void UpdateJob(const v1::Job& job, int64_t now_unix_ms);
  void UpdateWorkers(const std::vector<v1::WorkerInfo>& workers);
  // Adds (to - *last) to `c` when it grew; remembers `to`.
  static void Advance(prometheus::Counter& c, int64_t to, int64_t* last);

  const Clock& clock_;
  const Options options_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;

  GaugeFamily* jobs_;
  GaugeFamily* owner_jobs_;
  GaugeFamily* slots_;
  GaugeFamily* workers_;
  GaugeFamily* heartbeat_age_;
  GaugeFamily* worker_healthy_;
  GaugeFamily* worker_cordoned_;
  prometheus::Counter* node_faults_total_;
  prometheus::Counter* auto_cordons_total_;
  prometheus::Counter* stragglers_total_;
  prometheus::Counter* progress_hangs_total_;
  GaugeFamily* job_stragglers_;
  GaugeFamily* job_node_moves_;
  prometheus::Counter* bad_steps_total_;
  prometheus::Counter* rewinds_total_;
  GaugeFamily* job_bad_steps_;
  GaugeFamily* job_rewinds_;
  GaugeFamily* rank_step_time_ratio_;
  prometheus::Family<prometheus::Counter>* attempts_started_;
  prometheus::Family<prometheus::Counter>* attempt_failures_;
  prometheus::Family<prometheus::Counter>* restarts_total_;
  prometheus::Family<prometheus::Counter>* preemptions_total_;
  prometheus::Histogram* queue_seconds_;
  prometheus::Histogram* schedule_seconds_;
  prometheus::Histogram* rendezvous_seconds_;
  prometheus::Histogram* first_step_seconds_;
  GaugeFamily* job_info_;
  GaugeFamily* job_restarts_;
  GaugeFamily* job_samples_per_s_;
  GaugeFamily* job_step_skew_;
  GaugeFamily* job_slowest_rank_;
  GaugeFamily* job_failed_attempts_;
  GaugeFamily* rank_step_;
  GaugeFamily* rank_epoch_;
  GaugeFamily* rank_loss_;
  GaugeFamily* rank_samples_per_s_;
  GaugeFamily* rank_accuracy_;
  GaugeFamily* rank_age_;
  prometheus::Family<prometheus::Counter>* rpc_handled_;
  prometheus::Family<prometheus::Histogram>* rpc_seconds_;
  prometheus::Histogram* commit_seconds_;
  prometheus::Counter* commit_writes_;

  // Update's own state (ticker thread only).
  std::map<std::string, JobSeries> job_series_;  // by job id
  Series worker_series_;
  Series owner_series_;
  int64_t last_attempts_started_ = 0;
  int64_t last_node_faults_ = 0, last_auto_cordons_ = 0, last_stragglers_ = 0,
          last_progress_hangs_ = 0, last_bad_steps_ = 0, last_rewinds_ = 0;
  std::map<std::string, int64_t> last_failures_, last_restarts_, last_preemptions_;
};

}  // namespace convoy
