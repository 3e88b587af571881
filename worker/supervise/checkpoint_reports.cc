#include "worker/supervise/checkpoint_reports.h"

#include <spdlog/spdlog.h>

#include "common/rank_contract.h"

namespace convoy {

CheckpointReports::CheckpointReports(const WorkerConfig& config, AttemptTable& table,
                                     Reporter& reporter, OffLoop& files_thread, ToLoop to_loop)
    : table_(table),
      reporter_(reporter),
      files_thread_(files_thread),
      to_loop_(std::move(to_loop)),
      keeper_(std::make_shared<CheckpointKeeper>(config.work_dir + "/jobs", config.name)) {}

void CheckpointReports::Start() { Resync(); }

void CheckpointReports::Resync() {
  files_thread_.Run([this, keeper = keeper_] {
    std::vector<v1::CheckpointsKept> all = keeper->RecoverAll();
    if (all.empty()) return;
    to_loop_([this, all = std::move(all)] { Send(all); });
  });
}

void CheckpointReports::OnRecord(const AttemptKey& key, const v1::MetricRecord& rec) {
  if (rec.kind() != rank_contract::metric::kKindCheckpoint || rec.checkpoint_path().empty()) {
    return;
  }
  const Attempt* a = table_.Find(key);
  if (a == nullptr || !a->checkpoint_policy) return;
  CheckpointKeeper::Job job;
  job.job_id = key.job_id;
  job.job_uid = key.job_uid;
  job.checkpoint_dir = a->checkpoint_dir;
  job.policy = *a->checkpoint_policy;
  const int attempt = key.attempt;
  const int64_t now = rec.time_unix_ms();
  files_thread_.Run([this, keeper = keeper_, job, attempt, rec, now] {
    auto kept = keeper->Record(job, attempt, rec, now);
    if (!kept.ok()) {
      spdlog::warn("job {}: checkpoint record ignored: {}", job.job_id, kept.status().message());
      return;
    }
    to_loop_([this, kept = *kept] { Send({kept}); });
  });
}

void CheckpointReports::Send(const std::vector<v1::CheckpointsKept>& kept) {
  // While the link is down nothing is queued: the Resync after the next registration sends
  // every job's list.
  if (!reporter_.LinkUp()) return;
  for (const v1::CheckpointsKept& k : kept) {
    v1::WorkerMessage out;
    *out.mutable_checkpoints_kept() = k;
    reporter_.Send(out);
  }
}

}  // namespace convoy
