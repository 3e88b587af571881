#include "coordinator/metrics_exporter.h"

#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

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

void MetricsExporter::Update(const std::vector<v1::Job>& jobs,
                             const std::vector<v1::WorkerInfo>& workers) {
  std::map<std::string, int> by_state;
  for (int s = v1::PENDING; s <= v1::CANCELLED; ++s) {
    by_state[StateName(static_cast<v1::JobState>(s))] = 0;
  }
  for (const v1::Job& job : jobs) ++by_state[StateName(job.state())];
  for (const auto& [state, n] : by_state) jobs_->Add({{"state", state}}).Set(n);

  std::map<std::string, int> worker_states{{"READY", 0}, {"UNREACHABLE", 0}, {"LOST", 0}};
  for (const v1::WorkerInfo& w : workers) {
    std::string s = v1::WorkerState_Name(w.state());
    if (s.rfind("WORKER_", 0) == 0) s = s.substr(7);
    ++worker_states[s];
  }
  for (const auto& [state, n] : worker_states) workers_->Add({{"state", state}}).Set(n);

  std::map<std::string, bool> live;
  for (const v1::Job& job : jobs) live[job.id()] = !IsTerminal(job.state());
  for (auto it = job_series_.begin(); it != job_series_.end();) {
    if (live[it->first]) {
      ++it;
      continue;
    }
    for (auto& [family, gauge] : it->second) family->Remove(gauge);
    it = job_series_.erase(it);
  }
  for (const v1::Job& job : jobs) {
    if (IsTerminal(job.state())) continue;
    auto& series = job_series_[job.id()];
    auto set = [&series](prometheus::Family<prometheus::Gauge>* family,
                         const std::map<std::string, std::string>& labels, double value) {
      prometheus::Gauge& g = family->Add(labels);
      g.Set(value);
      for (const auto& [f, existing] : series) {
        if (existing == &g) return;
      }
      series.emplace_back(family, &g);
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
