// Launch admission and preparation: checks a Launch (names, the rank plan, limits this worker
// can enforce, a repeated or clashing launch), resolves the user its ranks run as and its
// directories under the job root, and what it resumes from; then prepares what takes time off
// the loop (worker/supervise/off_loop.h): a copy of another identity's checkpoints
// (worker/files/checkpoint_copy.h) on the files thread, the job's code on the unpacker's
// (worker/files/code_unpacker.h), each reporting back as a command to the loop; then hands
// the plan to RankRunner::Start. A Kill meanwhile drops the launch: it never starts.
//
// When the job's identity is still held by a job of another cluster this worker served
// before (that cluster will never delete its files here), that job's files are removed on the
// files thread too, its identity released, and the launch admitted again.
//
// Threading: the supervisor thread, except restarts_seen_total (any thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"
#include "convoy/v1/worker.pb.h"
#include "worker/files/code_unpacker.h"
#include "worker/host/attempt_key.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/launch_plan.h"
#include "worker/supervise/metrics_relay.h"
#include "worker/supervise/off_loop.h"
#include "worker/supervise/rank_runner.h"
#include "worker/supervise/reporter.h"
#include "worker/supervise/worker_config.h"

namespace convoy {

class LaunchAdmission {
 public:
  // Runs `then` on the supervisor thread, as a command (Supervisor::ToLoop).
  using ToLoop = std::function<void(std::function<void()> then)>;
  // The most ranks one Launch may start here, whatever the slots.
  static constexpr int64_t kMaxLocalWorldSize = 1024;

  // `files_thread` makes checkpoint copies and removes an identity holder's files;
  // `unpacker` unpacks code (started and stopped by the caller); `stopping` is the
  // supervisor's: once set, nothing more starts.
  LaunchAdmission(const WorkerConfig& config, AttemptTable& table, Reporter& reporter,
                  RankRunner& runner, MetricsRelay& metrics, OffLoop& files_thread,
                  CodeUnpacker& unpacker, ToLoop to_loop, const std::atomic<bool>& stopping);

  // Checks `launch` and starts it, or prepares it first, or refuses it (LaunchFailed naming
  // the field or the reason); a repeated Launch is ignored.
  void Admit(const v1::Launch& launch) { Admit(launch, /*again=*/false); }
  // A Kill of a launch still being prepared: it never starts. True when there was one.
  bool Drop(const AttemptKey& key) { return preparing_.erase(key) > 0; }
  // Whether a launch of `key` is being prepared (it holds its port meanwhile).
  bool Preparing(const AttemptKey& key) const { return preparing_.count(key) > 0; }

  // Launches of a later attempt than a job's first. Any thread.
  int64_t restarts_seen_total() const { return restarts_seen_.load(std::memory_order_relaxed); }

 private:
  // `again`: admitted a second time, after an identity holder's files were removed.
  void Admit(const v1::Launch& launch, bool again);
  // What is wrong with the message itself or this worker's means (empty: nothing).
  std::string Check(const v1::Launch& launch) const;
  // An attempt of another job with the same id and number (another cluster's, or this one's
  // after a fresh state directory): forgotten when it ended; false, refused, while it is
  // still being stopped.
  bool ClearSameNumber(const v1::Launch& launch, int first_rank);
  // The user its ranks run as. Unset with `*evicting` when the job's identity must first be
  // taken back from another cluster's job (EvictHolder runs); an error when refused.
  StatusOr<std::optional<RunAsUser>> UserOf(const v1::Launch& launch, const std::string& dir_name,
                                            int first_rank, bool* evicting);
  void EvictHolder(const v1::Launch& launch, int first_rank, const std::string& holder);
  // Sets `plan`'s resume_from (and copy_to when a copy must be made); false when refused.
  bool ResolveResumeFrom(LaunchPlan* plan);
  // The next step of a plan: a copy, an unpack, or the start.
  void Continue(LaunchPlan plan);
  void Copied(const AttemptKey& key, const StatusOr<std::string>& copied);
  void Unpacked(const AttemptKey& key, const StatusOr<int64_t>& unpacked);

  const WorkerConfig& config_;
  AttemptTable& table_;
  Reporter& reporter_;
  RankRunner& runner_;
  MetricsRelay& metrics_;
  OffLoop& files_thread_;
  CodeUnpacker& unpacker_;
  const ToLoop to_loop_;
  const std::atomic<bool>& stopping_;
  // Launches being prepared (a copy, an unpack, an identity taken back), by key.
  std::map<AttemptKey, LaunchPlan> preparing_;
  std::atomic<int64_t> restarts_seen_{0};
};

}  // namespace convoy
