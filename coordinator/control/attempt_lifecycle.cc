#include "coordinator/control/attempt_lifecycle.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include "common/process_exit.h"
#include "coordinator/sched/rendezvous_planner.h"
#include "coordinator/sched/scheduler.h"
#include "coordinator/state/failure_attribution.h"
#include "coordinator/state/fault_origin.h"
#include "coordinator/state/job_state_machine.h"

namespace convoy {
namespace {

bool ExitOk(const v1::ProcessExit& e) { return e.signal() == 0 && e.exit_code() == 0; }

// "all 4 ranks", or "its one rank" for a job of one.
std::string AllRanks(size_t n) {
  return n == 1 ? "its one rank" : "all " + std::to_string(n) + " ranks";
}

}  // namespace

AttemptRuntime AttemptLifecycle::NewRuntime() const {
  return AttemptRuntime(FailureAttribution(clock_, options_.failure_window_ms));
}

v1::Attempt* AttemptLifecycle::CurrentAttempt(JobRecord& r) {
  if (r.job.attempts_size() == 0) return nullptr;
  v1::Attempt* last = r.job.mutable_attempts(r.job.attempts_size() - 1);
  return last->attempt() == r.rt.attempt ? last : nullptr;
}

void AttemptLifecycle::Attach(JobRecord& r, AttemptRuntime rt) {
  for (const auto& [rank, rr] : rt.ranks) {
    if (!rr.gone) ledger_.Take(rr.worker, rr.resources);
  }
  table_.Attach(r, std::move(rt));
}

void AttemptLifecycle::Detach(JobRecord& r) {
  for (const auto& [rank, rr] : r.rt.ranks) {
    if (!rr.gone) ledger_.Give(rr.worker, rr.resources);
  }
  table_.Detach(r);
  on_released_();
}

void AttemptLifecycle::MarkStarted(AttemptRuntime& rt, RankRuntime& rr) {
  if (rr.started) return;
  rr.started = true;
  ++rt.started_count;
  if (rt.started_count == rt.ranks.size())
    stats_.Observe(JobStats::Phase::kRendezvous, rt.placed_mono_ms);
}

void AttemptLifecycle::MarkGone(AttemptRuntime& rt, RankRuntime& rr) {
  if (rr.gone) return;
  rr.gone = true;
  ++rt.gone_count;
  ledger_.Give(rr.worker, rr.resources);
}

bool AttemptLifecycle::Place(JobRecord& r, const std::vector<std::string>& chosen_workers) {
  const std::vector<std::string>* chosen = &chosen_workers;
  const v1::JobSpec& spec = r.job.spec();
  std::vector<PlannedNode> planned;
  std::string names;
  for (const std::string& name : *chosen) {
    const v1::WorkerInfo* w = workers_.Find(name);
    PlannedNode node{name, w->address(), ProcsPerNode(spec, w->gpus_size()), {}};
    // Each process's share: the lowest free GPU indices, gpus_per_proc each, in local rank
    // order; its cores and memory as asked.
    const int gpp = GpusPerProc(spec);
    if (gpp > 0 || spec.cpus_per_proc() > 0 || spec.memory_per_proc_bytes() > 0) {
      const std::vector<int> free = ledger_.FreeGpus(*w);
      for (int i = 0; i < node.procs; ++i) {
        v1::RankResources res;
        for (int k = 0; k < gpp && static_cast<size_t>(i * gpp + k) < free.size(); ++k) {
          res.add_gpus(free[static_cast<size_t>(i * gpp + k)]);
        }
        res.set_cpus(spec.cpus_per_proc());
        res.set_memory_bytes(spec.memory_per_proc_bytes());
        node.resources.push_back(std::move(res));
      }
    }
    planned.push_back(std::move(node));
    names += (names.empty() ? "" : ", ") + name;
  }
  const int attempt =
      r.job.attempts_size() == 0 ? 0 : r.job.attempts(r.job.attempts_size() - 1).attempt() + 1;
  const v1::Job before = r.job;
  v1::Attempt* a = r.job.add_attempts();
  a->set_attempt(attempt);
  for (auto& n : PlanRanks(planned)) *a->add_nodes() = std::move(n);
  a->set_started_unix_ms(clock_.NowUnixMs());
  r.job.set_attempt(attempt);
  const int64_t waited_since = r.waiting_since_mono_ms;
  if (!writer_
           .Transition(r, v1::SCHEDULED,
                       "attempt " + std::to_string(attempt) + " placed on " + names)
           .ok()) {
    r.job = before;
    return false;
  }
  AttemptRuntime rt = NewRuntime();
  rt.attempt = attempt;
  rt.released = false;
  const int64_t now = clock_.NowMonotonicMs();
  rt.placed_mono_ms = now;
  rt.runtime_from_mono_ms = now;
  stats_.AttemptStarted();
  stats_.Observe(JobStats::Phase::kQueue, waited_since);
  if (attempt == 0) {
    const int64_t since_submit_ms =
        std::max<int64_t>(0, clock_.NowUnixMs() - r.job.created_unix_ms());
    stats_.Record(JobStats::Phase::kSchedule, static_cast<double>(since_submit_ms) / 1000.0);
  }
  rt.deadline_mono_ms = now + options_.rendezvous_timeout_ms;
  rt.failures.SetRendezvousDeadline(rt.deadline_mono_ms);
  // Transition replaced r.job: `a` points into the old copy.
  a = r.job.mutable_attempts(r.job.attempts_size() - 1);
  for (const v1::NodeAssignment& n : a->nodes()) {
    for (int i = 0; i < n.ranks_size(); ++i) {
      RankRuntime& rr = rt.ranks[n.ranks(i)];
      rr.worker = n.worker();
      rr.local_rank = i;
      rr.last_progress_mono_ms = now;
      if (i < n.resources_size()) rr.resources = n.resources(i);
    }
  }
  Attach(r, std::move(rt));
  const std::string& master = (*chosen)[0];
  if (!writer_.Transition(r, v1::RENDEZVOUS, "reserving the master port on " + master).ok())
    return true;
  v1::CoordinatorMessage msg;
  msg.mutable_reserve_port()->set_job_id(r.job.id());
  msg.mutable_reserve_port()->set_job_uid(r.job.uid());
  msg.mutable_reserve_port()->set_attempt(attempt);
  if (!channel_.Send(master, msg)) {
    ReportFailure(r, FailureFor(r, 0, master));
  }
  return true;
}

void AttemptLifecycle::Fail(JobRecord& r, const v1::RankFailure& decided) {
  if (r.rt.tearing_down || IsTerminal(r.job.state())) return;
  // When nodes are sick: whose fault it is, and whether moving off the node is free.
  v1::RankFailure cause = decided;
  AttributeOrigin(&cause, workers_.Find(cause.worker()));
  const bool node_move = NodeMoveIsFree(r.job, cause);
  if (v1::Attempt* a = CurrentAttempt(r)) {
    *a->mutable_failure() = cause;
    a->set_ended_unix_ms(clock_.NowUnixMs());
  }
  const v1::JobSpec& spec = r.job.spec();
  Status st;
  const bool resize = IsElastic(spec) && cause.cause() == v1::FAILURE_WORKER_LOST;
  if (resize) {
    // An elastic job goes on with the workers it has left (or waits for min_nodes): losing a
    // worker is a resize, not a failure.
    st = writer_.Transition(r, v1::RESTARTING,
                            cause.reason() + "; continuing with the workers left (elastic: " +
                                std::to_string(spec.min_nodes()) + " to " +
                                std::to_string(spec.max_nodes()) + " nodes, no restart used)",
                            &cause);
  } else if (node_move) {
    r.job.set_node_moves(r.job.node_moves() + 1);
    st = writer_.Transition(r, v1::RESTARTING,
                            cause.reason() + "; the node's fault (" + cause.origin_reason() +
                                "): moving off " + cause.worker() + ", no restart used",
                            &cause);
    if (!st.ok()) r.job.set_node_moves(r.job.node_moves() - 1);
  } else if (r.job.restarts() < spec.max_restarts()) {
    r.job.set_restarts(r.job.restarts() + 1);
    st = writer_.Transition(r, v1::RESTARTING,
                            cause.reason() + "; restarting (restart " +
                                std::to_string(r.job.restarts()) + " of " +
                                std::to_string(spec.max_restarts()) + ")",
                            &cause);
    if (!st.ok()) r.job.set_restarts(r.job.restarts() - 1);
  } else {
    st = writer_.Transition(r, v1::FAILED,
                            cause.reason() + (spec.max_restarts() > 0 ? "; no restarts left" : ""),
                            &cause);
  }
  if (!st.ok()) return;
  // Counted once the decision stands. A move off a sick node counts as a restart of the
  // cluster's (convoy_job_restarts_total, by cause), though not as one of the job's.
  stats_.AttemptFailed(cause, r.job.state() == v1::RESTARTING && !resize);
  // The next attempt avoids the node of a node's fault and a hang's suspect, when others fit.
  r.avoid.clear();
  if (!cause.worker().empty() &&
      (cause.origin() == v1::FAILURE_ORIGIN_NODE || cause.cause() == v1::FAILURE_HANG)) {
    r.avoid.push_back(cause.worker());
  }
  if (on_fault_) on_fault_(r, cause);
  SendKill(r, cause.reason());
  if (r.job.state() == v1::RESTARTING) ReleaseForRestart(r);
  MaybeFinishTeardown(r);
}

void AttemptLifecycle::ReleaseForRestart(JobRecord& r) {
  // A rank's GPU is not shared with its successor while it may still hold the GPU's memory.
  for (const auto& [rank, rr] : r.rt.ranks) {
    if (!rr.gone && rr.resources.gpus_size() > 0) return;
  }
  // The next attempt does not wait for the killed ranks to be reported gone: its placement
  // and start overlap their teardown (a survivor's last will, its exit). On each host, a
  // restarted rank resumes only once the ranks of earlier attempts there have exited
  // (trainer/resume.h), so it still finds the state they saved on the way out. Their exits,
  // reported later, name an attempt that is no longer the job's and are not counted.
  for (auto& [rank, rr] : r.rt.ranks) MarkGone(r.rt, rr);
}

void AttemptLifecycle::SendKill(JobRecord& r, const std::string& reason, bool preempt) {
  AttemptRuntime& rt = r.rt;
  rt.tearing_down = true;
  rt.preempting = preempt;
  rt.failures.Clear();
  const int64_t grace = preempt ? options_.preempt_grace_ms : options_.kill_grace_ms;
  rt.deadline_mono_ms = clock_.NowMonotonicMs() + grace + options_.teardown_slack_ms;
  for (const auto& [worker, ranks] : rt.ranks_by_worker) {
    bool any = false;
    for (int rank : ranks) any = any || !rt.ranks[rank].gone;
    if (!any) continue;
    v1::CoordinatorMessage msg;
    v1::Kill* kill = msg.mutable_kill();
    kill->set_job_id(r.job.id());
    kill->set_job_uid(r.job.uid());
    kill->set_attempt(rt.attempt);
    kill->set_grace_ms(static_cast<int32_t>(grace));
    kill->set_reason(reason);
    kill->set_preempt(preempt);
    if (!channel_.Send(worker, msg)) {
      spdlog::warn(
          "job {}: cannot reach worker {} to kill attempt {}; it kills the ranks "
          "itself when it reconnects or loses the coordinator",
          r.job.id(), worker, rt.attempt);
    }
  }
}

void AttemptLifecycle::MaybeFinishTeardown(JobRecord& r) {
  AttemptRuntime& rt = r.rt;
  if (rt.released || rt.attempt < 0) return;
  // Only a decided attempt is released: one whose failure is still being attributed (the
  // failure window) must keep its state even when every rank is already gone.
  if (!rt.tearing_down && !IsTerminal(r.job.state())) return;
  const bool all_gone = rt.gone_count == rt.ranks.size();
  const bool expired = rt.tearing_down && clock_.NowMonotonicMs() >= rt.deadline_mono_ms;
  if (!all_gone && !expired) return;
  if (!all_gone) {
    spdlog::warn(
        "job {}: ranks of attempt {} not reported gone by the teardown deadline; "
        "releasing their slots",
        r.job.id(), rt.attempt);
    for (auto& [rank, rr] : rt.ranks) MarkGone(rt, rr);
  }
  rt.released = true;
  if (v1::Attempt* a = CurrentAttempt(r); a != nullptr && a->ended_unix_ms() == 0) {
    a->set_ended_unix_ms(clock_.NowUnixMs());
  }
  Detach(r);
  writer_.MarkChanged(r);
}

v1::RankFailure AttemptLifecycle::FailureFor(const JobRecord& r, int rank,
                                             const std::string& worker) const {
  v1::RankFailure f;
  f.set_rank(rank);
  auto it = r.rt.ranks.find(rank);
  if (it != r.rt.ranks.end()) f.set_local_rank(it->second.local_rank);
  f.set_worker(worker);
  if (const v1::WorkerInfo* w = workers_.Find(worker)) {
    f.set_host(w->hostname().empty() ? w->address() : w->hostname() + " (" + w->address() + ")");
  }
  f.set_reason("rank " + std::to_string(rank) + " on worker " + worker + " is not reachable");
  f.set_cause(v1::FAILURE_WORKER_LOST);
  return f;
}

void AttemptLifecycle::MaybeRendezvousAgain(JobRecord& r, const std::string& worker) {
  // A rendezvous cut short by a coordinator restart: ask node 0 for its port again.
  v1::Attempt* a = CurrentAttempt(r);
  if (r.rt.recovering && a != nullptr && a->nodes_size() > 0 && a->nodes(0).worker() == worker &&
      !r.rt.failures.collecting()) {
    if (r.job.state() == v1::SCHEDULED) {
      (void)writer_.Transition(r, v1::RENDEZVOUS, "reserving the master port on " + worker);
    }
    v1::CoordinatorMessage msg;
    msg.mutable_reserve_port()->set_job_id(r.job.id());
    msg.mutable_reserve_port()->set_job_uid(r.job.uid());
    msg.mutable_reserve_port()->set_attempt(r.rt.attempt);
    channel_.Send(worker, msg);
  }
  if (r.rt.awaiting.empty() && r.rt.recovering) r.rt.recovering = false;
}

void AttemptLifecycle::OnPortReserved(const std::string& worker, const v1::PortReserved& msg) {
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
  writer_.SaveNow(*r);
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

void AttemptLifecycle::OnProcessStarted(const std::string& worker, const v1::ProcessStarted& msg) {
  JobRecord* r = table_.Find(msg.job_id());
  if (r == nullptr || r->rt.attempt != msg.attempt()) return;
  auto it = r->rt.ranks.find(msg.rank());
  if (it == r->rt.ranks.end() || it->second.worker != worker) return;
  MarkStarted(r->rt, it->second);
  it->second.pid = msg.pid();
  it->second.last_progress_mono_ms = clock_.NowMonotonicMs();
  MaybeRunning(*r);
}

void AttemptLifecycle::MaybeRunning(JobRecord& r) {
  if (r.job.state() != v1::RENDEZVOUS || r.rt.tearing_down) return;
  if (r.rt.started_count < r.rt.ranks.size()) return;
  const int64_t now = clock_.NowMonotonicMs();
  for (auto& [rank, rr] : r.rt.ranks) rr.last_progress_mono_ms = now;
  (void)writer_.Transition(
      r, v1::RUNNING,
      AllRanks(r.rt.ranks.size()) + " of attempt " + std::to_string(r.rt.attempt) + " started");
}

void AttemptLifecycle::OnLaunchFailed(const std::string& worker, const v1::LaunchFailed& msg) {
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

void AttemptLifecycle::OnProcessExited(const std::string& worker, const v1::ProcessExited& msg) {
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
    writer_.MarkChanged(*r);
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
    writer_.MarkChanged(*r);
    return;
  }
  if (writer_.Transition(*r, v1::SUCCEEDED, AllRanks(r->rt.ranks.size()) + " exited with code 0")
          .ok()) {
    if (v1::Attempt* a = CurrentAttempt(*r)) a->set_ended_unix_ms(clock_.NowUnixMs());
    MaybeFinishTeardown(*r);
  }
}

void AttemptLifecycle::ReportFailure(JobRecord& r, v1::RankFailure failure) {
  if (r.rt.tearing_down || IsTerminal(r.job.state())) return;
  r.rt.failures.Report(std::move(failure));
  // Decided now when the cause is already certain (a rank killed from outside, or every rank
  // gone), else when the window closes (Tick): a restart does not wait for a timer it need
  // not wait for.
  MaybeDecideFailure(r);
}

void AttemptLifecycle::MaybeDecideFailure(JobRecord& r) {
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
    Fail(r, *cause);
  }
}

void AttemptLifecycle::OnHeartbeat(const std::string& worker, const v1::Heartbeat& heartbeat) {
  std::set<std::tuple<std::string, int, int>> stopped;
  for (const v1::StoppedRank& s : heartbeat.stopped()) {
    if (table_.FindAttemptOf(s.job_id(), s.job_uid()) == nullptr) continue;  // another job's
    stopped.insert({s.job_id(), s.attempt(), s.rank()});
  }
  for (const std::string& id : table_.JobsOn(worker)) {
    JobRecord& r = table_.at(id);
    for (int rank : r.rt.ranks_by_worker[worker]) {
      r.rt.ranks[rank].stopped = stopped.count({id, r.rt.attempt, rank}) > 0;
    }
  }
}

bool AttemptLifecycle::Preempt(JobRecord& r, const std::string& reason, const std::string& kind) {
  const bool resize = kind == "resize" || kind == "straggler";
  if (r.rt.released || r.rt.attempt < 0 || r.rt.tearing_down || IsTerminal(r.job.state())) {
    return false;
  }
  r.job.set_preemptions(r.job.preemptions() + 1);
  if (!writer_.Transition(r, resize ? v1::RESTARTING : v1::PENDING, reason).ok()) {
    r.job.set_preemptions(r.job.preemptions() - 1);
    return false;
  }
  stats_.Preempted(kind);
  SendKill(r, reason, /*preempt=*/true);
  MaybeFinishTeardown(r);
  return true;
}

void AttemptLifecycle::SendJobFinished(const JobRecord& r) const {
  if (r.job.attempts_size() == 0) return;
  v1::CoordinatorMessage msg;
  msg.mutable_job_finished()->set_job_id(r.job.id());
  msg.mutable_job_finished()->set_job_uid(r.job.uid());
  msg.mutable_job_finished()->set_cluster_id(options_.cluster_id);
  // Every worker that ran an attempt of it may hold its snapshots, not only the last
  // attempt's (the soak found them left on the others until the idle expiry).
  std::set<std::string> told;
  for (const v1::Attempt& a : r.job.attempts()) {
    for (const v1::NodeAssignment& n : a.nodes()) {
      if (told.insert(n.worker()).second) channel_.Send(n.worker(), msg);
    }
  }
}

void AttemptLifecycle::Adopt(JobRecord& r, const std::string& worker, const v1::AttemptStatus& as) {
  for (const v1::RankStatus& rs : as.ranks()) {
    auto it = r.rt.ranks.find(rs.rank());
    if (it == r.rt.ranks.end() || it->second.worker != worker) continue;
    if (rs.running()) {
      MarkStarted(r.rt, it->second);
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
      OnProcessExited(worker, exited);
    }
  }
}

void AttemptLifecycle::Restore(JobRecord& r, AttemptRuntime rt) { Attach(r, std::move(rt)); }

void AttemptLifecycle::Stop(JobRecord& r, const std::string& reason) {
  if (r.rt.attempt >= 0 && !r.rt.released) SendKill(r, reason);
  MaybeFinishTeardown(r);
}

void AttemptLifecycle::OnWorkerBack(JobRecord& r, const std::string& worker,
                                    const v1::AttemptStatus* reported) {
  r.rt.awaiting.erase(worker);
  if (r.rt.released || r.rt.tearing_down || IsTerminal(r.job.state())) return;
  if (!r.rt.launched) {
    MaybeRendezvousAgain(r, worker);
    return;
  }
  for (int rank : r.rt.ranks_by_worker[worker]) {
    RankRuntime& rr = r.rt.ranks[rank];
    if (rr.gone) continue;
    bool known = false;
    if (reported != nullptr) {
      for (const v1::RankStatus& rs : reported->ranks()) known = known || rs.rank() == rank;
    }
    if (known) continue;
    if (!rr.started && !r.rt.recovering) continue;  // its launch may still be in flight
    MarkGone(r.rt, rr);
    v1::RankFailure f = FailureFor(r, rank, worker);
    f.set_reason("rank " + std::to_string(rank) + " on worker " + worker +
                 " vanished: the worker came back without it");
    f.set_cause(v1::FAILURE_WORKER_LOST);
    ReportFailure(r, f);
  }
  if (r.rt.awaiting.empty() && r.rt.recovering) {
    r.rt.recovering = false;
    spdlog::info("job {}: every worker of attempt {} is back", r.job.id(), r.rt.attempt);
  }
  MaybeRunning(r);
}

void AttemptLifecycle::OnWorkerLost(JobRecord& r, const std::string& worker) {
  if (r.rt.released || r.rt.attempt < 0) return;
  r.rt.awaiting.erase(worker);
  int first_rank = -1;
  for (int rank : r.rt.ranks_by_worker[worker]) {
    RankRuntime& rr = r.rt.ranks[rank];
    if (rr.gone) continue;
    MarkGone(r.rt, rr);
    if (first_rank < 0) first_rank = rank;
  }
  if (first_rank < 0) return;
  if (!r.rt.tearing_down && !IsTerminal(r.job.state())) {
    v1::RankFailure f = FailureFor(r, first_rank, worker);
    f.set_reason("worker " + worker + " (" + f.host() + ") lost: no heartbeat for " +
                 std::to_string(workers_.worker_timeout_ms() / 1000) + " s");
    f.set_cause(v1::FAILURE_WORKER_LOST);
    // Decided at once: the peers' errors were caused by this loss, not the other way round.
    Fail(r, r.rt.failures.Decisive(std::move(f)));
  }
  MaybeFinishTeardown(r);
}

void AttemptLifecycle::Check(JobRecord& r) {
  AttemptRuntime& rt = r.rt;
  if (rt.released || rt.attempt < 0) return;
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
    Fail(r, f);
  } else if (s == v1::RUNNING && !rt.tearing_down) {
    auto liveness = [&rt] {
      std::vector<RankLiveness> out;
      out.reserve(rt.ranks.size());
      for (const auto& [rank, rr] : rt.ranks) {
        out.push_back({rank, rr.gone, rr.stopped, rr.last_progress_mono_ms, rr.reported});
      }
      return out;
    };
    // A rank that has not reported yet is starting: its allowance is the rendezvous's.
    if (auto hang = rt.failures.CheckHang(liveness, r.job.spec().hang_timeout_s(),
                                          options_.rendezvous_timeout_ms)) {
      v1::RankFailure f = FailureFor(r, hang->rank, rt.ranks[hang->rank].worker);
      f.set_reason(hang->reason);
      f.set_cause(v1::FAILURE_HANG);
      Fail(r, f);
    }
  }
  MaybeFinishTeardown(r);
}

}  // namespace convoy
