#include "coordinator/control/node_health.h"

#include <spdlog/spdlog.h>

namespace convoy {

void NodeHealth::OnRegistered(const std::string& worker) {
  const v1::WorkerInfo* w = workers_.Find(worker);
  if (w == nullptr || HealthAllowsRanks(w->health())) return;
  spdlog::warn("worker {} takes no new ranks: {}", worker, WhyNoNewRanks(*w));
}

void NodeHealth::OnHealth(const std::string& worker, const v1::WorkerHealth& health) {
  if (!workers_.SetHealth(worker, health)) return;
  if (HealthAllowsRanks(health)) {
    spdlog::info("worker {} passed its health check: it takes new ranks again", worker);
    on_capacity_();
  } else {
    spdlog::warn("worker {} failed its health check, and takes no new ranks: {}", worker,
                 health.reason());
  }
}

void NodeHealth::OnFailure(JobRecord& r, const v1::RankFailure& cause) {
  if (cause.origin() != v1::FAILURE_ORIGIN_NODE || cause.worker().empty()) return;
  stats_.NodeFault();
  v1::NodeFault fault;
  fault.set_job_id(r.job.id());
  fault.set_attempt(r.job.attempt());
  fault.set_rank(cause.rank());
  fault.set_reason(cause.origin_reason());
  std::optional<std::string> cordon = faults_.Record(cause.worker(), std::move(fault));
  const v1::WorkerInfo* w = workers_.Find(cause.worker());
  if (!cordon || w == nullptr || w->cordoned()) return;
  StatusOr<v1::WorkerInfo> done = SetCordoned(cause.worker(), true, *cordon, "coordinator");
  if (!done.ok()) return;
  stats_.AutoCordoned();
  (void)writer_.Note(r, "worker " + cause.worker() + " cordoned: " + *cordon +
                            " (an admin uncordons it: convoy uncordon " + cause.worker() + ")");
}

StatusOr<v1::WorkerInfo> NodeHealth::SetCordoned(const std::string& worker, bool cordoned,
                                                 const std::string& reason, const std::string& by) {
  const v1::WorkerInfo* before = workers_.Find(worker);
  if (before == nullptr) return Status::NotFound("no worker named '" + worker + "'");
  const bool changed = before->cordoned() != cordoned;
  const std::string who = by.empty() ? "local" : by;
  const std::string why = !reason.empty() ? reason : "cordoned by " + who;
  if (changed || (cordoned && before->cordon_reason() != why)) {
    const v1::WorkerInfo* info = workers_.SetCordoned(worker, cordoned, why, who);
    CONVOY_RETURN_IF_ERROR(store_.SaveWorker(*info));
  }
  if (changed) {
    if (cordoned) {
      spdlog::warn("worker {} cordoned by {}: {}", worker, who, why);
    } else {
      spdlog::info("worker {} uncordoned by {}", worker, who);
      faults_.Clear(worker);
      on_capacity_();
    }
  }
  v1::WorkerInfo out = *workers_.Find(worker);
  Describe(out);
  return out;
}

void NodeHealth::Describe(v1::WorkerInfo& w) const {
  w.clear_node_faults();
  for (v1::NodeFault& f : faults_.Faults(w.name())) *w.add_node_faults() = std::move(f);
}

}  // namespace convoy
