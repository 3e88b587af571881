#include "coordinator/control/sweeps.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <optional>
#include <utility>

#include "coordinator/state/job_state_machine.h"
#include "spec/sweep_spec_file.h"

namespace convoy {
namespace {

// The value of `metric` in `rec`: its loss for "loss", else the named value.
std::optional<double> MetricOf(const v1::MetricRecord& rec, const std::string& metric) {
  if (metric == "loss") {
    if (rec.has_loss()) return rec.loss();
    auto it = rec.values().find("loss");  // a record that named it among the others
    if (it != rec.values().end()) return it->second;
    return std::nullopt;
  }
  auto it = rec.values().find(metric);
  if (it == rec.values().end()) return std::nullopt;
  return it->second;
}

bool Made(const v1::TrialSummary& t) { return !t.job_id().empty(); }
// An unmade trial that will never be made (the sweep was cancelled, or its spec failed).
bool NotStarted(const v1::TrialSummary& t) { return !Made(t) && !t.stopped_reason().empty(); }
bool StoppedEarly(const v1::TrialSummary& t) { return Made(t) && !t.stopped_reason().empty(); }
bool Ended(const v1::TrialSummary& t) {
  return NotStarted(t) || (Made(t) && IsTerminal(t.state()));
}

bool SameValues(const google::protobuf::RepeatedPtrField<v1::TrialParameter>& a,
                const TrialValues& b) {
  if (static_cast<size_t>(a.size()) != b.size()) return false;
  for (size_t i = 0; i < b.size(); ++i) {
    if (a[static_cast<int>(i)].path() != b[i].path() ||
        a[static_cast<int>(i)].value() != b[i].value()) {
      return false;
    }
  }
  return true;
}

}  // namespace

StatusOr<v1::JobSpec> SweepController::CheckSubmit(const v1::JobSpec& spec) {
  if (!spec.has_sweep()) return spec;
  auto trials = ExpandSweep(spec);
  if (!trials.ok()) return trials.status();
  if (trials->empty()) return Status::InvalidArgument("sweep: makes no trial");
  return std::move(trials->front().spec);
}

SweepController::Runtime& SweepController::Load(JobRecord& sweep) {
  const std::string& id = sweep.job.id();
  auto it = sweeps_.find(id);
  if (it != sweeps_.end()) return it->second;
  const SweepSettings settings = ResolveSweep(sweep.job.spec().sweep());
  Runtime& rt =
      sweeps_
          .try_emplace(id, AshaRungs::Options{settings.min_steps, settings.reduction_factor,
                                              settings.maximize})
          .first->second;
  rt.settings = settings;
  rt.plan = SweepTrialValues(sweep.job.spec().sweep());
  v1::SweepStatus* status = sweep.job.mutable_sweep();
  if (static_cast<size_t>(status->trials_size()) != rt.plan.size()) {
    // New (or from a store that lost it): every trial of the plan, none made yet. Made
    // trials are adopted back by Recover.
    status->clear_trials();
    for (const TrialValues& values : rt.plan) {
      v1::TrialSummary* t = status->add_trials();
      for (const v1::TrialParameter& p : values) *t->add_parameters() = p;
    }
  }
  for (int i = 0; i < status->trials_size(); ++i) {
    if (Made(status->trials(i))) rt.index[status->trials(i).job_id()] = i;
  }
  return rt;
}

void SweepController::OnSubmitted(JobRecord& sweep) {
  Runtime& rt = Load(sweep);
  Recount(sweep.job, rt.settings);
  Pass(sweep, rt);
}

void SweepController::Recover() {
  // Trials by sweep, in the order they were made (ids ascend).
  std::map<std::string, std::vector<JobRecord*>> trials;
  for (auto& [id, r] : table_.records()) {
    if (r.job.spec().has_sweep()) Load(r);
    if (!r.job.sweep_id().empty()) trials[r.job.sweep_id()].push_back(&r);
  }
  for (auto& [sweep_id, rt] : sweeps_) {
    JobRecord* sweep = table_.Find(sweep_id);
    if (sweep == nullptr) continue;
    v1::SweepStatus* status = sweep->job.mutable_sweep();
    bool adopted = false;
    for (JobRecord* trial : trials[sweep_id]) {
      auto known = rt.index.find(trial->job.id());
      int place = known == rt.index.end() ? -1 : known->second;
      if (place < 0) {
        // Made, but the sweep's record was not written after it (a restart in between).
        for (int i = 0; i < status->trials_size() && place < 0; ++i) {
          const v1::TrialSummary& t = status->trials(i);
          if (!Made(t) && t.stopped_reason().empty() &&
              SameValues(trial->job.trial_parameters(), rt.plan[static_cast<size_t>(i)])) {
            place = i;
          }
        }
        if (place < 0) continue;
        status->mutable_trials(place)->set_job_id(trial->job.id());
        rt.index[trial->job.id()] = place;
        adopted = true;
      }
      status->mutable_trials(place)->set_state(trial->job.state());
      if (rt.settings.asha) ReplayHistory(rt, place, *trial);
    }
    Recount(sweep->job, rt.settings);
    if (adopted) writer_.MarkChanged(*sweep);
    if (!IsTerminal(sweep->job.state())) due_.insert(sweep_id);
  }
}

void SweepController::ReplayHistory(Runtime& rt, int place, const JobRecord& trial) {
  const std::string& metric = rt.settings.metric;
  for (const v1::RankHistory& rank : trial.history.history().ranks()) {
    if (rank.rank() != 0) continue;
    if (metric == "loss") {
      for (const v1::MetricPoint& p : rank.points()) {
        if (p.has_loss()) rt.asha.Report(place, p.step(), p.loss());
      }
      if (rank.has_last() && rank.last().has_loss()) {
        rt.asha.Report(place, rank.last().step(), rank.last().loss());
      }
    } else if (metric == "test_accuracy" || metric == "test_loss") {
      for (const v1::EvalPoint& e : rank.evals()) {
        if (metric == "test_accuracy" && e.has_test_accuracy()) {
          rt.asha.Report(place, e.step(), e.test_accuracy());
        } else if (metric == "test_loss" && e.has_test_loss()) {
          rt.asha.Report(place, e.step(), e.test_loss());
        }
      }
    }
  }
}

void SweepController::OnTransition(JobRecord& r, v1::JobState to) {
  if (!blocked_.empty() && (IsTerminal(to) || HoldsWorkers(to))) {
    // Something started or ended: quota may have room for a trial now.
    due_.insert(blocked_.begin(), blocked_.end());
    blocked_.clear();
  }
  if (r.job.sweep_id().empty()) return;
  auto it = sweeps_.find(r.job.sweep_id());
  JobRecord* sweep = table_.Find(r.job.sweep_id());
  if (it == sweeps_.end() || sweep == nullptr) return;
  auto place = it->second.index.find(r.job.id());
  if (place == it->second.index.end()) return;  // being made: its state is read after
  sweep->job.mutable_sweep()->mutable_trials(place->second)->set_state(to);
  Recount(sweep->job, it->second.settings);
  Changed(*sweep);
  if (IsTerminal(to)) due_.insert(sweep->job.id());
}

void SweepController::OnRecords(JobRecord& trial, const v1::MetricBatch& batch) {
  auto it = sweeps_.find(trial.job.sweep_id());
  JobRecord* sweep = table_.Find(trial.job.sweep_id());
  if (it == sweeps_.end() || sweep == nullptr) return;
  Runtime& rt = it->second;
  auto found = rt.index.find(trial.job.id());
  if (found == rt.index.end()) return;
  const int place = found->second;
  v1::TrialSummary* t = sweep->job.mutable_sweep()->mutable_trials(place);
  bool changed = false;
  std::string stop;
  for (const v1::MetricRecord& rec : batch.records()) {
    // Rank 0 speaks for the trial (every rank of a data-parallel job trains the same model).
    if (rec.rank() != 0 || rec.kind() == "heartbeat") continue;
    if (rec.has_step()) rt.last_step[place] = rec.step();
    const std::optional<double> value = MetricOf(rec, rt.settings.metric);
    if (!value) continue;
    const int64_t step = rec.has_step() ? rec.step() : rt.last_step[place];
    if (std::isfinite(*value) &&
        (!t->has_best_metric() || MetricBetter(*value, t->best_metric(), rt.settings.maximize))) {
      t->set_best_metric(*value);
      t->set_best_step(step);
      changed = true;
    }
    if (rt.settings.asha && stop.empty() && t->stopped_reason().empty()) {
      if (auto s = rt.asha.Report(place, step, *value)) {
        stop = AshaStopReason(rt.settings.metric, rt.settings.reduction_factor, *s);
      }
    }
  }
  if (!stop.empty() && !IsTerminal(trial.job.state())) {
    t->set_stopped_reason(stop);
    changed = true;
  }
  if (changed) {
    Recount(sweep->job, rt.settings);
    Changed(*sweep);
  }
  if (!stop.empty() && !IsTerminal(trial.job.state())) {
    const std::string trial_id = trial.job.id();
    Status st = hooks_.cancel(trial_id, stop);
    if (!st.ok())
      spdlog::warn("sweep {}: cannot stop trial {}: {}", sweep->job.id(), trial_id, st.message());
  }
}

void SweepController::OnCancelled(JobRecord& sweep) {
  auto it = sweeps_.find(sweep.job.id());
  if (it == sweeps_.end()) return;
  const std::string reason = "cancelled with its sweep " + sweep.job.id();
  v1::SweepStatus* status = sweep.job.mutable_sweep();
  std::vector<std::string> unfinished;
  for (v1::TrialSummary& t : *status->mutable_trials()) {
    if (!Made(t) && t.stopped_reason().empty()) {
      t.set_stopped_reason("not started: the sweep was cancelled");
    } else if (Made(t) && !IsTerminal(t.state())) {
      unfinished.push_back(t.job_id());
    }
  }
  for (const std::string& id : unfinished) {
    const JobRecord* r = table_.Find(id);
    if (r == nullptr || IsTerminal(r->job.state())) continue;
    Status st = hooks_.cancel(id, reason);
    if (!st.ok())
      spdlog::warn("sweep {}: cannot cancel trial {}: {}", sweep.job.id(), id, st.message());
  }
  Recount(sweep.job, it->second.settings);
  writer_.MarkChanged(sweep);
  blocked_.erase(sweep.job.id());
  due_.erase(sweep.job.id());
}

void SweepController::Tick() {
  const auto due = std::exchange(due_, {});
  for (const std::string& id : due) {
    JobRecord* sweep = table_.Find(id);
    auto it = sweeps_.find(id);
    if (sweep != nullptr && it != sweeps_.end()) Pass(*sweep, it->second);
  }
  const auto changed = std::exchange(changed_, {});
  for (const std::string& id : changed) {
    const JobRecord* sweep = table_.Find(id);
    if (sweep == nullptr || IsTerminal(sweep->job.state())) continue;
    v1::WatchJobResponse snap;
    *snap.mutable_job() = sweep->job;
    watches_.Notify(id, snap);
  }
}

void SweepController::Changed(JobRecord& sweep) {
  writer_.MarkChanged(sweep);
  changed_.insert(sweep.job.id());
}

void SweepController::Pass(JobRecord& sweep, Runtime& rt) {
  if (IsTerminal(sweep.job.state())) return;
  // A sweep with `after` makes no trial while its dependencies are unmet (Job.waiting_for);
  // Wake makes them once they are.
  if (sweep.job.waiting_for_size() > 0) return;
  // The sweep's id: `sweep` stays valid (records are never moved), but submits below may
  // insert into the table.
  const std::string sweep_id = sweep.job.id();
  int unfinished = 0;
  for (const v1::TrialSummary& t : sweep.job.sweep().trials()) {
    unfinished += Made(t) && !IsTerminal(t.state()) ? 1 : 0;
  }
  bool made = false;
  for (int i = 0; i < sweep.job.sweep().trials_size() && unfinished < rt.settings.max_parallel;
       ++i) {
    if (Made(sweep.job.sweep().trials(i)) || NotStarted(sweep.job.sweep().trials(i))) continue;
    const TrialValues& values = rt.plan[static_cast<size_t>(i)];
    StatusOr<std::string> id = Status::Internal("no trial made");
    auto spec = TrialSpec(sweep.job.spec(), values);
    if (spec.ok()) id = hooks_.submit(*spec, sweep.job, values, i);
    v1::TrialSummary* t = sweep.job.mutable_sweep()->mutable_trials(i);
    if (!id.ok()) {
      if (id.status().code() == StatusCode::kResourceExhausted ||
          id.status().code() == StatusCode::kUnavailable) {
        // Over its owner's quota now (or the store is down): tried again later.
        if (blocked_.insert(sweep_id).second) {
          spdlog::debug("sweep {}: trial {} waits: {}", sweep_id, i + 1, id.status().message());
        }
        break;
      }
      const Status& why = spec.ok() ? id.status() : spec.status();
      t->set_stopped_reason("not started: " + why.message());
      t->set_state(v1::FAILED);
      made = true;
      continue;
    }
    t->set_job_id(*id);
    const JobRecord* trial = table_.Find(*id);
    t->set_state(trial != nullptr ? trial->job.state() : v1::PENDING);
    rt.index[*id] = i;
    ++unfinished;
    made = true;
  }
  Recount(sweep.job, rt.settings);
  if (made) Changed(sweep);
  const v1::SweepStatus& status = sweep.job.sweep();
  const int total = status.trials_size();
  int made_count = 0;
  bool all_ended = true;
  for (const v1::TrialSummary& t : status.trials()) {
    made_count += Made(t) ? 1 : 0;
    all_ended = all_ended && Ended(t);
  }
  if (sweep.job.state() == v1::PENDING && made_count > 0) {
    const Status st = writer_.Transition(
        sweep, v1::RUNNING,
        "running its trials: " + std::to_string(made_count) + " of " + std::to_string(total) +
            " made (max_parallel " + std::to_string(rt.settings.max_parallel) + ")");
    if (!st.ok()) due_.insert(sweep_id);
  }
  if (!all_ended) return;
  const bool any = status.succeeded() + status.stopped() > 0;
  std::string reason = "every trial ended: " + std::to_string(status.succeeded()) + " succeeded, " +
                       std::to_string(status.stopped()) + " stopped early, " +
                       std::to_string(status.failed()) + " failed";
  if (!status.best_trial().empty()) {
    for (const v1::TrialSummary& t : status.trials()) {
      if (t.job_id() != status.best_trial()) continue;
      reason += "; best " + t.job_id() + " (" +
                DescribeTrial({t.parameters().begin(), t.parameters().end()}) +
                "): " + rt.settings.metric + " " + MetricText(t.best_metric()) + " at step " +
                std::to_string(t.best_step());
    }
  }
  const Status st = writer_.Transition(sweep, any ? v1::SUCCEEDED : v1::FAILED, reason);
  if (!st.ok()) due_.insert(sweep_id);  // tried again at the next tick
}

void SweepController::Recount(v1::Job& sweep, const SweepSettings& settings) {
  v1::SweepStatus* s = sweep.mutable_sweep();
  int waiting = 0, running = 0, succeeded = 0, failed = 0, stopped = 0;
  std::vector<std::optional<double>> best;
  best.reserve(static_cast<size_t>(s->trials_size()));
  for (const v1::TrialSummary& t : s->trials()) {
    best.push_back(t.has_best_metric() ? std::optional<double>(t.best_metric()) : std::nullopt);
    if (!Made(t)) {
      waiting += t.stopped_reason().empty() ? 1 : 0;
    } else if (StoppedEarly(t)) {
      stopped += 1;  // counted so even before its cancellation is written
    } else if (!IsTerminal(t.state())) {
      running += 1;
    } else if (t.state() == v1::SUCCEEDED) {
      succeeded += 1;
    } else {
      failed += 1;
    }
  }
  // A trial not started because its spec failed counts as failed.
  for (const v1::TrialSummary& t : s->trials()) {
    if (NotStarted(t) && t.state() == v1::FAILED) failed += 1;
  }
  s->set_waiting(waiting);
  s->set_running(running);
  s->set_succeeded(succeeded);
  s->set_failed(failed);
  s->set_stopped(stopped);
  const std::optional<size_t> at = BestOf(best, settings.maximize);
  s->set_best_trial(at ? s->trials(static_cast<int>(*at)).job_id() : "");
}

}  // namespace convoy
