// JobManager: what workers report, and what time does (lost workers, hangs, deadlines).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "common/process_exit.h"
#include "common/util.h"
#include "coordinator/control/checkpoint_book.h"
#include "coordinator/control/job_manager.h"
#include "coordinator/sched/rendezvous_planner.h"
#include "coordinator/state/failure_attribution.h"
#include "coordinator/state/job_state_machine.h"

namespace convoy {
v1::RegisterAck JobManager::OnRegister(const v1::Register& reg) {
  workers_.OnRegister(reg);
  const v1::WorkerInfo* info = workers_.Find(reg.name());
  if (info != nullptr) {
    Status st = store_.SaveWorker(*info);
    if (!st.ok()) spdlog::error("cannot persist worker {}: {}", reg.name(), st.message());
  }
  spdlog::info("worker {} registered: {} ({}), {} cores, {} GPUs, {} slots, {} attempt(s)",
               reg.name(), reg.address(), reg.hostname(), reg.cores(), reg.gpus_size(), reg.slots(),
               reg.attempts_size());
  health_.OnRegistered(reg.name());

  for (const v1::AttemptStatus& as : reg.attempts()) {
    JobRecord* r = table_.FindAttemptOf(as.job_id(), as.job_uid());
    const bool current = r != nullptr && r->rt.attempt == as.attempt() && !r->rt.released;
    bool any_running = false;
    for (const v1::RankStatus& rs : as.ranks()) any_running = any_running || rs.running();
    if (current) lifecycle_.Adopt(*r, reg.name(), as);
    const bool wanted = current && !r->rt.tearing_down && !IsTerminal(r->job.state());
    if (!wanted && any_running) {
      spdlog::info("worker {} still runs attempt {} of job {}, which is no longer wanted: killing",
                   reg.name(), as.attempt(), as.job_id());
      v1::CoordinatorMessage msg;
      v1::Kill* kill = msg.mutable_kill();
      kill->set_job_id(as.job_id());
      kill->set_job_uid(as.job_uid());
      kill->set_attempt(as.attempt());
      kill->set_grace_ms(static_cast<int32_t>(options_.lifecycle.kill_grace_ms));
      kill->set_reason("stale attempt");
      channel_.Send(reg.name(), msg);
    }
  }

  // Ranks this worker should run but no longer knows of: they died with a worker restart.
  // Only the jobs that hold this worker are looked at.
  const std::vector<std::string> held = table_.JobsOn(reg.name());
  for (const std::string& id : held) {
    JobRecord& r = table_.at(id);
    const v1::AttemptStatus* reported = nullptr;
    for (const v1::AttemptStatus& as : reg.attempts()) {
      if (as.job_id() == id && JobTable::SameUid(as.job_uid(), r.job.uid()) &&
          as.attempt() == r.rt.attempt) {
        reported = &as;
      }
    }
    lifecycle_.OnWorkerBack(r, reg.name(), reported);
  }
  // Files of jobs deleted while it was away (or not yet confirmed): asked again now, after
  // any Kill above (a worker keeps the files of an attempt that still runs).
  deletions_.SendTo(reg.name(), true);
  // A worker with free slots: jobs that wait are placed at the next tick (not here: 10,000
  // workers registering must not each run the scheduler).
  if (!table_.waiting().empty()) sched_.Needed();
  v1::RegisterAck ack;
  ack.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  // Snapshots in its host memory that no job of this cluster that may still run owns
  // (another cluster's, a finished job's, or one this coordinator never had): it removes them.
  if (reg.snapshot_keys_size() > 0) {
    std::set<std::string> live;
    for (const std::string& id : table_.active()) {
      live.insert(id);  // a key from before identities
      const std::string& uid = table_.at(id).job.uid();
      if (!uid.empty() && !options_.lifecycle.cluster_id.empty()) {
        live.insert(options_.lifecycle.cluster_id + "-" + uid);
      }
    }
    for (const std::string& key : reg.snapshot_keys()) {
      if (live.count(key) == 0) ack.add_stale_snapshot_keys(key);
    }
  }
  return ack;
}

void JobManager::OnWorkerMessage(const std::string& worker, const v1::WorkerMessage& msg) {
  workers_.OnHeard(worker);
  // What a worker says of an attempt names its job by id and uid: of another job with the
  // same id (one that ran there for another cluster, or for this one before a fresh state
  // directory) it is not this job's, and is dropped.
  const std::pair<const std::string*, const std::string*> about = [&]() {
    switch (msg.msg_case()) {
      case v1::WorkerMessage::kPortReserved:
        return std::make_pair(&msg.port_reserved().job_id(), &msg.port_reserved().job_uid());
      case v1::WorkerMessage::kProcessStarted:
        return std::make_pair(&msg.process_started().job_id(), &msg.process_started().job_uid());
      case v1::WorkerMessage::kLaunchFailed:
        return std::make_pair(&msg.launch_failed().job_id(), &msg.launch_failed().job_uid());
      case v1::WorkerMessage::kProcessExited:
        return std::make_pair(&msg.process_exited().job_id(), &msg.process_exited().job_uid());
      case v1::WorkerMessage::kMetrics:
        return std::make_pair(&msg.metrics().job_id(), &msg.metrics().job_uid());
      case v1::WorkerMessage::kCheckpointsKept:
        return std::make_pair(&msg.checkpoints_kept().job_id(), &msg.checkpoints_kept().job_uid());
      default:
        return std::make_pair<const std::string*, const std::string*>(nullptr, nullptr);
    }
  }();
  if (about.first != nullptr && table_.Find(*about.first) != nullptr &&
      table_.FindAttemptOf(*about.first, *about.second) == nullptr) {
    spdlog::warn(
        "worker {}: ignored a report of another job with the id {} (uid {}; this "
        "cluster's is {})",
        worker, *about.first, *about.second, table_.Find(*about.first)->job.uid());
    return;
  }
  switch (msg.msg_case()) {
    case v1::WorkerMessage::kHeartbeat:
      lifecycle_.OnHeartbeat(worker, msg.heartbeat());
      if (msg.heartbeat().has_health()) health_.OnHealth(worker, msg.heartbeat().health());
      break;
    case v1::WorkerMessage::kPortReserved:
      lifecycle_.OnPortReserved(worker, msg.port_reserved());
      break;
    case v1::WorkerMessage::kProcessStarted:
      lifecycle_.OnProcessStarted(worker, msg.process_started());
      break;
    case v1::WorkerMessage::kLaunchFailed:
      lifecycle_.OnLaunchFailed(worker, msg.launch_failed());
      break;
    case v1::WorkerMessage::kProcessExited:
      lifecycle_.OnProcessExited(worker, msg.process_exited());
      break;
    case v1::WorkerMessage::kMetrics:
      OnMetrics(worker, msg.metrics());
      break;
    case v1::WorkerMessage::kLogData:
      OnLogData(worker, msg.log_data());
      break;
    case v1::WorkerMessage::kJobFilesDeleted:
      OnJobFilesDeleted(worker, msg.job_files_deleted());
      break;
    case v1::WorkerMessage::kCheckpointsKept:  // coordinator/control/checkpoint_book.h
      if (JobRecord* r = table_.Find(msg.checkpoints_kept().job_id());
          r != nullptr && MergeCheckpointsKept(&r->job, worker, msg.checkpoints_kept())) {
        writer_.MarkChanged(*r);
      }
      break;
    default:
      spdlog::warn("worker {}: unexpected message (case {}); ignored", worker,
                   static_cast<int>(msg.msg_case()));
  }
}

void JobManager::OnDisconnect(const std::string& worker) { workers_.OnDisconnect(worker); }

void JobManager::AddUse(v1::WorkerInfo& w) const {
  ledger_.AddUse(w);
  health_.Describe(w);
  for (const std::string& id : table_.JobsOn(w.name())) w.add_jobs(id);
}

StatusOr<JobManager::ForgottenWorker> JobManager::ForgetWorker(const std::string& worker,
                                                               const std::string& by,
                                                               bool connected) {
  const v1::WorkerInfo* info = workers_.Find(worker);
  if (info == nullptr) return Status::NotFound("no worker named '" + worker + "'");
  if (connected || info->state() == v1::WORKER_READY) {
    return Status::FailedPrecondition("worker " + worker +
                                      " is connected; drain it and stop its daemon first (it "
                                      "can be forgotten once it is LOST)");
  }
  if (info->state() != v1::WORKER_LOST) {
    return Status::FailedPrecondition(
        "worker " + worker + " is UNREACHABLE and may still come back; it can be forgotten once " +
        "it is LOST (not heard from for " + std::to_string(workers_.worker_timeout_ms()) +
        " ms, --worker-timeout)");
  }
  // Durable first: the row and its pending file deletions go in one transaction.
  CONVOY_RETURN_IF_ERROR(store_.DeleteWorker(worker));
  ForgottenWorker out;
  out.worker = *info;
  AddUse(out.worker);
  for (const FileDeletion& d : deletions_.Forget(worker)) {
    out.abandoned_file_deletions.push_back(d.job_id);
    // Its files stay on a disk no worker of this cluster will read again: unless the job is
    // still kept, its identity is free once no other worker holds its files.
    const JobRecord* r = table_.Find(d.job_id);
    if (r == nullptr || r->job.uid() != d.job_uid) ReleaseIdentityOf(d.job_uid);
  }
  workers_.Forget(worker);
  spdlog::info("worker {} forgotten by {} (it was LOST){}", worker, by.empty() ? "local" : by,
               out.abandoned_file_deletions.empty()
                   ? std::string()
                   : "; the files of " + std::to_string(out.abandoned_file_deletions.size()) +
                         " deleted job(s) it had yet to remove stay on its disk");
  return out;
}

void JobManager::OnMetrics(const std::string& worker, const v1::MetricBatch& batch) {
  JobRecord* r = table_.Find(batch.job_id());
  if (r == nullptr || r->rt.attempt != batch.attempt()) return;
  const int64_t now = clock_.NowMonotonicMs();
  for (const v1::MetricRecord& rec0 : batch.records()) {
    auto it = r->rt.ranks.find(rec0.rank());
    if (it == r->rt.ranks.end() || it->second.worker != worker) continue;
    it->second.last_progress_mono_ms = now;
    it->second.reported = true;
    if (rec0.kind() == "heartbeat") continue;  // liveness only (e.g. during evaluation)
    // A checkpoint's record marks the checkpoint (checkpoint_book.h): its values were
    // reported with their step and evaluation already, and are not history points again.
    if (rec0.kind() != "checkpoint" && r->history.Add(rec0, batch.attempt())) {
      table_.MarkHistoryDirty(r->job.id());
    }
    if (!r->rt.first_record_seen) {
      r->rt.first_record_seen = true;
      stats_.Observe(Phase::kFirstStep, r->rt.placed_mono_ms);
    }
    const v1::MetricRecord rec = r->metrics.Record(&r->job, rec0, batch.attempt());
    v1::WatchJobResponse update;
    *update.mutable_metric() = rec;
    watches_.Notify(r->job.id(), update);
  }
  progress_.OnRecords(*r, worker, batch);  // stragglers and hangs (ProgressWatch)
  if (!r->job.sweep_id().empty()) sweeps_.OnRecords(*r, batch);  // a trial: best, ASHA
}

void JobManager::OnLogData(const std::string& worker, const v1::LogData& msg) {
  if (!logs_.Answer(msg, worker)) {
    spdlog::debug("worker {}: log data for request {} not asked of it; ignored", worker,
                  msg.request_id());
  }
}

void JobManager::OnWorkerLost(const std::string& worker) {
  const v1::WorkerInfo* info = workers_.Find(worker);
  if (info != nullptr) (void)store_.SaveWorker(*info);
  spdlog::warn("worker {} lost: not heard from for {} ms", worker, workers_.worker_timeout_ms());
  const std::vector<std::string> held = table_.JobsOn(worker);
  for (const std::string& id : held) lifecycle_.OnWorkerLost(table_.at(id), worker);
}

void JobManager::Tick() {
  for (const std::string& lost : workers_.ExpireLost()) OnWorkerLost(lost);
  const std::vector<std::string> attached(table_.attached().begin(), table_.attached().end());
  for (const std::string& id : attached) {
    lifecycle_.Check(table_.at(id));
    progress_.Check(table_.at(id));
  }
  logs_.Expire();
  sched_.Tick();
  sweeps_.Tick();  // sweeps' next trials and ends
  writer_.Flush();
  ApplyRetention();
  deletions_.Tick();
}

}  // namespace convoy
