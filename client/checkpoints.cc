#include "client/checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <vector>

#include "client/command_support.h"
#include "client/format.h"

namespace convoy {

v1::CheckpointsKept CheckpointsOf(const v1::Job& job) {
  v1::CheckpointsKept out;
  out.set_job_id(job.id());
  out.set_job_uid(job.uid());
  *out.mutable_checkpoints() = job.checkpoints();
  return out;
}

std::string FormatCheckpoints(const v1::Job& job) {
  if (job.checkpoints_size() == 0) {
    if (!job.spec().has_checkpoint()) {
      return "job " + job.id() +
             " has no checkpoint policy (spec `checkpoint:`): its checkpoints are not listed\n";
    }
    return "job " + job.id() + " keeps no checkpoint yet\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::CheckpointInfo& c : job.checkpoints()) {
    // Metrics in name order (a proto map has none), values as %g.
    std::vector<std::pair<std::string, double>> metrics(c.metrics().begin(), c.metrics().end());
    std::sort(metrics.begin(), metrics.end());
    std::string shown;
    for (const auto& [k, v] : metrics) {
      char value[32];
      std::snprintf(value, sizeof(value), "%.6g", v);
      shown += (shown.empty() ? "" : " ") + k + "=" + value;
    }
    std::string why;
    for (const std::string& w : c.kept_as()) why += (why.empty() ? "" : ",") + w;
    rows.push_back({c.path(), c.worker().empty() ? "(shared)" : c.worker(),
                    std::to_string(c.step()), shown.empty() ? "-" : shown,
                    why.empty() ? "-" : why});
  }
  return FormatTable({"PATH", "WORKER", "STEP", "METRICS", "KEPT_AS"}, rows);
}

int CheckpointsCommand(CoordinatorClient& c, const std::string& job,
                       const CommandOptions& options) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::GetJobRequest req;
  req.set_job_id(job);
  v1::Job resp;
  grpc::Status st = c.stub->GetJob(&ctx, req, &resp);
  if (!st.ok()) return RpcFailed(c, st, "checkpoints " + job);
  if (options.structured()) {
    std::cout << Render(CheckpointsOf(resp), options) << "\n";
    return kExitOk;
  }
  std::cout << FormatCheckpoints(resp);
  return kExitOk;
}

}  // namespace convoy
