#include "coordinator/rpc/metrics_exporter.h"

#include <google/protobuf/descriptor.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <limits>

#include "common/rank_contract.h"
#include "coordinator/state/job_state_machine.h"
#include "coordinator/state/worker_registry.h"

namespace convoy {
namespace {

// The causes JobManager::FailureCause returns: every one exported from the start, at 0, so
// that dashboards and alerts find the series before the first failure.
const char* const kCauses[] = {"rank_exit", "signal", "worker_lost", "hang", "other"};

// Job phases: from sub-second (a warm cluster) to an hour in the queue.
prometheus::Histogram::BucketBoundaries PhaseBuckets() {
  return {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600};
}
// RPCs: unary calls take fractions of a millisecond; streams live for hours.
prometheus::Histogram::BucketBoundaries RpcBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 10, 60, 600, 3600};
}
// SQLite group commits: a fsync is a millisecond or so on an SSD; 0.25 s and up is slow.
prometheus::Histogram::BucketBoundaries CommitBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

prometheus::Histogram* AddHistogram(prometheus::Registry& r, const std::string& name,
                                    const std::string& help,
                                    const prometheus::Histogram::BucketBoundaries& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, buckets);
}

std::string WorkerStateLabel(v1::WorkerState state) {
  std::string name = v1::WorkerState_Name(state);
  if (name.rfind("WORKER_", 0) == 0) name = name.substr(7);
  return name;
}

}  // namespace

MetricsExporter::MetricsExporter(const Clock& clock, Options options)
    : clock_(clock),
      options_(std::move(options)),
      registry_(std::make_shared<prometheus::Registry>()) {
  // In the order /metrics lists them.
  prometheus::Registry& r = *registry_;
  RegisterClusterMetrics(r);
  RegisterAttemptMetrics(r);
  RegisterJobMetrics(r);
  RegisterRankMetrics(r);
  RegisterSickMetrics(r);
  rpc_handled_ = &prometheus::BuildCounter()
                      .Name("convoy_grpc_server_handled_total")
                      .Help("RPCs completed, by service, method and status code")
                      .Register(r);
  rpc_seconds_ = &prometheus::BuildHistogram()
                      .Name("convoy_grpc_server_handling_seconds")
                      .Help("Time from an RPC's start to its end (a stream's whole life)")
                      .Register(r);
  commit_seconds_ =
      AddHistogram(r, "convoy_store_commit_seconds",
                   "Time of each group commit to the state store (SQLite)", CommitBuckets());
  commit_writes_ = &prometheus::BuildCounter()
                        .Name("convoy_store_commit_writes_total")
                        .Help("Changes written to the state store")
                        .Register(r)
                        .Add({});
  if (!options_.listen.empty()) {
    exposer_ = std::make_unique<prometheus::Exposer>(options_.listen);
    exposer_->RegisterCollectable(registry_);
  }
}

void MetricsExporter::RegisterClusterMetrics(prometheus::Registry& r) {
  prometheus::BuildGauge()
      .Name("convoy_coordinator_info")
      .Help("This coordinator's version (always 1)")
      .Register(r)
      .Add({{"version", CONVOY_VERSION}})
      .Set(1);
  jobs_ = &prometheus::BuildGauge().Name("convoy_jobs").Help("Jobs by state").Register(r);
  owner_jobs_ = &prometheus::BuildGauge()
                     .Name("convoy_owner_jobs")
                     .Help("Jobs by owner (the submitting user) and state")
                     .Register(r);
  slots_ = &prometheus::BuildGauge()
                .Name("convoy_slots")
                .Help("Rank slots of ready workers (kind=total) and those in use (kind=used)")
                .Register(r);
  workers_ = &prometheus::BuildGauge().Name("convoy_workers").Help("Workers by state").Register(r);
  heartbeat_age_ = &prometheus::BuildGauge()
                        .Name("convoy_worker_heartbeat_age_seconds")
                        .Help("Seconds since each worker was last heard from")
                        .Register(r);
}

void MetricsExporter::RegisterAttemptMetrics(prometheus::Registry& r) {
  attempts_started_ = &prometheus::BuildCounter()
                           .Name("convoy_attempts_started_total")
                           .Help("Attempts placed on workers")
                           .Register(r);
  attempts_started_->Add({});
  attempt_failures_ = &prometheus::BuildCounter()
                           .Name("convoy_attempt_failures_total")
                           .Help("Attempts that failed, by root cause")
                           .Register(r);
  restarts_total_ = &prometheus::BuildCounter()
                         .Name("convoy_job_restarts_total")
                         .Help("Restarts of jobs, by the root cause of the failed attempt")
                         .Register(r);
  for (const char* cause : kCauses) {
    attempt_failures_->Add({{"cause", cause}});
    restarts_total_->Add({{"cause", cause}});
  }
  preemptions_total_ =
      &prometheus::BuildCounter()
           .Name("convoy_preemptions_total")
           .Help(
               "Attempts asked to checkpoint and stop without failing, by why: "
               "priority (a job of higher priority), drain (drain --now), "
               "resize (an elastic job grew), straggler (a straggler's node replaced)")
           .Register(r);
  for (const char* why : {"priority", "drain", "resize", "straggler"})
    preemptions_total_->Add({{"reason", why}});
  queue_seconds_ = AddHistogram(r, "convoy_job_queue_seconds",
                                "Time a job waited (PENDING or RESTARTING) before it was placed",
                                PhaseBuckets());
  schedule_seconds_ =
      AddHistogram(r, "convoy_job_schedule_seconds",
                   "Time from a job's submission to its first placement", PhaseBuckets());
  rendezvous_seconds_ =
      AddHistogram(r, "convoy_job_rendezvous_seconds",
                   "Time from an attempt's placement until every rank started", PhaseBuckets());
  first_step_seconds_ =
      AddHistogram(r, "convoy_job_first_step_seconds",
                   "Time from an attempt's placement to its first metric record", PhaseBuckets());
}

void MetricsExporter::RegisterJobMetrics(prometheus::Registry& r) {
  job_info_ = &prometheus::BuildGauge()
                   .Name("convoy_job_info")
                   .Help(
                       "1 for each unfinished or recently finished job, with its name, owner "
                       "and state")
                   .Register(r);
  job_restarts_ = &prometheus::BuildGauge()
                       .Name("convoy_job_restarts")
                       .Help("Restarts each job has used so far")
                       .Register(r);
  job_samples_per_s_ = &prometheus::BuildGauge()
                            .Name("convoy_job_samples_per_second")
                            .Help("Sum of the ranks' latest samples per second")
                            .Register(r);
  job_step_skew_ = &prometheus::BuildGauge()
                        .Name("convoy_job_step_skew")
                        .Help("Steps between the fastest and the slowest rank")
                        .Register(r);
  job_slowest_rank_ = &prometheus::BuildGauge()
                           .Name("convoy_job_slowest_rank")
                           .Help("1, labelled with the rank whose step is the lowest")
                           .Register(r);
  job_failed_attempts_ = &prometheus::BuildGauge()
                              .Name("convoy_job_failed_attempts")
                              .Help("Attempts of each job that failed, by root cause")
                              .Register(r);
}

void MetricsExporter::RegisterRankMetrics(prometheus::Registry& r) {
  rank_step_ = &prometheus::BuildGauge()
                    .Name("convoy_rank_step")
                    .Help("Latest training step reported by each rank")
                    .Register(r);
  rank_epoch_ = &prometheus::BuildGauge()
                     .Name("convoy_rank_epoch")
                     .Help("Latest epoch reported by each rank")
                     .Register(r);
  rank_loss_ = &prometheus::BuildGauge()
                    .Name("convoy_rank_loss")
                    .Help("Latest training loss reported by each rank")
                    .Register(r);
  rank_samples_per_s_ = &prometheus::BuildGauge()
                             .Name("convoy_rank_samples_per_second")
                             .Help("Latest throughput reported by each rank")
                             .Register(r);
  rank_accuracy_ = &prometheus::BuildGauge()
                        .Name("convoy_rank_test_accuracy_ratio")
                        .Help("Latest test accuracy (0..1) reported by each rank")
                        .Register(r);
  rank_age_ = &prometheus::BuildGauge()
                   .Name("convoy_rank_last_record_age_seconds")
                   .Help("Seconds since each rank's latest metric record")
                   .Register(r);
}

void MetricsExporter::RegisterSickMetrics(prometheus::Registry& r) {
  worker_healthy_ = &prometheus::BuildGauge()
                         .Name("convoy_worker_healthy")
                         .Help(
                             "1 while a worker passes its health checks (or runs none), 0 "
                             "while one fails or its first one runs: it takes no new ranks")
                         .Register(r);
  worker_cordoned_ = &prometheus::BuildGauge()
                          .Name("convoy_worker_cordoned")
                          .Help(
                              "1 while a worker is cordoned (by an admin, or by the "
                              "coordinator after node faults of several jobs)")
                          .Register(r);
  auto counter = [&r](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  node_faults_total_ = counter("convoy_node_faults_total",
                               "Rank failures attributed to their node (FAILURE_ORIGIN_NODE)");
  auto_cordons_total_ = counter("convoy_worker_auto_cordons_total",
                                "Workers the coordinator cordoned itself after node faults of "
                                "different jobs within --node-fault-window");
  stragglers_total_ = counter("convoy_stragglers_named_total",
                              "Ranks named stragglers (step time over straggler_factor times "
                              "their peers' median)");
  progress_hangs_total_ = counter("convoy_progress_hangs_total",
                                  "Attempts failed as collective hangs found by progress "
                                  "(spec hang_steps), a suspect named");
  bad_steps_total_ = counter("convoy_bad_steps_skipped_total",
                             "Steps every rank of a job skipped because a loss or gradient norm "
                             "was not finite (trainer.max_bad_steps)");
  rewinds_total_ = counter("convoy_rewinds_total",
                           "Rewinds to a good snapshot or checkpoint after max_bad_steps bad "
                           "steps in a row");
  job_bad_steps_ = &prometheus::BuildGauge()
                        .Name("convoy_job_bad_steps")
                        .Help("Bad steps each job's current attempt skipped so far")
                        .Register(r);
  job_rewinds_ = &prometheus::BuildGauge()
                      .Name("convoy_job_rewinds")
                      .Help("Rewinds of each job's current attempt after bad steps")
                      .Register(r);
  job_stragglers_ = &prometheus::BuildGauge()
                         .Name("convoy_job_stragglers")
                         .Help("Ranks of each job's current attempt named stragglers now")
                         .Register(r);
  job_node_moves_ = &prometheus::BuildGauge()
                         .Name("convoy_job_node_moves")
                         .Help("Times each job moved off a sick node without using a restart")
                         .Register(r);
  rank_step_time_ratio_ = &prometheus::BuildGauge()
                               .Name("convoy_rank_step_time_ratio")
                               .Help("Each rank's step time over its peers' median (1: as fast)")
                               .Register(r);
}

MetricsExporter::~MetricsExporter() = default;

int MetricsExporter::port() const {
  if (!exposer_) return 0;
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::string MetricsExporter::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void MetricsExporter::OnRpcDone(const std::string& full_method, grpc::StatusCode code,
                                double seconds) {
  // "/convoy.v1.JobService/SubmitJob": labelled only when the protos define it.
  std::string service = "unknown", method = "unknown";
  const auto slash = full_method.rfind('/');
  if (full_method.size() > 1 && full_method[0] == '/' && slash != std::string::npos && slash > 1) {
    const std::string s = full_method.substr(1, slash - 1);
    const std::string m = full_method.substr(slash + 1);
    if (s.rfind("convoy.", 0) == 0 &&
        google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(s + "." + m) !=
            nullptr) {
      service = s;
      method = m;
    }
  }
  static const char* const kCodes[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int c = static_cast<int>(code);
  const std::string code_name = c >= 0 && c <= 16 ? kCodes[c] : "UNKNOWN";
  rpc_handled_->Add({{"service", service}, {"method", method}, {"code", code_name}}).Increment();
  rpc_seconds_->Add({{"service", service}, {"method", method}}, RpcBuckets()).Observe(seconds);
}

void MetricsExporter::OnCommit(double seconds, size_t writes) {
  commit_seconds_->Observe(seconds);
  commit_writes_->Increment(static_cast<double>(writes));
}

void MetricsExporter::Set(Series* into, GaugeFamily* family,
                          const std::map<std::string, std::string>& labels, double value) {
  prometheus::Gauge& g = family->Add(labels);
  g.Set(value);
  into->insert({family, &g});
}

void MetricsExporter::RemoveStale(const Series& old, const Series& now) {
  for (const auto& s : old) {
    if (now.count(s) == 0) s.first->Remove(s.second);
  }
}

void MetricsExporter::Advance(prometheus::Counter& c, int64_t to, int64_t* last) {
  if (to > *last) c.Increment(static_cast<double>(to - *last));
  *last = to;
}

void MetricsExporter::Update(const Coordinator::ExportSnapshot& snap) {
  const JobManager::Stats& stats = snap.stats;
  for (int s = v1::PENDING; s <= v1::CANCELLED; ++s) {
    const auto state = static_cast<v1::JobState>(s);
    auto it = stats.jobs.find(state);
    jobs_->Add({{"state", StateName(state)}}).Set(it == stats.jobs.end() ? 0 : it->second);
  }
  Series owners;
  for (const auto& [key, n] : stats.jobs_by_owner) {
    Set(&owners, owner_jobs_, {{"owner", key.first}, {"state", StateName(key.second)}}, n);
  }
  RemoveStale(owner_series_, owners);
  owner_series_ = std::move(owners);
  slots_->Add({{"kind", "total"}}).Set(static_cast<double>(stats.slots_total));
  slots_->Add({{"kind", "used"}}).Set(static_cast<double>(stats.slots_used));
  for (v1::WorkerState state : {v1::WORKER_READY, v1::WORKER_UNREACHABLE, v1::WORKER_LOST}) {
    auto it = stats.workers.find(state);
    workers_->Add({{"state", WorkerStateLabel(state)}})
        .Set(it == stats.workers.end() ? 0 : it->second);
  }
  Advance(attempts_started_->Add({}), stats.attempts_started, &last_attempts_started_);
  Advance(*node_faults_total_, stats.node_faults, &last_node_faults_);
  Advance(*auto_cordons_total_, stats.auto_cordons, &last_auto_cordons_);
  Advance(*stragglers_total_, stats.stragglers_named, &last_stragglers_);
  Advance(*progress_hangs_total_, stats.progress_hangs, &last_progress_hangs_);
  Advance(*bad_steps_total_, stats.bad_steps, &last_bad_steps_);
  Advance(*rewinds_total_, stats.rewinds, &last_rewinds_);
  for (const auto& [cause, n] : stats.attempt_failures) {
    Advance(attempt_failures_->Add({{"cause", cause}}), n, &last_failures_[cause]);
  }
  for (const auto& [why, n] : stats.preemptions) {
    Advance(preemptions_total_->Add({{"reason", why}}), n, &last_preemptions_[why]);
  }
  for (const auto& [cause, n] : stats.restarts) {
    Advance(restarts_total_->Add({{"cause", cause}}), n, &last_restarts_[cause]);
  }
  for (const JobManager::Duration& d : snap.durations) {
    switch (d.phase) {
      case JobManager::Phase::kQueue:
        queue_seconds_->Observe(d.seconds);
        break;
      case JobManager::Phase::kSchedule:
        schedule_seconds_->Observe(d.seconds);
        break;
      case JobManager::Phase::kRendezvous:
        rendezvous_seconds_->Observe(d.seconds);
        break;
      case JobManager::Phase::kFirstStep:
        first_step_seconds_->Observe(d.seconds);
        break;
    }
  }
  UpdateWorkers(snap.workers);
  UpdateJobs(snap.active, snap.finished);
}

void MetricsExporter::UpdateWorkers(const std::vector<v1::WorkerInfo>& workers) {
  const int64_t now = clock_.NowUnixMs();
  Series now_series;
  for (const v1::WorkerInfo& w : workers) {
    const double age =
        w.last_heartbeat_unix_ms() > 0
            ? static_cast<double>(std::max<int64_t>(0, now - w.last_heartbeat_unix_ms())) / 1000.0
            : 0;
    Set(&now_series, heartbeat_age_, {{"worker", w.name()}}, age);
    Set(&now_series, worker_healthy_, {{"worker", w.name()}},
        HealthAllowsRanks(w.health()) ? 1 : 0);
    Set(&now_series, worker_cordoned_, {{"worker", w.name()}}, w.cordoned() ? 1 : 0);
  }
  RemoveStale(worker_series_, now_series);
  worker_series_ = std::move(now_series);
}

void MetricsExporter::UpdateJobs(const std::vector<v1::Job>& active,
                                 const std::vector<v1::Job>& finished) {
  const int64_t mono = clock_.NowMonotonicMs();
  const int64_t now = clock_.NowUnixMs();
  // Jobs no longer active keep their series for the retention, then lose them.
  std::set<std::string> live;
  for (const v1::Job& job : active) live.insert(job.id());
  for (auto it = job_series_.begin(); it != job_series_.end();) {
    JobSeries& js = it->second;
    if (live.count(it->first) > 0) {
      js.gone_since_ms = 0;
      ++it;
      continue;
    }
    if (js.gone_since_ms == 0) js.gone_since_ms = mono;
    if (mono - js.gone_since_ms < options_.retention_ms) {
      ++it;
      continue;
    }
    RemoveStale(js.series, {});
    it = job_series_.erase(it);
  }
  for (const v1::Job& job : active) UpdateJob(job, now);
  // A job that finished since the last export: its final state and records, once; then the
  // retention runs from now.
  for (const v1::Job& job : finished) {
    if (live.count(job.id()) > 0) continue;
    UpdateJob(job, now);
    JobSeries& js = job_series_[job.id()];
    if (js.gone_since_ms == 0) js.gone_since_ms = mono;
  }
}

void MetricsExporter::UpdateJob(const v1::Job& job, int64_t now) {
  {
    JobSeries& js = job_series_[job.id()];
    Series series;
    const std::string& id = job.id();
    Set(&series, job_info_,
        {{"job_id", id},
         {"name", job.spec().name()},
         {"owner", job.owner()},
         {"state", StateName(job.state())}},
        1);
    Set(&series, job_restarts_, {{"job_id", id}}, job.restarts());
    std::map<std::string, int> failed;  // every cause, at 0 too: the dashboard's annotation
    for (const char* cause : kCauses) failed[cause] = 0;
    for (const v1::Attempt& a : job.attempts()) {
      if (a.has_failure()) ++failed[JobStats::CauseLabel(a.failure())];
    }
    for (const auto& [cause, n] : failed) {
      Set(&series, job_failed_attempts_, {{"cause", cause}, {"job_id", id}}, n);
    }
    Set(&series, job_stragglers_, {{"job_id", id}}, job.stragglers_size());
    Set(&series, job_node_moves_, {{"job_id", id}}, job.node_moves());
    double bad_steps = 0, rewinds = 0;  // every rank counts the same (one all-reduced verdict)
    for (const v1::MetricRecord& m : job.latest()) {
      if (auto v = m.values().find(rank_contract::kMetricBadSteps); v != m.values().end()) {
        bad_steps = std::max(bad_steps, v->second);
      }
      if (auto v = m.values().find(rank_contract::kMetricRewinds); v != m.values().end()) {
        rewinds = std::max(rewinds, v->second);
      }
    }
    Set(&series, job_bad_steps_, {{"job_id", id}}, bad_steps);
    Set(&series, job_rewinds_, {{"job_id", id}}, rewinds);
    for (const v1::RankStepTime& t : job.step_times()) {
      Set(&series, rank_step_time_ratio_, {{"job_id", id}, {"rank", std::to_string(t.rank())}},
          t.ratio());
    }
    double samples_per_s = 0;
    int64_t min_step = std::numeric_limits<int64_t>::max(), max_step = -1;
    int slowest = -1;
    for (const v1::MetricRecord& m : job.latest()) {
      const std::map<std::string, std::string> labels{{"job_id", id},
                                                      {"rank", std::to_string(m.rank())}};
      if (m.has_step()) {
        Set(&series, rank_step_, labels, static_cast<double>(m.step()));
        if (m.step() < min_step) {
          min_step = m.step();
          slowest = m.rank();
        }
        max_step = std::max(max_step, m.step());
      }
      Set(&series, rank_epoch_, labels, m.epoch());
      if (m.has_loss()) Set(&series, rank_loss_, labels, m.loss());
      if (auto v = m.values().find("samples_per_s"); v != m.values().end()) {
        Set(&series, rank_samples_per_s_, labels, v->second);
        samples_per_s += v->second;
      }
      if (auto v = m.values().find("test_accuracy"); v != m.values().end()) {
        Set(&series, rank_accuracy_, labels, v->second);
      }
      if (m.time_unix_ms() > 0) {
        Set(&series, rank_age_, labels,
            static_cast<double>(std::max<int64_t>(0, now - m.time_unix_ms())) / 1000.0);
      }
    }
    Set(&series, job_samples_per_s_, {{"job_id", id}}, samples_per_s);
    if (slowest >= 0) {
      Set(&series, job_step_skew_, {{"job_id", id}}, static_cast<double>(max_step - min_step));
      Set(&series, job_slowest_rank_, {{"job_id", id}, {"rank", std::to_string(slowest)}}, 1);
    }
    RemoveStale(js.series, series);
    js.series = std::move(series);
  }
}

}  // namespace convoy
