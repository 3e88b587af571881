#include "coordinator/control/checkpoint_book.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <vector>

#include "spec/checkpoint_spec.h"

namespace convoy {

bool MergeCheckpointsKept(v1::Job* job, const std::string& worker,
                          const v1::CheckpointsKept& kept) {
  std::vector<v1::CheckpointInfo> merged;
  for (const v1::CheckpointInfo& c : job->checkpoints()) {
    if (c.worker() != worker) merged.push_back(c);
  }
  for (const v1::CheckpointInfo& c : kept.checkpoints()) {
    merged.push_back(c);
    merged.back().set_worker(worker);
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const v1::CheckpointInfo& a, const v1::CheckpointInfo& b) {
                     if (a.step() != b.step()) return a.step() > b.step();
                     return a.saved_unix_ms() > b.saved_unix_ms();
                   });
  bool changed = static_cast<int>(merged.size()) != job->checkpoints_size();
  for (size_t i = 0; !changed && i < merged.size(); ++i) {
    changed = !google::protobuf::util::MessageDifferencer::Equals(
        merged[i], job->checkpoints(static_cast<int>(i)));
  }
  if (!changed) return false;
  job->clear_checkpoints();
  for (v1::CheckpointInfo& c : merged) *job->add_checkpoints() = std::move(c);
  return true;
}

Status ResolveResumeCheckpoint(const v1::JobSpec& spec, const v1::Job& from,
                               v1::ResumeSource* resume) {
  if (!ResumesBest(spec)) return Status::Ok();
  const v1::KeepBest& best = from.spec().checkpoint().keep_best();
  if (best.metric().empty() || best.count() == 0) {
    return Status::FailedPrecondition(
        "resume_checkpoint: best: job " + from.id() +
        " has no checkpoint.keep_best policy, so none of its checkpoints is known as the best; "
        "use resume_checkpoint: latest");
  }
  const auto i = BestCheckpoint(best, from.checkpoints());
  if (!i) {
    return Status::FailedPrecondition("resume_checkpoint: best: job " + from.id() +
                                      " keeps no checkpoint marked with " + best.metric() +
                                      " (convoy checkpoints " + from.id() + ")");
  }
  resume->set_checkpoint_file(from.checkpoints(static_cast<int>(*i)).path());
  return Status::Ok();
}

}  // namespace convoy
