#include "coordinator/metrics_exporter.h"

#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <set>

#include "coordinator/job_state_machine.h"

namespace convoy {

MetricsExporter::MetricsExporter(const std::string& listen)
    : exposer_(std::make_unique<prometheus::Exposer>(listen)),
      registry_(std::make_shared<prometheus::Registry>()) {
  jobs_ = &prometheus::BuildGauge().Name("convoy_jobs").Help("Jobs by state").Register(*registry_);
  workers_ = &prometheus::BuildGauge()
                  .Name("convoy_workers")
                  .Help("Workers by state")
                  .Register(*registry_);
  restarts_ = &prometheus::BuildGauge()
                   .Name("convoy_job_restarts")
                   .Help("Restarts used by each unfinished job")
                   .Register(*registry_);
  step_ = &prometheus::BuildGauge()
               .Name("convoy_rank_step")
               .Help("Latest training step reported by each rank of unfinished jobs")
               .Register(*registry_);
  loss_ = &prometheus::BuildGauge()
               .Name("convoy_rank_loss")
               .Help("Latest training loss reported by each rank of unfinished jobs")
               .Register(*registry_);
  samples_per_s_ = &prometheus::BuildGauge()
                        .Name("convoy_rank_samples_per_second")
                        .Help("Latest throughput reported by each rank of unfinished jobs")
                        .Register(*registry_);
  exposer_->RegisterCollectable(registry_);
}

MetricsExporter::~MetricsExporter() = default;

void MetricsExporter::Update(const JobManager::Stats& stats, const std::vector<v1::Job>& active) {
  for (int s = v1::PENDING; s <= v1::CANCELLED; ++s) {
    const auto state = static_cast<v1::JobState>(s);
    auto it = stats.jobs.find(state);
    jobs_->Add({{"state", StateName(state)}}).Set(it == stats.jobs.end() ? 0 : it->second);
  }
  for (v1::WorkerState state : {v1::WORKER_READY, v1::WORKER_UNREACHABLE, v1::WORKER_LOST}) {
    std::string name = v1::WorkerState_Name(state);
    if (name.rfind("WORKER_", 0) == 0) name = name.substr(7);
    auto it = stats.workers.find(state);
    workers_->Add({{"state", name}}).Set(it == stats.workers.end() ? 0 : it->second);
  }

  // Series of jobs that are no longer active go; the active ones are (re)set.
  std::set<std::string> live;
  for (const v1::Job& job : active) live.insert(job.id());
  for (auto it = job_series_.begin(); it != job_series_.end();) {
    if (live.count(it->first) > 0) {
      ++it;
      continue;
    }
    for (const auto& [family, gauge] : it->second) family->Remove(gauge);
    it = job_series_.erase(it);
  }
  for (const v1::Job& job : active) {
    auto& series = job_series_[job.id()];
    auto set = [&series](prometheus::Family<prometheus::Gauge>* family,
                         const std::map<std::string, std::string>& labels, double value) {
      prometheus::Gauge& g = family->Add(labels);
      g.Set(value);
      series.insert({family, &g});
    };
    set(restarts_, {{"job", job.id()}, {"name", job.spec().name()}}, job.restarts());
    for (const v1::MetricRecord& m : job.latest()) {
      const std::map<std::string, std::string> labels{{"job", job.id()},
                                                      {"rank", std::to_string(m.rank())}};
      set(step_, labels, static_cast<double>(m.step()));
      if (m.has_loss()) set(loss_, labels, m.loss());
      auto it = m.values().find("samples_per_s");
      if (it != m.values().end()) set(samples_per_s_, labels, it->second);
    }
  }
}

}  // namespace convoy
