#include "coordinator/control/progress_watch.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <set>

#include "common/rank_contract.h"
#include "coordinator/sched/scheduler.h"
#include "coordinator/state/fault_origin.h"
#include "coordinator/state/job_state_machine.h"
#include "spec/progress_spec.h"
#include "spec/trainer_limits.h"

namespace convoy {
namespace {

std::string Fixed(const char* format, double value) {
  char text[48];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// "rank 1 on w2 takes 0.131 s a step, 3.9x its peers' median (0.034 s) over the last 20 steps"
std::string StragglerText(const StepWatch::RankTime& t, int steps) {
  return "rank " + std::to_string(t.rank) + " on " + t.worker + " takes " +
         Fixed("%.3f", t.step_s) + " s a step, " + Fixed("%.1f", t.ratio) +
         "x its peers' median (" + Fixed("%.3f", t.peers_s) + " s) over the last " +
         std::to_string(steps) + " steps";
}

}  // namespace

ProgressWatch::Watch* ProgressWatch::WatchOf(JobRecord& r) {
  auto it = watches_.find(r.job.id());
  if (it != watches_.end() && it->second.attempt == r.rt.attempt) return &it->second;
  if (it != watches_.end()) watches_.erase(it);
  if (r.rt.attempt < 0 || r.rt.released || r.rt.tearing_down) return nullptr;
  StepWatchOptions o;
  o.straggler_factor = StragglerFactor(r.job.spec());
  o.straggler_steps = StragglerSteps(r.job.spec());
  o.hang_steps = HangSteps(r.job.spec());
  o.min_hang_ms = kMinProgressHangMs;
  std::map<int, std::string> ranks;
  for (const auto& [rank, rr] : r.rt.ranks) ranks[rank] = rr.worker;
  r.job.clear_stragglers();
  r.job.clear_step_times();
  return &watches_.emplace(r.job.id(), Watch(r.rt.attempt, StepWatch(o, ranks))).first->second;
}

void ProgressWatch::OnRecords(JobRecord& r, const std::string& worker,
                              const v1::MetricBatch& batch) {
  if (r.job.state() != v1::RUNNING || r.rt.attempt != batch.attempt()) return;
  Watch* w = WatchOf(r);
  if (w == nullptr) return;
  const int64_t now = clock_.NowMonotonicMs();
  for (const v1::MetricRecord& rec : batch.records()) {
    auto it = r.rt.ranks.find(rec.rank());
    if (it == r.rt.ranks.end() || it->second.worker != worker) continue;
    const bool step = rec.has_step() && rec.kind() != "heartbeat";
    auto busy = rec.values().find("busy_s");
    w->steps.OnRecord(rec.rank(), step ? rec.step() : -1, rec.time_unix_ms(), now,
                      busy != rec.values().end() ? busy->second : -1);
    if (rec.rank() == 0) OnBadSteps(r, *w, rec, now);
  }
  Publish(r, *w, false);
}

void ProgressWatch::OnBadSteps(JobRecord& r, Watch& w, const v1::MetricRecord& rec, int64_t now) {
  namespace rc = rank_contract;
  auto value = [&rec](const char* name) -> int64_t {
    auto it = rec.values().find(name);
    return it == rec.values().end() ? -1 : static_cast<int64_t>(it->second);
  };
  const int64_t total = value(rc::kMetricBadSteps);
  if (rec.kind() == rc::kRecordRewind) {
    // Every rank rewinds together (their verdicts are one all-reduce): rank 0 speaks for all.
    stats_.Rewound();
    const int64_t rewinds = value(rc::kMetricRewinds);
    (void)writer_.Note(r, "rewound: bad steps up to step " + std::to_string(rec.step()) +
                              "; the ranks went back to their state of step " +
                              std::to_string(value(rc::kMetricRewoundTo)) +
                              " and go on after the offending batches (" +
                              std::to_string(std::max<int64_t>(total, 0)) + " bad steps skipped, " +
                              std::to_string(rewinds) + " rewind(s) in this attempt)");
    if (total > w.bad_steps) stats_.BadStepsSkipped(total - w.bad_steps);
    w.bad_steps = w.bad_steps_noted = std::max(w.bad_steps, total);
    return;
  }
  if (total <= w.bad_steps) return;
  stats_.BadStepsSkipped(total - w.bad_steps);
  w.bad_steps = total;
  if (w.bad_step_note_mono_ms != 0 && now - w.bad_step_note_mono_ms < kBadStepNoteMs) return;
  const int64_t added = total - w.bad_steps_noted;
  w.bad_steps_noted = total;
  w.bad_step_note_mono_ms = now;
  (void)writer_.Note(r, std::to_string(added) + " bad step(s) skipped by every rank by step " +
                            std::to_string(rec.step()) +
                            " (a loss or gradient norm was not finite); " + std::to_string(total) +
                            " in this attempt, a rewind after " +
                            std::to_string(r.job.spec().trainer().has_max_bad_steps()
                                               ? r.job.spec().trainer().max_bad_steps()
                                               : trainer_limits::kDefaultMaxBadSteps) +
                            " in a row");
}

void ProgressWatch::Publish(JobRecord& r, Watch& w, bool force) {
  const int steps = StragglerSteps(r.job.spec());
  for (const StepWatch::Change& c : w.steps.TakeChanges()) {
    force = true;
    if (c.named) {
      stats_.StragglerNamed();
      w.told_no_spare = false;
      w.named[c.rank.rank] = {clock_.NowUnixMs(), c.at_step};
      (void)writer_.Note(r, "straggler: " + StragglerText(c.rank, steps));
    } else {
      (void)writer_.Note(r, "rank " + std::to_string(c.rank.rank) + " on " + c.rank.worker +
                                " is no longer a straggler (" + Fixed("%.1f", c.rank.ratio) +
                                "x its peers' median)");
    }
  }
  const int64_t now = clock_.NowMonotonicMs();
  if (!force && now - w.published_mono_ms < kPublishEveryMs) return;
  w.published_mono_ms = now;
  r.job.clear_step_times();
  r.job.clear_stragglers();
  for (const StepWatch::RankTime& t : w.steps.step_times()) {
    v1::RankStepTime* st = r.job.add_step_times();
    st->set_rank(t.rank);
    st->set_worker(t.worker);
    st->set_step_s(t.step_s);
    st->set_ratio(t.ratio);
    if (!t.straggler) continue;
    v1::Straggler* s = r.job.add_stragglers();
    s->set_rank(t.rank);
    s->set_worker(t.worker);
    s->set_step_s(t.step_s);
    s->set_peers_s(t.peers_s);
    s->set_window_steps(steps);
    const auto& [named_ms, at_step] = w.named[t.rank];
    s->set_named_unix_ms(named_ms);
    s->set_at_step(at_step);
  }
}

void ProgressWatch::Check(JobRecord& r) {
  if (r.job.state() != v1::RUNNING || r.rt.tearing_down) return;
  auto it = watches_.find(r.job.id());
  if (it == watches_.end() || it->second.attempt != r.rt.attempt) return;
  Watch& w = it->second;
  const int64_t now = clock_.NowMonotonicMs();
  const int64_t due = w.steps.HangDueMs();
  // Once a rank has exited the attempt is ending (or failing): no collective hang then.
  if (due > 0 && now >= due && r.rt.gone_count == 0) {
    std::set<int> stopped;
    for (const auto& [rank, rr] : r.rt.ranks) {
      if (rr.stopped) stopped.insert(rank);
    }
    if (auto suspect = w.steps.CheckHang(now, stopped)) {
      v1::RankFailure f;
      f.set_rank(suspect->rank);
      f.set_worker(suspect->worker);
      if (auto rr = r.rt.ranks.find(suspect->rank); rr != r.rt.ranks.end()) {
        f.set_local_rank(rr->second.local_rank);
      }
      if (const v1::WorkerInfo* wi = workers_.Find(suspect->worker)) {
        f.set_host(wi->hostname().empty() ? wi->address()
                                          : wi->hostname() + " (" + wi->address() + ")");
      }
      f.set_reason(suspect->reason);
      f.set_cause(v1::FAILURE_HANG);
      stats_.ProgressHang();
      lifecycle_.Fail(r, f);
      return;
    }
  }
  if (ReplacesStragglers(r.job.spec()) && r.job.stragglers_size() > 0 &&
      now >= w.next_replace_mono_ms) {
    MaybeReplace(r, w);
  }
}

void ProgressWatch::MaybeReplace(JobRecord& r, Watch& w) {
  const int64_t now = clock_.NowMonotonicMs();
  w.next_replace_mono_ms = now + kReplaceRetryMs;
  const v1::Straggler s = r.job.stragglers(0);
  if (r.job.node_moves() >= kMaxFreeNodeMoves) {
    if (!w.told_no_spare) {
      w.told_no_spare = true;
      (void)writer_.Note(r, "straggler rank " + std::to_string(s.rank()) + " on " + s.worker() +
                                " stays: the job has moved " + std::to_string(r.job.node_moves()) +
                                " times already (on_straggler: replace)");
    }
    return;
  }
  const std::string spare = SpareFor(r);
  if (spare.empty()) {
    if (!w.told_no_spare) {
      w.told_no_spare = true;
      (void)writer_.Note(r, "straggler rank " + std::to_string(s.rank()) + " on " + s.worker() +
                                " stays for now: no spare worker fits a node of the job "
                                "(on_straggler: replace; tried again every " +
                                std::to_string(kReplaceRetryMs / 1000) + " s)");
    }
    return;
  }
  r.job.set_node_moves(r.job.node_moves() + 1);
  const std::vector<std::string> avoid_before = r.avoid;
  r.avoid = {s.worker()};
  const std::string reason = "replacing straggler " + s.worker() + " (rank " +
                             std::to_string(s.rank()) + ", " +
                             Fixed("%.1f", s.step_s() / std::max(s.peers_s(), 1e-9)) +
                             "x its peers' step time) with spare " + spare +
                             ": its ranks save their state and stop; no restart used";
  if (!lifecycle_.Preempt(r, reason, "straggler")) {
    r.job.set_node_moves(r.job.node_moves() - 1);
    r.avoid = avoid_before;
  }
}

std::string ProgressWatch::SpareFor(const JobRecord& r) const {
  const v1::JobSpec& spec = r.job.spec();
  for (const v1::WorkerInfo* w : workers_.Ready()) {
    if (!TakesNewRanks(*w) || r.rt.ranks_by_worker.count(w->name()) != 0) continue;
    if (FitsNode(spec, ledger_.CapacityOf(*w))) return w->name();
  }
  return "";
}

void ProgressWatch::OnTransition(JobRecord& r, v1::JobState to) {
  if (to == v1::RUNNING) return;
  auto it = watches_.find(r.job.id());
  if (it == watches_.end()) return;
  watches_.erase(it);
  if (IsTerminal(to) || to == v1::RESTARTING || to == v1::PENDING) {
    r.job.clear_stragglers();
    r.job.clear_step_times();
  }
}

}  // namespace convoy
