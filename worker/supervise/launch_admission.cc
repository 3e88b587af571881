#include "worker/supervise/launch_admission.h"

#include <errno.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/job_paths.h"
#include "common/util.h"
#include "spec/trainer_argv.h"
#include "worker/files/checkpoint_copy.h"
#include "worker/files/checkpoint_keeper.h"
#include "worker/files/file_removal.h"

namespace convoy {

LaunchAdmission::LaunchAdmission(const WorkerConfig& config, AttemptTable& table,
                                 Reporter& reporter, RankRunner& runner, MetricsRelay& metrics,
                                 OffLoop& files_thread, CodeUnpacker& unpacker, ToLoop to_loop,
                                 const std::atomic<bool>& stopping)
    : config_(config),
      table_(table),
      reporter_(reporter),
      runner_(runner),
      metrics_(metrics),
      files_thread_(files_thread),
      unpacker_(unpacker),
      to_loop_(std::move(to_loop)),
      stopping_(stopping) {}

std::string LaunchAdmission::Check(const v1::Launch& launch) const {
  const int64_t lws = launch.local_world_size();
  const int64_t first_rank_wide = int64_t{launch.group_rank()} * std::max<int64_t>(lws, 1);
  if (!IsValidName(launch.job_id()) || launch.attempt() < 0) {
    return "invalid job id '" + launch.job_id() + "' or attempt " +
           std::to_string(launch.attempt());
  }
  const int64_t max_lws =
      std::min<int64_t>(kMaxLocalWorldSize, int64_t{std::max(1, config_.slots)} * 4);
  if (lws < 1 || lws > max_lws) {
    return "local_world_size " + std::to_string(lws) + " is impossible on worker " + config_.name +
           " (" + std::to_string(config_.slots) + " slots)";
  }
  if (launch.group_rank() < 0 || launch.num_nodes() < 1 ||
      launch.group_rank() >= launch.num_nodes() || first_rank_wide + lws > launch.world_size()) {
    return "inconsistent rank plan: group_rank " + std::to_string(launch.group_rank()) + " of " +
           std::to_string(launch.num_nodes()) + " nodes, local_world_size " + std::to_string(lws) +
           ", world_size " + std::to_string(launch.world_size());
  }
  // RANK comes from the coordinator's plan (Launch.ranks), never computed here.
  if (launch.ranks_size() != lws) {
    return "launch.ranks: " + std::to_string(launch.ranks_size()) + " ranks for local_world_size " +
           std::to_string(lws);
  }
  for (int l = 0; l < lws; ++l) {
    const int rank = launch.ranks(l);
    bool repeated = false;
    for (int k = 0; k < l; ++k) repeated = repeated || launch.ranks(k) == rank;
    if (rank < 0 || rank >= launch.world_size() || repeated) {
      return "launch.ranks[" + std::to_string(l) + "]: rank " + std::to_string(rank) +
             " is out of the world of " + std::to_string(launch.world_size()) + " or repeated";
    }
  }
  // Limits are enforced or the job does not run: never accounted and silently exceeded.
  if (config_.cgroups == nullptr) {
    for (const v1::RankResources& res : launch.resources()) {
      if (res.memory_bytes() > 0 || res.cpus() > 0) {
        return std::string(res.memory_bytes() > 0 ? "memory_per_proc" : "cpus_per_proc") +
               ": worker " + config_.name + " cannot enforce limits (" + config_.cgroups_missing +
               "); run the job where workers have cgroups, or drop the limit";
      }
    }
  }
  return "";
}

void LaunchAdmission::Admit(const v1::Launch& launch, bool again) {
  const int64_t lws = launch.local_world_size();
  const int first_rank = static_cast<int>(std::clamp<int64_t>(
      int64_t{launch.group_rank()} * std::max<int64_t>(lws, 1), 0, int64_t{1} << 30));
  if (const std::string why = Check(launch); !why.empty()) {
    reporter_.RefuseLaunch(launch, first_rank, why);
    return;
  }
  const AttemptKey key{launch.job_id(), launch.attempt(), launch.job_uid()};
  if (table_.Find(key) != nullptr || preparing_.count(key) > 0) {
    spdlog::warn("job {} attempt {}: launched already; the repeated Launch is ignored",
                 launch.job_id(), launch.attempt());
    return;
  }
  if (!ClearSameNumber(launch, first_rank)) return;
  // A later attempt of a job is a restart (attempt 0 is the first).
  if (launch.attempt() > 0 && !again) restarts_seen_.fetch_add(1, std::memory_order_relaxed);
  LaunchPlan plan;
  plan.launch = launch;
  plan.first_rank = first_rank;
  plan.argv = BuildArgv(launch.spec(), config_.trainer_path);
  if (plan.argv.empty() || plan.argv[0].empty()) {
    reporter_.RefuseLaunch(launch, first_rank, "the job has an empty command");
    return;
  }
  if (launch.spec().has_trainer() && access(config_.trainer_path.c_str(), X_OK) != 0) {
    reporter_.RefuseLaunch(launch, first_rank,
                           "convoy-trainer not found at " + config_.trainer_path + " (" +
                               strerror(errno) + "; see --trainer)");
    return;
  }
  // Its directories are named by its identity, never by the job id alone (JobDirName).
  plan.dir_name = JobDirName(launch.job_id(), launch.job_uid());
  bool evicting = false;
  auto user = UserOf(launch, plan.dir_name, first_rank, &evicting);
  if (evicting) return;
  if (!user.ok()) {
    reporter_.RefuseLaunch(launch, first_rank, user.status().message());
    return;
  }
  plan.user = *user;
  // The spec's paths must resolve under the job root: else no rank starts and the job
  // fails with the field named. The worker's own files (logs) stay under --work-dir.
  const v1::JobSpec& given = launch.spec();
  auto dirs =
      PrepareJobDirs(config_.job_root, config_.data_paths, plan.dir_name, given.checkpoint_dir(),
                     given.working_dir(), given.has_trainer() ? given.trainer().data_dir() : "",
                     plan.user ? int64_t{plan.user->uid} : -1,
                     plan.user ? int64_t{plan.user->gid} : -1, config_.shared_paths);
  if (!dirs.ok()) {
    reporter_.RefuseLaunch(launch, first_rank, dirs.status().message());
    return;
  }
  plan.dirs = std::move(*dirs);
  if (!ResolveResumeFrom(&plan)) return;
  Continue(std::move(plan));
}

bool LaunchAdmission::ClearSameNumber(const v1::Launch& launch, int first_rank) {
  auto held = table_.FindByNumber(launch.job_id(), launch.attempt());
  if (held == table_.attempts().end()) return true;
  Attempt& other = held->second;
  // Another job with the same id (another cluster's, or this one's after a fresh state
  // directory: ids restart at j-000001): it is never taken for this one.
  if (other.AnyRunning()) {
    runner_.Kill(other, config_.kill_grace_ms);
    reporter_.RefuseLaunch(launch, first_rank,
                           "attempt " + std::to_string(launch.attempt()) +
                               " of another job with the same id (uid " + other.job_uid +
                               ") is still being stopped on worker " + config_.name);
    return false;
  }
  spdlog::warn(
      "job {} attempt {}: forgetting the ended attempt of another job with that id "
      "(uid {}) for job uid {}",
      launch.job_id(), launch.attempt(), other.job_uid, launch.job_uid());
  metrics_.Close(other);
  table_.Erase(held);
  return true;
}

StatusOr<std::optional<RunAsUser>> LaunchAdmission::UserOf(const v1::Launch& launch,
                                                           const std::string& dir_name,
                                                           int first_rank, bool* evicting) {
  // The job's own identity (the same for each of its attempts here), its owner's account,
  // or the one --run-as user.
  if (config_.identities != nullptr) {
    auto id = config_.identities->For(dir_name, config_.job_root + "/" + dir_name,
                                      launch.identity(), launch.cluster_id());
    if (id.status().code() == StatusCode::kAlreadyExists) {
      *evicting = true;
      EvictHolder(launch, first_rank, id.status().message());
      return std::optional<RunAsUser>();
    }
    if (!id.ok()) {
      return Status::FailedPrecondition("no identity for the job on this worker: " +
                                        id.status().message());
    }
    return std::optional<RunAsUser>(*id);
  }
  if (config_.run_as_owner) {
    auto account = OwnerAccount(launch.owner(), config_.name);
    if (!account.ok()) return account.status();
    return std::optional<RunAsUser>(*account);
  }
  return config_.run_as;
}

void LaunchAdmission::EvictHolder(const v1::Launch& launch, int first_rank,
                                  const std::string& holder) {
  // Held for a job of another cluster this worker served before: that cluster will never
  // delete its files here, and they must not go to this job with the uid. Its files go on
  // the files thread; the launch waits (holding its port) and is admitted again after.
  const AttemptKey key{launch.job_id(), launch.attempt(), launch.job_uid()};
  LaunchPlan& waiting = preparing_[key];
  waiting.launch = launch;
  waiting.first_rank = first_rank;
  const std::optional<uid_t> uid = config_.identities->Find(holder);
  files_thread_.Run(
      [this, key, holder, uid, work_dir = config_.work_dir, job_root = config_.job_root] {
        int64_t n = 0;
        Status gone = RemoveUnder(work_dir + "/jobs", holder, &n);
        if (gone.ok()) gone = RemoveUnder(job_root, holder, &n);
        if (gone.ok() && uid) RemoveFilesOfUid(holder, *uid);
        to_loop_([this, key, holder, gone, n] {
          auto it = preparing_.find(key);
          if (gone.ok()) {
            auto released = config_.identities->Release(holder, {});
            spdlog::warn(
                "job {}: removed job {} of another cluster ({} entries) and released its uid {}, "
                "the identity the coordinator gave this job",
                key.job_id, holder, n, released ? *released : 0);
          }
          if (it == preparing_.end()) return;  // killed meanwhile
          const LaunchPlan waiting = std::move(it->second);
          preparing_.erase(it);
          if (!gone.ok()) {
            reporter_.RefuseLaunch(
                waiting.launch, waiting.first_rank,
                "its identity is held by job " + holder +
                    " of another cluster, whose files cannot be removed: " + gone.message());
            return;
          }
          if (!stopping_) Admit(waiting.launch, /*again=*/true);
        });
      });
}

bool LaunchAdmission::ResolveResumeFrom(LaunchPlan* plan) {
  const v1::Launch& launch = plan->launch;
  // resume_from: the named job's checkpoints (its directory under this job root, where its
  // checkpoint_dir resolved), or a path under this job's directory.
  if (launch.has_resume_source() && !launch.resume_source().job_id().empty()) {
    const v1::ResumeSource& from = launch.resume_source();
    if (!IsValidName(from.job_id()) || from.job_id() == "." || from.job_id() == "..") {
      reporter_.RefuseLaunch(launch, plan->first_rank,
                             "resume_from: invalid job id '" + from.job_id() + "'");
      return false;
    }
    const std::string from_dir = config_.job_root + "/" + JobDirName(from.job_id(), from.uid());
    if (from.checkpoint_dir().empty()) {
      plan->resume_from = from_dir + "/checkpoints";
    } else {
      auto p = ResolveJobPath("resume_from (job " + from.job_id() + "'s checkpoint_dir)",
                              from.checkpoint_dir(), from_dir, config_.job_root);
      if (!p.ok()) {
        reporter_.RefuseLaunch(launch, plan->first_rank, p.status().message());
        return false;
      }
      plan->resume_from = *p;
    }
    // resume_checkpoint: best: the coordinator chose the file (a name in that directory).
    if (!from.checkpoint_file().empty()) {
      if (!IsKeepableCheckpointPath(from.checkpoint_file())) {
        reporter_.RefuseLaunch(launch, plan->first_rank,
                               "resume_checkpoint: invalid checkpoint file '" +
                                   from.checkpoint_file().substr(0, 80) + "'");
        return false;
      }
      plan->resume_file = from.checkpoint_file();
    }
    // Another job's directory is its identity's alone: this job (another identity) gets a
    // copy of its checkpoints in its own directory (Continue makes it).
    if (config_.identities != nullptr) {
      plan->copy_to = plan->dirs.job_dir + "/resume-from-" + JobDirName(from.job_id(), from.uid());
    }
    return true;
  }
  const std::string& given = launch.spec().resume_from();
  if (given.empty()) return true;
  auto p = ResolveJobPath("resume_from", given, plan->dirs.job_dir, config_.job_root);
  if (!p.ok()) {
    reporter_.RefuseLaunch(launch, plan->first_rank, p.status().message());
    return false;
  }
  plan->resume_from = *p;
  return true;
}

void LaunchAdmission::Continue(LaunchPlan plan) {
  const AttemptKey key{plan.launch.job_id(), plan.launch.attempt(), plan.launch.job_uid()};
  const int64_t uid = plan.user ? int64_t{plan.user->uid} : -1;
  const int64_t gid = plan.user ? int64_t{plan.user->gid} : -1;
  if (!plan.copy_to.empty()) {
    // A copy of a large checkpoint takes seconds: never on the loop that sends heartbeats.
    const std::string from = plan.resume_from, to = plan.copy_to;
    preparing_[key] = std::move(plan);
    files_thread_.Run([this, key, from, to, uid, gid] {
      if (config_.before_copy) config_.before_copy(to);
      StatusOr<std::string> copied = CopyCheckpoints(from, to, uid, gid);
      to_loop_([this, key, copied] { Copied(key, copied); });
    });
    return;
  }
  const std::string& sha = plan.launch.spec().code_sha256();
  if (!sha.empty()) {
    // The connection fetched the archive before posting this Launch (worker/link/code_fetch.h);
    // an archive of up to 100 MiB is unpacked off the loop too.
    const std::string dest = plan.dirs.job_dir;
    preparing_[key] = std::move(plan);
    unpacker_.Unpack(sha, dest, uid, gid, [this, key](StatusOr<int64_t> unpacked) {
      to_loop_([this, key, unpacked] { Unpacked(key, unpacked); });
    });
    return;
  }
  runner_.Start(plan);
}

void LaunchAdmission::Copied(const AttemptKey& key, const StatusOr<std::string>& copied) {
  auto it = preparing_.find(key);
  if (it == preparing_.end()) return;  // killed meanwhile
  LaunchPlan plan = std::move(it->second);
  preparing_.erase(it);
  if (!copied.ok()) {
    reporter_.RefuseLaunch(
        plan.launch, plan.first_rank,
        "resume_from " + plan.launch.resume_source().job_id() + ": " + copied.status().message());
    return;
  }
  plan.resume_from = *copied;
  plan.copy_to.clear();
  if (stopping_) return;
  Continue(std::move(plan));
}

void LaunchAdmission::Unpacked(const AttemptKey& key, const StatusOr<int64_t>& unpacked) {
  auto it = preparing_.find(key);
  if (it == preparing_.end()) return;  // killed meanwhile, or the worker is stopping
  LaunchPlan plan = std::move(it->second);
  preparing_.erase(it);
  const std::string& sha = plan.launch.spec().code_sha256();
  if (unpacked.status().code() == StatusCode::kNotFound) {
    reporter_.RefuseLaunch(
        plan.launch, plan.first_rank,
        "the job's code archive " + sha + " could not be fetched from the coordinator");
    return;
  }
  if (!unpacked.ok()) {
    reporter_.RefuseLaunch(plan.launch, plan.first_rank,
                           "unpacking the job's code: " + unpacked.status().message());
    return;
  }
  spdlog::info("job {}: unpacked {} file(s) of code {} into {}", plan.launch.job_id(), *unpacked,
               sha.substr(0, 12), plan.dirs.job_dir);
  if (stopping_) return;
  runner_.Start(plan);
}

}  // namespace convoy
