#include "client/sick_nodes.h"

#include <algorithm>
#include <iostream>

#include "client/command_support.h"
#include "client/format.h"
#include "common/rank_contract.h"

namespace convoy {

int CordonCommand(CoordinatorClient& c, const std::string& worker, bool cordon,
                  const std::string& reason, const CommandOptions& options) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::CordonWorkerRequest req;
  req.set_name(worker);
  req.set_cordon(cordon);
  req.set_reason(reason);
  v1::WorkerInfo resp;
  grpc::Status st = c.stub->CordonWorker(&ctx, req, &resp);
  if (!st.ok()) return RpcFailed(c, st, (cordon ? "cordon " : "uncordon ") + worker);
  return PrintChangedWorker(resp, options);
}

std::string SickStateSuffix(const v1::WorkerInfo& w) {
  std::string out;
  if (w.health().state() == v1::HEALTH_FAILING) out += ",UNHEALTHY";
  if (w.health().state() == v1::HEALTH_CHECKING) out += ",CHECKING";
  if (w.cordoned()) out += ",CORDONED";
  return out;
}

std::string SickReason(const v1::WorkerInfo& w) {
  std::string out;
  if (w.health().state() == v1::HEALTH_FAILING) out = "health check: " + w.health().reason();
  if (w.health().state() == v1::HEALTH_CHECKING) out = "first health check running";
  if (w.cordoned()) {
    out += (out.empty() ? "" : "; ") + std::string("cordoned by ") + w.cordoned_by() + ": " +
           w.cordon_reason();
  }
  return out;
}

std::string FormatSickRanks(const v1::Job& job) {
  std::string out;
  for (const v1::Straggler& s : job.stragglers()) {
    out += "  straggler: rank " + std::to_string(s.rank()) + " on " + s.worker() + ": " +
           Printf("%.3f", s.step_s()) + " s a step, " +
           Printf("%.1f", s.peers_s() > 0 ? s.step_s() / s.peers_s() : 0) +
           "x its peers' median (" + Printf("%.3f", s.peers_s()) + " s) over the last " +
           std::to_string(s.window_steps()) + " steps; named at step " +
           std::to_string(s.at_step()) + "\n";
  }
  const BadSteps bad = JobBadSteps(job);
  if (bad.skipped > 0 || bad.rewinds > 0) {
    out += "  bad steps: " + std::to_string(bad.skipped) + " skipped by every rank, " +
           std::to_string(bad.rewinds) + " rewind" + (bad.rewinds == 1 ? "" : "s") +
           " in this attempt (a loss or gradient norm not finite)\n";
  }
  if (job.node_moves() > 0) {
    out += "  moved off a sick node " + std::to_string(job.node_moves()) + " time" +
           (job.node_moves() == 1 ? "" : "s") + ", no restart used\n";
  }
  return out;
}

BadSteps JobBadSteps(const v1::Job& job) {
  BadSteps out;
  for (const v1::MetricRecord& m : job.latest()) {
    if (auto v = m.values().find(rank_contract::kMetricBadSteps); v != m.values().end()) {
      out.skipped = std::max(out.skipped, static_cast<int64_t>(v->second));
    }
    if (auto v = m.values().find(rank_contract::kMetricRewinds); v != m.values().end()) {
      out.rewinds = std::max(out.rewinds, static_cast<int64_t>(v->second));
    }
  }
  return out;
}

std::string TopStragglerCell(const v1::Job& job) {
  if (job.stragglers_size() == 0) return "";
  const v1::Straggler& s = job.stragglers(0);
  return "rank " + std::to_string(s.rank()) + " " +
         Printf("%.1f", s.peers_s() > 0 ? s.step_s() / s.peers_s() : 0) + "x (straggler)";
}

}  // namespace convoy
