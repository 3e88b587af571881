// JobManager: what workers report, and what time does (lost workers, hangs, deadlines).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "common/process_exit.h"
#include "common/util.h"
#include "coordinator/failure_attribution.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rendezvous_planner.h"

namespace convoy {
namespace {

bool ExitOk(const v1::ProcessExit& e) { return e.signal() == 0 && e.exit_code() == 0; }

// "all 4 ranks", or "its one rank" for a job of one.
std::string AllRanks(size_t n) {
  return n == 1 ? "its one rank" : "all " + std::to_string(n) + " ranks";
}

}  // namespace

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

  for (const v1::AttemptStatus& as : reg.attempts()) {
    JobRecord* r = FindAttemptOf(as.job_id(), as.job_uid());
    const bool current = r != nullptr && r->rt.attempt == as.attempt() && !r->rt.released;
    bool any_running = false;
    for (const v1::RankStatus& rs : as.ranks()) any_running = any_running || rs.running();
    if (current) {
      for (const v1::RankStatus& rs : as.ranks()) {
        auto it = r->rt.ranks.find(rs.rank());
        if (it == r->rt.ranks.end() || it->second.worker != reg.name()) continue;
        if (rs.running()) {
          MarkStarted(r->rt, it->second);
          it->second.pid = rs.pid();
        } else {
          v1::ProcessExited exited;
          exited.set_job_id(as.job_id());
          exited.set_job_uid(as.job_uid());
          exited.set_attempt(as.attempt());
          exited.set_rank(rs.rank());
          exited.set_local_rank(rs.local_rank());
          exited.set_pid(rs.pid());
          *exited.mutable_exit() = rs.exit();
          OnProcessExited(reg.name(), exited);
        }
      }
    }
    const bool wanted = current && !r->rt.tearing_down && !IsTerminal(r->job.state());
    if (!wanted && any_running) {
      spdlog::info("worker {} still runs attempt {} of job {}, which is no longer wanted: killing",
                   reg.name(), as.attempt(), as.job_id());
      v1::CoordinatorMessage msg;
      v1::Kill* kill = msg.mutable_kill();
      kill->set_job_id(as.job_id());
      kill->set_job_uid(as.job_uid());
      kill->set_attempt(as.attempt());
      kill->set_grace_ms(static_cast<int32_t>(options_.kill_grace_ms));
      kill->set_reason("stale attempt");
      channel_.Send(reg.name(), msg);
    }
  }

  // Ranks this worker should run but no longer knows of: they died with a worker restart.
  // Only the jobs that hold this worker are looked at.
  const std::vector<std::string> held = table_.JobsOn(reg.name());
  for (const std::string& id : held) {
    JobRecord& r = table_.at(id);
    r.rt.awaiting.erase(reg.name());
    if (r.rt.released || r.rt.tearing_down || IsTerminal(r.job.state())) continue;
    if (!r.rt.launched) {
      MaybeRendezvousAgain(r, reg.name());
      continue;
    }
    const v1::AttemptStatus* reported = nullptr;
    for (const v1::AttemptStatus& as : reg.attempts()) {
      if (as.job_id() == id && SameUid(as.job_uid(), r.job.uid()) && as.attempt() == r.rt.attempt) {
        reported = &as;
      }
    }
    for (int rank : r.rt.ranks_by_worker[reg.name()]) {
      RankRuntime& rr = r.rt.ranks[rank];
      if (rr.gone) continue;
      bool known = false;
      if (reported != nullptr) {
        for (const v1::RankStatus& rs : reported->ranks()) known = known || rs.rank() == rank;
      }
      if (known) continue;
      if (!rr.started && !r.rt.recovering) continue;  // its launch may still be in flight
      MarkGone(r.rt, rr);
      v1::RankFailure f = FailureFor(r, rank, reg.name());
      f.set_reason("rank " + std::to_string(rank) + " on worker " + reg.name() +
                   " vanished: the worker came back without it");
      f.set_cause(v1::FAILURE_WORKER_LOST);
      ReportFailure(r, f);
    }
    if (r.rt.awaiting.empty() && r.rt.recovering) {
      r.rt.recovering = false;
      spdlog::info("job {}: every worker of attempt {} is back", id, r.rt.attempt);
    }
    MaybeRunning(r);
  }
  // Files of jobs deleted while it was away (or not yet confirmed): asked again now, after
  // any Kill above (a worker keeps the files of an attempt that still runs).
  deletions_.SendTo(reg.name(), true);
  // A worker with free slots: jobs that wait are placed at the next tick (not here: 10,000
  // workers registering must not each run the scheduler).
  if (!table_.waiting().empty()) schedule_needed_ = true;
  v1::RegisterAck ack;
  ack.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  // Snapshots in its host memory that no job of this cluster that may still run owns
  // (another cluster's, a finished job's, or one this coordinator never had): it removes them.
  if (reg.snapshot_keys_size() > 0) {
    std::set<std::string> live;
    for (const std::string& id : table_.active()) {
      live.insert(id);  // a key from before identities
      const std::string& uid = table_.at(id).job.uid();
      if (!uid.empty() && !options_.cluster_id.empty()) {
        live.insert(options_.cluster_id + "-" + uid);
      }
    }
    for (const std::string& key : reg.snapshot_keys()) {
      if (live.count(key) == 0) ack.add_stale_snapshot_keys(key);
    }
  }
  return ack;
}

void JobManager::MaybeRendezvousAgain(JobRecord& r, const std::string& worker) {
  // A rendezvous cut short by a coordinator restart: ask node 0 for its port again.
  v1::Attempt* a = CurrentAttempt(r);
  if (r.rt.recovering && a != nullptr && a->nodes_size() > 0 && a->nodes(0).worker() == worker &&
      !r.rt.failures.collecting()) {
    if (r.job.state() == v1::SCHEDULED) {
      (void)Transition(r, v1::RENDEZVOUS, "reserving the master port on " + worker);
    }
    v1::CoordinatorMessage msg;
    msg.mutable_reserve_port()->set_job_id(r.job.id());
    msg.mutable_reserve_port()->set_job_uid(r.job.uid());
    msg.mutable_reserve_port()->set_attempt(r.rt.attempt);
    channel_.Send(worker, msg);
  }
  if (r.rt.awaiting.empty() && r.rt.recovering) r.rt.recovering = false;
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
      default:
        return std::make_pair<const std::string*, const std::string*>(nullptr, nullptr);
    }
  }();
  if (about.first != nullptr && table_.Find(*about.first) != nullptr &&
      FindAttemptOf(*about.first, *about.second) == nullptr) {
    spdlog::warn(
        "worker {}: ignored a report of another job with the id {} (uid {}; this "
        "cluster's is {})",
        worker, *about.first, *about.second, table_.Find(*about.first)->job.uid());
    return;
  }
  switch (msg.msg_case()) {
    case v1::WorkerMessage::kHeartbeat:
      OnHeartbeat(worker, msg.heartbeat());
      break;
    case v1::WorkerMessage::kPortReserved:
      OnPortReserved(worker, msg.port_reserved());
      break;
    case v1::WorkerMessage::kProcessStarted:
      OnProcessStarted(worker, msg.process_started());
      break;
    case v1::WorkerMessage::kLaunchFailed:
      OnLaunchFailed(worker, msg.launch_failed());
      break;
    case v1::WorkerMessage::kProcessExited:
      OnProcessExited(worker, msg.process_exited());
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
    default:
      spdlog::warn("worker {}: unexpected message (case {}); ignored", worker,
                   static_cast<int>(msg.msg_case()));
  }
}

void JobManager::OnDisconnect(const std::string& worker) { workers_.OnDisconnect(worker); }

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

void JobManager::OnPortReserved(const std::string& worker, const v1::PortReserved& msg) {
  JobRecord* r = table_.Find(msg.job_id());
  if (r == nullptr || r->rt.attempt != msg.attempt() || r->job.state() != v1::RENDEZVOUS ||
      r->rt.launched || r->rt.tearing_down) {
    return;
  }
  v1::Attempt* a = CurrentAttempt(*r);
  if (a == nullptr || a->nodes_size() == 0 || a->nodes(0).worker() != worker) return;
  if (msg.port() <= 0 || msg.port() > 65535) {
    v1::RankFailure f = FailureFor(*r, 0, worker);
    f.set_reason("worker " + worker + " could not reserve a master port: " + msg.error());
    f.set_cause(v1::FAILURE_OTHER);
    ReportFailure(*r, f);
    return;
  }
  a->set_master_addr(a->nodes(0).address());
  a->set_master_port(msg.port());
  // Written now, not at the tick: a restarted coordinator must not ask for a second port
  // while ranks of this one already run.
  SaveNow(*r);
  r->rt.launched = true;
  std::vector<v1::NodeAssignment> nodes(a->nodes().begin(), a->nodes().end());
  for (const v1::NodeAssignment& n : nodes) {
    v1::CoordinatorMessage out;
    *out.mutable_launch() =
        PlanLaunch(r->job.id(), r->rt.attempt, r->job.spec(), nodes, n.group_rank(), msg.port());
    out.mutable_launch()->set_job_uid(r->job.uid());
    out.mutable_launch()->set_identity(r->job.identity());
    out.mutable_launch()->set_owner(r->job.owner());
    if (r->job.has_resume_source()) {
      *out.mutable_launch()->mutable_resume_source() = r->job.resume_source();
    }
    out.mutable_launch()->set_cluster_id(options_.cluster_id);
    if (!channel_.Send(n.worker(), out)) {
      ReportFailure(*r, FailureFor(*r, n.ranks_size() > 0 ? n.ranks(0) : 0, n.worker()));
      return;
    }
  }
  spdlog::info("job {}: attempt {} launched, master {}:{}", r->job.id(), r->rt.attempt,
               a->master_addr(), msg.port());
}

void JobManager::OnProcessStarted(const std::string& worker, const v1::ProcessStarted& msg) {
  JobRecord* r = table_.Find(msg.job_id());
  if (r == nullptr || r->rt.attempt != msg.attempt()) return;
  auto it = r->rt.ranks.find(msg.rank());
  if (it == r->rt.ranks.end() || it->second.worker != worker) return;
  MarkStarted(r->rt, it->second);
  it->second.pid = msg.pid();
  it->second.last_progress_mono_ms = clock_.NowMonotonicMs();
  MaybeRunning(*r);
}

void JobManager::MaybeRunning(JobRecord& r) {
  if (r.job.state() != v1::RENDEZVOUS || r.rt.tearing_down) return;
  if (r.rt.started_count < r.rt.ranks.size()) return;
  const int64_t now = clock_.NowMonotonicMs();
  for (auto& [rank, rr] : r.rt.ranks) rr.last_progress_mono_ms = now;
  (void)Transition(
      r, v1::RUNNING,
      AllRanks(r.rt.ranks.size()) + " of attempt " + std::to_string(r.rt.attempt) + " started");
}

void JobManager::OnLaunchFailed(const std::string& worker, const v1::LaunchFailed& msg) {
  JobRecord* r = table_.Find(msg.job_id());
  if (r == nullptr || r->rt.attempt != msg.attempt()) return;
  auto it = r->rt.ranks.find(msg.rank());
  // Only the worker that was given the rank speaks for it (its certificate says who it is).
  if (it == r->rt.ranks.end() || it->second.worker != worker) return;
  MarkGone(r->rt, it->second);
  v1::RankFailure f = FailureFor(*r, msg.rank(), worker);
  f.set_reason("rank " + std::to_string(msg.rank()) + " on worker " + worker +
               " could not start: " + msg.error());
  f.set_cause(v1::FAILURE_OTHER);
  ReportFailure(*r, f);
  MaybeFinishTeardown(*r);
}

void JobManager::OnProcessExited(const std::string& worker, const v1::ProcessExited& msg) {
  JobRecord* r = table_.Find(msg.job_id());
  if (r == nullptr || r->rt.attempt != msg.attempt()) return;
  auto it = r->rt.ranks.find(msg.rank());
  if (it == r->rt.ranks.end() || it->second.worker != worker || it->second.gone) return;
  RankRuntime& rr = it->second;
  MarkGone(r->rt, rr);
  MarkStarted(r->rt, rr);
  if (v1::Attempt* a = CurrentAttempt(*r)) *a->add_exits() = msg;
  // A clean exit is the common case (10,000 of them per 10,000-node job): not logged at info.
  spdlog::log(ExitOk(msg.exit()) ? spdlog::level::debug : spdlog::level::info,
              "job {}: rank {} on {} {}", r->job.id(), msg.rank(), worker,
              DescribeExit(msg.exit()));

  if (IsTerminal(r->job.state()) || r->rt.tearing_down) {
    Persist(*r);
    MaybeFinishTeardown(*r);
    return;
  }
  if (!ExitOk(msg.exit())) {
    v1::RankFailure f = FailureFor(*r, msg.rank(), worker);
    *f.mutable_exit() = msg.exit();
    f.set_reason("rank " + std::to_string(msg.rank()) + " on worker " + worker + " (" + f.host() +
                 ") " + DescribeExit(msg.exit()));
    // What the rank said (in the reason) never decides the cause: only how it ended.
    f.set_cause(msg.exit().signal() != 0 ? v1::FAILURE_SIGNAL : v1::FAILURE_RANK_EXIT);
    ReportFailure(*r, f);
    return;
  }
  MaybeRunning(*r);
  const bool all_ok = r->rt.gone_count == r->rt.ranks.size();
  if (!all_ok || r->rt.failures.collecting()) {
    Persist(*r);
    return;
  }
  if (Transition(*r, v1::SUCCEEDED, AllRanks(r->rt.ranks.size()) + " exited with code 0").ok()) {
    if (v1::Attempt* a = CurrentAttempt(*r)) a->set_ended_unix_ms(clock_.NowUnixMs());
    MaybeFinishTeardown(*r);
  }
}

void JobManager::ReportFailure(JobRecord& r, v1::RankFailure failure) {
  if (r.rt.tearing_down || IsTerminal(r.job.state())) return;
  r.rt.failures.Report(std::move(failure));
  // Decided now when the cause is already certain (a rank killed from outside, or every rank
  // gone), else when the window closes (Tick): a restart does not wait for a timer it need
  // not wait for.
  MaybeDecideFailure(r);
}

void JobManager::MaybeDecideFailure(JobRecord& r) {
  AttemptRuntime& rt = r.rt;
  if (!rt.failures.collecting() || rt.tearing_down || IsTerminal(r.job.state())) return;
  // No rank killed from outside: a peer whose worker's stream just broke (the worker died
  // or its link was cut) explains the others' broken collectives.
  auto unreachable = [&]() -> std::optional<v1::RankFailure> {
    for (const auto& [rank, rr] : rt.ranks) {
      if (rr.gone || workers_.IsReady(rr.worker)) continue;
      v1::RankFailure f = FailureFor(r, rank, rr.worker);
      f.set_reason("worker " + rr.worker + " (" + f.host() +
                   ") became unreachable while its peers failed");
      f.set_cause(v1::FAILURE_WORKER_LOST);
      return f;
    }
    return std::nullopt;
  };
  const bool all_reported = rt.gone_count == rt.ranks.size();
  if (std::optional<v1::RankFailure> cause = rt.failures.RootCause(unreachable, all_reported)) {
    FailAttempt(r, *cause);
  }
}

void JobManager::OnHeartbeat(const std::string& worker, const v1::Heartbeat& heartbeat) {
  std::set<std::tuple<std::string, int, int>> stopped;
  for (const v1::StoppedRank& s : heartbeat.stopped()) {
    if (FindAttemptOf(s.job_id(), s.job_uid()) == nullptr) continue;  // another job's
    stopped.insert({s.job_id(), s.attempt(), s.rank()});
  }
  for (const std::string& id : table_.JobsOn(worker)) {
    JobRecord& r = table_.at(id);
    for (int rank : r.rt.ranks_by_worker[worker]) {
      r.rt.ranks[rank].stopped = stopped.count({id, r.rt.attempt, rank}) > 0;
    }
  }
}

void JobManager::OnMetrics(const std::string& worker, const v1::MetricBatch& batch) {
  JobRecord* r = table_.Find(batch.job_id());
  if (r == nullptr || r->rt.attempt != batch.attempt()) return;
  const int64_t now = clock_.NowMonotonicMs();
  for (const v1::MetricRecord& rec0 : batch.records()) {
    auto it = r->rt.ranks.find(rec0.rank());
    if (it == r->rt.ranks.end() || it->second.worker != worker) continue;
    it->second.last_progress_mono_ms = now;
    if (rec0.kind() == "heartbeat") continue;  // liveness only (e.g. during evaluation)
    if (r->history.Add(rec0, batch.attempt())) table_.MarkHistoryDirty(r->job.id());
    if (!r->rt.first_record_seen) {
      r->rt.first_record_seen = true;
      stats_.Observe(Phase::kFirstStep, r->rt.placed_mono_ms);
    }
    const v1::MetricRecord rec = r->metrics.Record(&r->job, rec0, batch.attempt());
    v1::WatchJobResponse update;
    *update.mutable_metric() = rec;
    watches_.Notify(r->job.id(), update);
  }
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
  for (const std::string& id : held) {
    JobRecord& r = table_.at(id);
    if (r.rt.released || r.rt.attempt < 0) continue;
    r.rt.awaiting.erase(worker);
    int first_rank = -1;
    for (int rank : r.rt.ranks_by_worker[worker]) {
      RankRuntime& rr = r.rt.ranks[rank];
      if (rr.gone) continue;
      MarkGone(r.rt, rr);
      if (first_rank < 0) first_rank = rank;
    }
    if (first_rank < 0) continue;
    if (!r.rt.tearing_down && !IsTerminal(r.job.state())) {
      v1::RankFailure f = FailureFor(r, first_rank, worker);
      f.set_reason("worker " + worker + " (" + f.host() + ") lost: no heartbeat for " +
                   std::to_string(workers_.worker_timeout_ms() / 1000) + " s");
      f.set_cause(v1::FAILURE_WORKER_LOST);
      // Decided at once: the peers' errors were caused by this loss, not the other way round.
      FailAttempt(r, r.rt.failures.Decisive(std::move(f)));
    }
    MaybeFinishTeardown(r);
  }
}

void JobManager::Tick() {
  for (const std::string& lost : workers_.ExpireLost()) OnWorkerLost(lost);
  const std::vector<std::string> attached(table_.attached().begin(), table_.attached().end());
  for (const std::string& id : attached) {
    JobRecord& r = table_.at(id);
    AttemptRuntime& rt = r.rt;
    if (rt.released || rt.attempt < 0) continue;
    const v1::JobState s = r.job.state();
    if (rt.failures.collecting()) {
      MaybeDecideFailure(r);
    } else if ((s == v1::SCHEDULED || s == v1::RENDEZVOUS) && !rt.tearing_down &&
               rt.failures.RendezvousOverdue()) {
      std::vector<int> missing;
      for (const auto& [rank, rr] : rt.ranks) {
        if (!rr.started) missing.push_back(rank);
      }
      const int first = missing.empty() ? 0 : missing[0];
      v1::RankFailure f = FailureFor(r, first, rt.ranks[first].worker);
      f.set_reason(RendezvousTimeoutReason(missing));
      f.set_cause(v1::FAILURE_OTHER);
      FailAttempt(r, f);
    } else if (s == v1::RUNNING && !rt.tearing_down) {
      auto liveness = [&rt] {
        std::vector<RankLiveness> out;
        out.reserve(rt.ranks.size());
        for (const auto& [rank, rr] : rt.ranks) {
          out.push_back({rank, rr.gone, rr.stopped, rr.last_progress_mono_ms});
        }
        return out;
      };
      if (auto hang = rt.failures.CheckHang(liveness, r.job.spec().hang_timeout_s())) {
        v1::RankFailure f = FailureFor(r, hang->rank, rt.ranks[hang->rank].worker);
        f.set_reason(hang->reason);
        f.set_cause(v1::FAILURE_HANG);
        FailAttempt(r, f);
      }
    }
    MaybeFinishTeardown(r);
  }
  logs_.Expire();
  const int64_t now = clock_.NowMonotonicMs();
  if (now - usage_updated_mono_ms_ >= 1000) {
    AccountAndEnforceRuntime();
    GrowElasticJobs();
  }
  if (!table_.waiting().empty() && now >= next_schedule_mono_ms_) schedule_needed_ = true;
  if (schedule_needed_) TrySchedule();
  FlushDirty();
  ApplyRetention();
  deletions_.Tick();
}

}  // namespace convoy
