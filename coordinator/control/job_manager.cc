// JobManager: the client API, transitions, placement and teardown.
// Worker events and timeouts are in job_manager_workers.cc.
#include "coordinator/control/job_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "common/util.h"
#include "coordinator/control/checkpoint_book.h"
#include "coordinator/sched/rendezvous_planner.h"
#include "coordinator/sched/scheduler.h"
#include "coordinator/state/job_state_machine.h"
#include "spec/job_spec_validation.h"
#include "spec/sweep_spec.h"

namespace convoy {

JobManager::JobManager(const Clock& clock, JobStore& store, WorkerRegistry& workers,
                       WorkerChannel& channel, JobManagerOptions options)
    : clock_(clock),
      store_(store),
      workers_(workers),
      channel_(channel),
      options_(options),
      table_(clock),
      stats_(clock),
      logs_(clock, options.log_request_timeout_ms),
      deletions_(clock, store, channel, options.lifecycle.cluster_id),
      retention_(clock, options.job_retention_ms, options.job_retention_count),
      writer_(
          clock, store, table_, watches_, stats_, options.history_save_interval_ms,
          [this](JobRecord& r, v1::JobState from, v1::JobState to) { OnTransition(r, from, to); }),
      lifecycle_(clock, options.lifecycle, table_, ledger_, stats_, writer_, workers, channel,
                 [this] { sched_.Needed(); }),
      sched_(clock, options.scheduling, table_, ledger_, lifecycle_, writer_, workers),
      health_(clock, options.node_faults, store, workers, writer_, stats_,
              [this] {
                if (!table_.waiting().empty()) sched_.Needed();
              }),
      progress_(clock, writer_, lifecycle_, workers, ledger_, stats_),
      deps_(table_, writer_,
            [this](const std::string& id) {
              sched_.Needed();
              sweeps_.Wake(id);  // a sweep makes its trials once its `after` is met
            }),
      sweeps_(table_, writer_, watches_,
              {[this](const v1::JobSpec& spec, const v1::Job& sweep, const TrialValues& values,
                      int index) {
                 return Admit(spec, sweep.owner(), sweep.owner_role(), "", [&](v1::Job& job) {
                   job.set_sweep_id(sweep.id());
                   for (const v1::TrialParameter& p : values) *job.add_trial_parameters() = p;
                   return "; trial " + std::to_string(index + 1) + " of sweep " + sweep.id() +
                          " (" + DescribeTrial(values) + ")";
                 });
               },
               [this](const std::string& id, const std::string& reason) {
                 return StopJob(id, reason);
               }}) {
  sched_.SetHold([this](const std::string& id) { return deps_.Blocks(id); });
  lifecycle_.SetFaultHook(
      [this](JobRecord& r, const v1::RankFailure& cause) { health_.OnFailure(r, cause); });
}

namespace {

// "0-3", "0-3, 8-11", "5": sorted ranks as ranges.
std::string RankRanges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] <= ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) +
           (ranks[j] != ranks[i] ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

// The metric history's bound per rank for a job of this shape.
int HistoryPoints(const v1::JobSpec& spec) {
  const int64_t per_node = spec.procs_per_node_gpu() ? 8 : std::max(1, spec.procs_per_node());
  return MetricHistory::PointsPerRank(int64_t{std::max(1, MaxNodes(spec))} * per_node);
}

// resume_from naming a job: a finished job of the same owner, fixed now by its uid (its id
// may name another job after a restore; its uid never does). nullopt: it names no job (a
// path, or nothing).
StatusOr<std::optional<v1::ResumeSource>> ResumeSourceOf(const JobTable& table,
                                                         const v1::JobSpec& spec,
                                                         const std::string& owner) {
  std::optional<v1::ResumeSource> resume;
  if (IsJobIdLike(spec.resume_from())) {
    const JobRecord* from = table.Find(spec.resume_from());
    if (from == nullptr) {
      return Status::InvalidArgument("resume_from: no job " + spec.resume_from() +
                                     " (a finished job of yours, or a path under the job's "
                                     "directory)");
    }
    if (from->job.owner() != owner) {
      return Status::PermissionDenied(
          "resume_from: job " + spec.resume_from() + " belongs to " +
          (from->job.owner().empty() ? std::string("nobody") : from->job.owner()) +
          "; a job resumes only from its owner's jobs");
    }
    if (!IsTerminal(from->job.state())) {
      return Status::FailedPrecondition("resume_from: job " + spec.resume_from() + " is " +
                                        StateName(from->job.state()) +
                                        "; resume from it when it has finished");
    }
    // A sweep runs nothing itself: its best trial is what it has to resume from, so that the
    // best trial's best checkpoint is one submit away (resume_checkpoint: best).
    if (from->job.spec().has_sweep()) {
      const std::string& best = from->job.sweep().best_trial();
      if (best.empty() || table.Find(best) == nullptr) {
        return Status::FailedPrecondition("resume_from: sweep " + spec.resume_from() +
                                          " has no best trial (none reported its metric, or it "
                                          "was deleted)");
      }
      from = table.Find(best);
    }
    resume.emplace();
    resume->set_job_id(from->job.id());
    resume->set_uid(from->job.uid());
    resume->set_checkpoint_dir(from->job.spec().checkpoint_dir());
    // resume_checkpoint: best (coordinator/control/checkpoint_book.h).
    CONVOY_RETURN_IF_ERROR(ResolveResumeCheckpoint(spec, from->job, &*resume));
  }
  return resume;
}

// A submit within its owner's quotas: jobs waiting, and (with --over-quota refuse, or when the
// job alone is over it) processes and GPUs.
Status CheckQuotaAtSubmit(const JobTable& table, const SchedulingController& sched,
                          bool refuse_over_quota, const v1::JobSpec& spec, const std::string& owner,
                          const std::string& role) {
  v1::Job probe;
  probe.set_owner(owner);
  probe.set_owner_role(role);
  const Quota quota = sched.QuotaOf(probe);
  if (quota.queued > 0 && !owner.empty()) {
    int queued = 0;
    for (const std::string& id : table.waiting())
      queued += table.at(id).job.owner() == owner ? 1 : 0;
    if (queued >= quota.queued) {
      return Status::ResourceExhausted("quota: " + owner + " has " + std::to_string(queued) +
                                       " jobs waiting, the most " + "a user may (" +
                                       quota.queued_source + " " + std::to_string(quota.queued) +
                                       "); submit again when one has started");
    }
  }
  if ((quota.slots > 0 || quota.gpus > 0) && !owner.empty()) {
    // The least this job holds when it runs (a GPU job's size depends on its workers).
    const int procs = spec.procs_per_node_gpu() ? 1 : spec.procs_per_node();
    const int64_t slots = int64_t{MinNodes(spec)} * procs;
    const int64_t gpus = slots * GpusPerProc(spec);
    int64_t used_slots = 0, used_gpus = 0;
    for (const std::string& id : table.attached()) {
      const JobRecord& other = table.at(id);
      if (other.job.owner() != owner || other.rt.tearing_down) continue;
      for (const NodeHold& h : SchedulingController::Holds(other)) {
        used_slots += h.slots;
        used_gpus += h.gpus;
      }
    }
    auto refuse = [&](const std::string& what, int64_t used, int64_t limit, int64_t need,
                      const std::string& source) {
      return Status::ResourceExhausted(
          "quota: " + owner + "'s running jobs use " + std::to_string(used) + " of " +
          std::to_string(limit) + " " + what + " (" + source + ") and this job needs " +
          std::to_string(need) +
          (need > limit ? "; it can never start: ask for fewer"
                        : "; submit again when they end (this coordinator refuses jobs over "
                          "quota: --over-quota refuse)"));
    };
    if (quota.slots > 0 && slots > quota.slots) {
      return refuse("processes", used_slots, quota.slots, slots, quota.source);
    }
    if (quota.gpus > 0 && gpus > quota.gpus) {
      return refuse("GPUs", used_gpus, quota.gpus, gpus, quota.gpus_source);
    }
    if (refuse_over_quota) {
      if (quota.slots > 0 && used_slots + slots > quota.slots) {
        return refuse("processes", used_slots, quota.slots, slots, quota.source);
      }
      if (quota.gpus > 0 && used_gpus + gpus > quota.gpus) {
        return refuse("GPUs", used_gpus, quota.gpus, gpus, quota.gpus_source);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

void JobManager::ReleaseIdentityOf(const std::string& job_uid) {
  if (!deletions_.HoldsFilesOf(job_uid)) identities_.Release(job_uid);
}

Status JobManager::Recover() {
  auto workers = store_.LoadWorkers();
  if (!workers.ok()) return workers.status();
  for (const v1::WorkerInfo& w : *workers) workers_.Restore(w);

  auto jobs = store_.LoadJobs();
  if (!jobs.ok()) return jobs.status();
  const int64_t now = clock_.NowMonotonicMs();
  for (v1::Job& job : *jobs) {
    if (job.identity() > 0) identities_.Hold(job.identity(), job.uid());
    const std::string id = job.id();
    table_.Insert(std::move(job), lifecycle_.NewRuntime());
    if (table_.waiting().count(id) > 0) sched_.Needed();
  }
  for (auto& [id, r] : table_.records()) {
    if (r.job.uid().empty() || r.job.identity() <= 0) {
      // Stored by a coordinator older than job uids or identities: it gets them now, kept
      // from here on.
      if (r.job.uid().empty()) r.job.set_uid(RandomHexId());
      if (r.job.identity() <= 0) r.job.set_identity(identities_.Take(r.job.uid()));
      v1::Job copy = r.job;
      copy.clear_events();
      Status st = store_.SaveJob(copy, nullptr);
      if (!st.ok()) return st;
    }
    r.metrics.Rebuild(r.job);
    r.history = MetricHistory(r.job.id(), HistoryPoints(r.job.spec()));
    r.rt.released = true;
    if (!HoldsWorkers(r.job.state()) || r.job.attempts_size() == 0) continue;
    AttemptRuntime rt = lifecycle_.NewRuntime();
    const v1::Attempt& a = r.job.attempts(r.job.attempts_size() - 1);
    rt.attempt = a.attempt();
    rt.released = false;
    rt.recovering = true;
    rt.launched = a.master_port() != 0;
    rt.tearing_down = r.job.state() == v1::RESTARTING;
    rt.deadline_mono_ms =
        now + workers_.worker_timeout_ms() + options_.lifecycle.rendezvous_timeout_ms;
    rt.failures.SetRendezvousDeadline(rt.deadline_mono_ms);
    for (const v1::NodeAssignment& n : a.nodes()) {
      for (int i = 0; i < n.ranks_size(); ++i) {
        RankRuntime& rr = rt.ranks[n.ranks(i)];
        rr.worker = n.worker();
        rr.local_rank = i;
        rr.started = r.job.state() == v1::RUNNING;
        rr.last_progress_mono_ms = now;
        if (i < n.resources_size()) rr.resources = n.resources(i);
      }
    }
    for (const v1::ProcessExited& e : a.exits()) {
      auto it = rt.ranks.find(e.rank());
      if (it != rt.ranks.end()) it->second.gone = true;
    }
    for (const auto& [rank, rr] : rt.ranks) {
      if (!rr.gone) rt.awaiting.insert(rr.worker);
    }
    lifecycle_.Restore(r, std::move(rt));
    spdlog::info("recovered job {} in {} (attempt {}); waiting for its workers", r.job.id(),
                 StateName(r.job.state()), r.rt.attempt);
  }
  auto histories = store_.LoadJobMetrics();
  if (!histories.ok()) return histories.status();
  for (v1::JobMetrics& m : *histories) {
    JobRecord* r = table_.Find(m.job_id());
    if (r != nullptr) r->history.Restore(std::move(m));
  }
  auto deletions = store_.LoadFileDeletions();
  if (!deletions.ok()) return deletions.status();
  deletions_.Restore(*deletions);
  deps_.Recover();
  sweeps_.Recover();  // after the histories: ASHA's rungs are rebuilt from them
  spdlog::info("recovered {} jobs and {} workers from the store", table_.size(), workers->size());
  return Status::Ok();
}

StatusOr<std::string> JobManager::Submit(const v1::JobSpec& spec, const std::string& owner,
                                         const std::string& role, const std::string& request_id) {
  return Admit(spec, owner, role, request_id, nullptr);
}

StatusOr<std::string> JobManager::Admit(const v1::JobSpec& spec, const std::string& owner,
                                        const std::string& role, const std::string& request_id,
                                        const std::function<std::string(v1::Job&)>& trial) {
  if (!request_id.empty() && !IsValidName(request_id)) {
    return Status::InvalidArgument("request_id: '" + request_id.substr(0, 80) +
                                   "' is not 1-63 of [A-Za-z0-9._-] (not starting with . or -)");
  }
  // A retried submit (its reply was lost): the job it made, and no second one.
  if (const JobRecord* done = table_.FindByRequest(owner, request_id); done != nullptr) {
    return done->job.id();
  }
  CONVOY_RETURN_IF_ERROR(ValidateJobSpec(spec));
  CONVOY_RETURN_IF_ERROR(deps_.CheckAtSubmit(spec, table_.NextId()));
  // A sweep: every trial is checked now, and the first is what resume_from and quotas see.
  auto runs = SweepController::CheckSubmit(spec);
  if (!runs.ok()) return runs.status();
  auto resume = ResumeSourceOf(table_, *runs, owner);
  if (!resume.ok()) return resume.status();
  CONVOY_RETURN_IF_ERROR(
      CheckQuotaAtSubmit(table_, sched_, options_.refuse_over_quota, *runs, owner, role));
  const std::string id = table_.NextId();
  v1::Job job;
  job.set_id(id);
  job.set_uid(RandomHexId());
  job.set_identity(identities_.Take(job.uid()));
  *job.mutable_spec() = spec;
  job.set_state(v1::PENDING);
  job.set_created_unix_ms(clock_.NowUnixMs());
  job.set_updated_unix_ms(job.created_unix_ms());
  job.set_owner(owner);
  job.set_owner_role(role);
  job.set_request_id(request_id);
  std::string submitted = owner.empty() ? "submitted" : "submitted by " + owner;
  if (trial) submitted += trial(job);
  if (*resume && !spec.has_sweep()) {
    *job.mutable_resume_source() = **resume;
    submitted += "; starts from " +
                 ((*resume)->checkpoint_file().empty()
                      ? std::string("the newest checkpoint")
                      : "the best checkpoint, " + (*resume)->checkpoint_file() + ",") +
                 " of job " + (*resume)->job_id() + " (uid " + (*resume)->uid() + ")";
  } else if (!spec.resume_from().empty()) {
    submitted += "; starts from " + spec.resume_from() + " (resume_from)";
  }
  const std::string never = deps_.Prepare(job);
  if (!job.pending_reason().empty()) submitted += "; " + job.pending_reason();
  job.set_message(submitted);
  v1::JobEvent event;
  event.set_time_unix_ms(job.created_unix_ms());
  event.set_to(v1::PENDING);
  event.set_reason(submitted);
  Status st = store_.SaveJob(job, &event);
  if (!st.ok()) return Status::Unavailable("cannot persist the job: " + st.message());
  *job.add_events() = event;
  JobRecord& r = table_.Insert(std::move(job), lifecycle_.NewRuntime());
  r.history = MetricHistory(id, HistoryPoints(spec));
  deps_.Track(r, never);
  spdlog::info("job {} ({}) submitted: {} node(s)", id, spec.name(),
               IsElastic(spec)
                   ? std::to_string(spec.min_nodes()) + "-" + std::to_string(spec.max_nodes())
                   : std::to_string(spec.nodes()));
  if (spec.has_sweep()) sweeps_.OnSubmitted(r);  // its first trials
  sched_.Pass();
  return std::string(id);
}

StatusOr<v1::JobMetrics> JobManager::GetMetrics(const std::string& id) const {
  const JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  return r->history.Sorted();
}

StatusOr<v1::Job> JobManager::Get(const std::string& id) const {
  const JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  return r->job;
}

std::vector<v1::Job> JobManager::List(bool full) const {
  std::vector<v1::Job> out;
  out.reserve(table_.size());
  for (const auto& [id, r] : table_.records()) out.push_back(full ? r.job : Summary(r.job));
  return out;
}

JobManager::JobPage JobManager::ListPage(const JobQuery& query) const {
  JobPage page;
  // Returns false once the page is full and another match follows.
  auto take = [&](const v1::Job& job) {
    if (!query.Matches(job)) return true;
    if (page.jobs.size() == static_cast<size_t>(query.limit)) {
      // Another match follows: the page is not the last.
      page.next_page_token = JobPageToken(page.jobs.back().id(), query.newest_first);
      return false;
    }
    page.jobs.push_back(query.full ? job : Summary(job));
    return true;
  };
  const JobTable::Records& jobs = table_.records();
  if (query.newest_first) {
    auto it = query.after.empty() ? jobs.end() : jobs.lower_bound(query.after);
    while (it != jobs.begin() && take((--it)->second.job)) {
    }
    return page;
  }
  auto it = query.after.empty() ? jobs.begin() : jobs.upper_bound(query.after);
  for (; it != jobs.end() && take(it->second.job); ++it) {
  }
  return page;
}

std::set<std::string> JobManager::ReferencedCode() const {
  std::set<std::string> out;
  for (const auto& [id, r] : table_.records()) {
    if (!r.job.spec().code_sha256().empty()) out.insert(r.job.spec().code_sha256());
  }
  return out;
}

std::vector<v1::Job> JobManager::ListActive() const {
  std::vector<v1::Job> out;
  for (const std::string& id : table_.active()) out.push_back(Summary(table_.at(id).job));
  return out;
}

v1::Job JobManager::Summary(const v1::Job& job) {
  v1::Job s;
  s.set_id(job.id());
  *s.mutable_spec() = job.spec();
  s.set_state(job.state());
  s.set_created_unix_ms(job.created_unix_ms());
  s.set_updated_unix_ms(job.updated_unix_ms());
  s.set_attempt(job.attempt());
  s.set_restarts(job.restarts());
  *s.mutable_latest() = job.latest();
  s.set_message(job.message());
  s.set_owner(job.owner());
  s.set_pending_reason(job.pending_reason());
  s.set_queue_position(job.queue_position());
  s.set_estimated_start_unix_ms(job.estimated_start_unix_ms());
  s.set_preemptions(job.preemptions());
  s.set_owner_role(job.owner_role());
  *s.mutable_stragglers() = job.stragglers();
  *s.mutable_step_times() = job.step_times();
  s.set_node_moves(job.node_moves());
  *s.mutable_waiting_for() = job.waiting_for();
  s.set_sweep_id(job.sweep_id());
  *s.mutable_trial_parameters() = job.trial_parameters();
  if (job.has_sweep()) *s.mutable_sweep() = job.sweep();
  for (const v1::Attempt& a : job.attempts()) {
    v1::Attempt* t = s.add_attempts();
    t->set_attempt(a.attempt());
    t->set_master_addr(a.master_addr());
    t->set_master_port(a.master_port());
    t->set_started_unix_ms(a.started_unix_ms());
    t->set_ended_unix_ms(a.ended_unix_ms());
    if (a.has_failure()) *t->mutable_failure() = a.failure();
    t->set_node_count(a.nodes_size());
    t->set_exit_count(a.exits_size());
  }
  return s;
}

JobManager::Stats JobManager::GetStats() const {
  Stats st;
  st.jobs = table_.by_state();
  st.workers = workers_.counts();
  st.slots_total = workers_.ready_slots();
  st.slots_used = ledger_.used_slots();
  st.jobs_by_owner = table_.by_owner();
  st.attempts_started = stats_.attempts_started();
  st.attempt_failures = stats_.attempt_failures();
  st.restarts = stats_.restarts();
  st.preemptions = stats_.preemptions();
  st.node_faults = stats_.node_faults();
  st.auto_cordons = stats_.auto_cordons();
  st.stragglers_named = stats_.stragglers_named();
  st.progress_hangs = stats_.progress_hangs();
  st.bad_steps = stats_.bad_steps();
  st.rewinds = stats_.rewinds();
  return st;
}

std::vector<v1::Job> JobManager::TakeFinished() {
  std::vector<v1::Job> out;
  for (const std::string& id : stats_.TakeFinished()) {
    if (const JobRecord* r = table_.Find(id)) out.push_back(Summary(r->job));
  }
  return out;
}

void JobManager::OnTransition(JobRecord& r, v1::JobState from, v1::JobState to) {
  if (to == v1::PENDING || to == v1::RESTARTING) sched_.Needed();
  progress_.OnTransition(r, to);
  if (IsTerminal(to)) lifecycle_.SendJobFinished(r);
  if (IsTerminal(to)) deps_.OnEnded(r.job.id());  // its dependants are judged now
  sweeps_.OnTransition(r, to);
}

StatusOr<v1::Job> JobManager::Cancel(const std::string& id, const std::string& reason,
                                     const std::string& by, bool cascade) {
  JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  if (IsTerminal(r->job.state())) {
    return Status::FailedPrecondition("job " + id + " already " + StateName(r->job.state()));
  }
  const std::string who = by.empty() ? "cancelled by user" : "cancelled by " + by;
  const std::string why = reason.empty() ? who : who + ": " + reason;
  const std::string also = cascade ? deps_.CancelDependants(*r, why) : "";
  CONVOY_RETURN_IF_ERROR(writer_.Transition(
      *r, v1::CANCELLED, also.empty() ? why : why + "; cascade: also cancelled " + also));
  lifecycle_.Stop(*r, why);
  if (r->job.spec().has_sweep()) sweeps_.OnCancelled(*r);  // its trials too
  return r->job;
}

Status JobManager::StopJob(const std::string& id, const std::string& reason) {
  JobRecord* r = table_.Find(id);
  if (r == nullptr || IsTerminal(r->job.state())) return Status::Ok();
  CONVOY_RETURN_IF_ERROR(writer_.Transition(*r, v1::CANCELLED, reason));
  lifecycle_.Stop(*r, reason);
  return Status::Ok();
}

StatusOr<uint64_t> JobManager::Watch(const std::string& id, WatchFn fn) {
  JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  v1::WatchJobResponse snapshot;
  *snapshot.mutable_job() = r->job;
  const bool done = IsTerminal(r->job.state());
  fn(snapshot, done);
  return done ? watches_.NextId() : watches_.Add(id, std::move(fn));
}

void JobManager::Unwatch(uint64_t watch_id) { watches_.Remove(watch_id); }

StatusOr<int> JobManager::RequestLogs(const std::string& id, int rank, int attempt, int64_t offset,
                                      int max_bytes, int wait_ms, LogFn fn) {
  JobRecord* r = table_.Find(id);
  if (r == nullptr) return Status::NotFound("job " + id + " not found");
  if (attempt < 0) attempt = r->job.attempts_size() == 0 ? -1 : r->job.attempt();
  const v1::Attempt* found = nullptr;
  for (const v1::Attempt& a : r->job.attempts()) {
    if (a.attempt() == attempt) found = &a;
  }
  if (found == nullptr) {
    return Status::NotFound("job " + id + " has no attempt " + std::to_string(attempt) +
                            (attempt < 0 ? " (it has not been placed yet)" : ""));
  }
  std::string worker;
  std::vector<int> ranks;
  for (const v1::NodeAssignment& n : found->nodes()) {
    for (int rk : n.ranks()) {
      if (rk == rank) worker = n.worker();
      ranks.push_back(rk);
    }
  }
  if (worker.empty()) {
    // A usage error (the job exists): INVALID_ARGUMENT, so the CLI exits 2, not 4.
    return Status::InvalidArgument("job " + id + " has no rank " + std::to_string(rank) +
                                   "; its ranks are " + RankRanges(ranks) +
                                   (found != &r->job.attempts(r->job.attempts_size() - 1)
                                        ? " (attempt " + std::to_string(attempt) + ")"
                                        : ""));
  }
  const int64_t request_id = logs_.Add(std::move(fn), wait_ms, worker);
  v1::CoordinatorMessage msg;
  v1::ReadLogs* read = msg.mutable_read_logs();
  read->set_request_id(request_id);
  read->set_job_id(id);
  read->set_job_uid(r->job.uid());
  read->set_attempt(attempt);
  read->set_rank(rank);
  read->set_offset(offset);
  read->set_max_bytes(max_bytes);
  read->set_wait_ms(wait_ms);
  if (!channel_.Send(worker, msg)) {
    logs_.Cancel(request_id);
    return Status::Unavailable("worker " + worker + " that ran rank " + std::to_string(rank) +
                               " is not connected");
  }
  return attempt;
}

std::vector<v1::WorkerInfo> JobManager::ListWorkers() const {
  std::vector<v1::WorkerInfo> out = workers_.List();
  for (v1::WorkerInfo& w : out) AddUse(w);
  return out;
}

JobManager::WorkerPage JobManager::ListWorkersPage(const WorkerQuery& query) const {
  WorkerPage page;
  bool more = false;
  page.workers = workers_.ListAfter(query.after, static_cast<size_t>(query.limit), &more);
  for (v1::WorkerInfo& w : page.workers) AddUse(w);
  if (more && !page.workers.empty()) {
    page.next_page_token = WorkerPageToken(page.workers.back().name());
  }
  return page;
}

StatusOr<v1::WorkerInfo> JobManager::SetCordoned(const std::string& worker, bool cordoned,
                                                 const std::string& reason, const std::string& by) {
  StatusOr<v1::WorkerInfo> info = health_.SetCordoned(worker, cordoned, reason, by);
  if (info.ok()) AddUse(*info);
  return info;
}

StatusOr<v1::WorkerInfo> JobManager::SetDrained(const std::string& worker, bool drained,
                                                const std::string& by, bool now) {
  const v1::WorkerInfo* before = workers_.Find(worker);
  if (before == nullptr) return Status::NotFound("no worker named '" + worker + "'");
  const bool changed = before->drained() != drained;
  const v1::WorkerInfo* info = workers_.SetDrained(worker, drained, by.empty() ? "local" : by);
  if (changed) {
    CONVOY_RETURN_IF_ERROR(store_.SaveWorker(*info));
    spdlog::info("worker {} {} by {}", worker, drained ? "drained" : "undrained",
                 by.empty() ? "local" : by);
    if (!drained && !table_.waiting().empty()) sched_.Needed();
  }
  if (drained && now) {
    // Preempted whatever their priority: an admin empties the machine (maintenance).
    const std::vector<std::string> held = table_.JobsOn(worker);
    const std::string who = by.empty() ? "local" : by;
    for (const std::string& id : held) {
      lifecycle_.Preempt(table_.at(id),
                         "worker " + worker + " drained now by " + who +
                             "; its ranks checkpoint and stop, and it waits to run elsewhere",
                         "drain");
    }
  }
  v1::WorkerInfo out = *workers_.Find(worker);
  AddUse(out);
  return out;
}

}  // namespace convoy
