#include "client/sweep.h"

#include <sstream>

#include "client/format.h"
#include "spec/sweep_spec.h"
#include "spec/sweep_spec_file.h"

namespace convoy {
namespace {

std::string Parameters(const google::protobuf::RepeatedPtrField<v1::TrialParameter>& params) {
  return DescribeTrial({params.begin(), params.end()});
}

std::string MetricName(const v1::Job& sweep) { return ResolveSweep(sweep.spec().sweep()).metric; }

}  // namespace

Status ApplySweepArgs(const SweepArgs& args, v1::JobSpec* spec) {
  if (args.params.empty() && args.max_parallel <= 0 && args.metric.empty()) return Status::Ok();
  v1::SweepSpec* sweep = spec->mutable_sweep();
  for (const std::string& flag : args.params) CONVOY_RETURN_IF_ERROR(AddSweepFlag(flag, sweep));
  if (args.max_parallel > 0) sweep->set_max_parallel(args.max_parallel);
  if (!args.metric.empty()) {
    const size_t colon = args.metric.rfind(':');
    sweep->set_metric(args.metric.substr(0, colon));
    if (colon != std::string::npos) {
      const std::string goal = args.metric.substr(colon + 1);
      if (goal != "max" && goal != "min") {
        return Status::InvalidArgument("--sweep-metric '" + args.metric.substr(0, 80) +
                                       "': expected NAME, NAME:max or NAME:min");
      }
      sweep->set_goal(goal);
    }
  }
  return Status::Ok();
}

Status CheckSweepTrials(const v1::JobSpec& spec) {
  if (!spec.has_sweep()) return Status::Ok();
  auto trials = ExpandSweep(spec);
  return trials.ok() ? Status::Ok() : trials.status();
}

std::string ListMessage(const v1::Job& job) {
  if (job.has_sweep()) {
    const v1::SweepStatus& s = job.sweep();
    const int total = s.trials_size();
    const int ended = s.succeeded() + s.failed() + s.stopped();
    std::string out = "sweep " + std::to_string(ended) + "/" + std::to_string(total) + " done";
    if (s.running() > 0) out += ", " + std::to_string(s.running()) + " running";
    if (s.stopped() > 0) out += ", " + std::to_string(s.stopped()) + " stopped early";
    if (s.failed() > 0) out += ", " + std::to_string(s.failed()) + " failed";
    for (const v1::TrialSummary& t : s.trials()) {
      if (!s.best_trial().empty() && t.job_id() == s.best_trial()) {
        out += "; best " + t.job_id() + " " + MetricName(job) + " " + MetricText(t.best_metric());
      }
    }
    return out;
  }
  if (!job.sweep_id().empty()) {
    return "trial of " + job.sweep_id() + ": " + Parameters(job.trial_parameters()) + "; " +
           job.message();
  }
  return job.message();
}

std::string FormatSweepStatus(const v1::Job& job) {
  if (!job.has_sweep()) return "";
  const v1::SweepSpec& spec = job.spec().sweep();
  const SweepSettings settings = ResolveSweep(spec);
  const v1::SweepStatus& s = job.sweep();
  std::ostringstream out;
  out << "sweep:      " << s.trials_size() << " trials (" << (settings.random ? "random" : "grid")
      << "), at most " << settings.max_parallel << " at once; " << settings.metric << ", "
      << (settings.maximize ? "more" : "less") << " is better";
  if (settings.asha) {
    out << "; ASHA from step " << settings.min_steps << ", factor " << settings.reduction_factor;
  }
  out << "\n  " << s.succeeded() << " succeeded, " << s.stopped() << " stopped early, "
      << s.failed() << " failed, " << s.running() << " running, " << s.waiting()
      << " not made yet\n";
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < static_cast<size_t>(s.trials_size()); ++i) {
    const v1::TrialSummary& t = s.trials(static_cast<int>(i));
    std::string state = t.job_id().empty() ? (t.stopped_reason().empty() ? "waiting" : "not made")
                                           : StateText(t.state());
    if (!t.job_id().empty() && !t.stopped_reason().empty()) state = "STOPPED (ASHA)";
    rows.push_back({std::to_string(i + 1), t.job_id().empty() ? "-" : t.job_id(),
                    Parameters(t.parameters()), state,
                    t.has_best_metric() ? MetricText(t.best_metric()) : "-",
                    t.has_best_metric() ? std::to_string(t.best_step()) : "-",
                    !s.best_trial().empty() && t.job_id() == s.best_trial() ? "best" : ""});
  }
  out << FormatTable(
      {"#", "TRIAL", "PARAMETERS", "STATE", "BEST " + settings.metric, "AT STEP", ""}, rows);
  if (!s.best_trial().empty()) {
    for (const v1::TrialSummary& t : s.trials()) {
      if (t.job_id() != s.best_trial()) continue;
      out << "best trial: " << t.job_id() << " (" << Parameters(t.parameters())
          << "): " << settings.metric << " " << MetricText(t.best_metric()) << " at step "
          << t.best_step() << "\n";
    }
  }
  bool header = false;
  for (const v1::TrialSummary& t : s.trials()) {
    if (t.stopped_reason().empty()) continue;
    if (!header) out << "stopped:\n";
    header = true;
    out << "  " << (t.job_id().empty() ? "(" + Parameters(t.parameters()) + ")" : t.job_id())
        << ": " << t.stopped_reason() << "\n";
  }
  return out.str();
}

}  // namespace convoy
