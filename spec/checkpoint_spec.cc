#include "spec/checkpoint_spec.h"

#include <algorithm>
#include <cmath>

#include "common/strings.h"

namespace convoy {
namespace {

// Whether `a` ranks before `b` as the better checkpoint (both carry the metric): the better
// value, then the newer.
bool Better(double a, double b, bool max, int64_t a_step, int64_t a_order, int64_t b_step,
            int64_t b_order) {
  if (a != b) return max ? a > b : a < b;
  if (a_step != b_step) return a_step > b_step;
  return a_order > b_order;
}

}  // namespace

bool HasCheckpointPolicy(const v1::JobSpec& spec) {
  return spec.has_checkpoint() &&
         (spec.checkpoint().keep_last() > 0 || spec.checkpoint().keep_best().count() > 0);
}

bool GoalIsMax(const v1::KeepBest& keep_best) { return keep_best.goal() != kGoalMin; }

bool ResumesBest(const v1::JobSpec& spec) { return spec.resume_checkpoint() == kResumeBest; }

std::vector<SpecProblem> FindCheckpointSpecProblems(const v1::JobSpec& spec) {
  std::vector<SpecProblem> out;
  const auto range = [&out](const std::string& field, int value) {
    if (value < 0 || value > kMaxCheckpointsKept) {
      out.push_back({field, "must be between 0 and " + std::to_string(kMaxCheckpointsKept) +
                                ", got " + std::to_string(value)});
    }
  };
  if (spec.has_checkpoint()) {
    const v1::CheckpointPolicy& c = spec.checkpoint();
    const v1::KeepBest& best = c.keep_best();
    range("checkpoint.keep_last", c.keep_last());
    range("checkpoint.keep_best.count", best.count());
    // keep_best is given when any of its fields is: then it needs a metric and a count.
    const bool best_given = !best.metric().empty() || !best.goal().empty() || best.count() != 0;
    if (best_given && best.metric().empty()) {
      out.push_back({"checkpoint.keep_best.metric",
                     "missing (the value checkpoints are ranked by, e.g. test_accuracy)"});
    } else if (!best.metric().empty() && !IsMetricName(best.metric(), kMaxCheckpointMetricBytes)) {
      out.push_back({"checkpoint.keep_best.metric",
                     QuoteForMessage(best.metric()) + " is not a metric name (1-" +
                         std::to_string(kMaxCheckpointMetricBytes) + " of [A-Za-z0-9_.-])"});
    }
    if (!best.goal().empty() && best.goal() != kGoalMax && best.goal() != kGoalMin) {
      out.push_back(
          {"checkpoint.keep_best.goal", "must be max or min, got " + QuoteForMessage(best.goal())});
    }
    if (best_given && best.count() == 0) {
      out.push_back({"checkpoint.keep_best.count",
                     "must be at least 1 (how many of the best to keep) when keep_best is given"});
    }
    if (c.keep_last() == 0 && !best_given) {
      out.push_back({"checkpoint", "keeps nothing: give keep_last (at least 1) or keep_best"});
    }
  }
  const std::string& resume = spec.resume_checkpoint();
  if (!resume.empty()) {
    if (resume != kResumeLatest && resume != kResumeBest) {
      out.push_back(
          {"resume_checkpoint", "must be latest or best, got " + QuoteForMessage(resume)});
    } else if (!IsJobIdLike(spec.resume_from())) {
      out.push_back(
          {"resume_checkpoint",
           "needs resume_from naming a job (j-000004), whose checkpoints it chooses from"});
    }
  }
  return out;
}

std::map<size_t, std::vector<std::string>> ApplyCheckpointPolicy(
    const v1::CheckpointPolicy& policy, const std::vector<CheckpointCandidate>& all) {
  std::map<size_t, std::vector<std::string>> kept;
  if (all.empty()) return kept;
  std::vector<size_t> newest(all.size());
  for (size_t i = 0; i < all.size(); ++i) newest[i] = i;
  std::sort(newest.begin(), newest.end(), [&all](size_t a, size_t b) {
    if (all[a].step != all[b].step) return all[a].step > all[b].step;
    return all[a].order > all[b].order;
  });
  const size_t last = std::max<size_t>(1, static_cast<size_t>(std::max(0, policy.keep_last())));
  for (size_t i = 0; i < newest.size() && i < last; ++i) kept[newest[i]].push_back(kKeptAsLast);
  const v1::KeepBest& kb = policy.keep_best();
  if (kb.count() > 0 && !kb.metric().empty()) {
    std::vector<size_t> ranked;
    for (size_t i = 0; i < all.size(); ++i) {
      auto it = all[i].metrics.find(kb.metric());
      if (it != all[i].metrics.end() && std::isfinite(it->second)) ranked.push_back(i);
    }
    const bool max = GoalIsMax(kb);
    std::sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
      return Better(all[a].metrics.at(kb.metric()), all[b].metrics.at(kb.metric()), max,
                    all[a].step, all[a].order, all[b].step, all[b].order);
    });
    for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(kb.count()); ++i) {
      kept[ranked[i]].push_back(kKeptAsBest);
    }
  }
  return kept;
}

std::optional<size_t> BestCheckpoint(
    const v1::KeepBest& keep_best,
    const google::protobuf::RepeatedPtrField<v1::CheckpointInfo>& kept) {
  std::optional<size_t> best;
  const bool max = GoalIsMax(keep_best);
  for (int i = 0; i < kept.size(); ++i) {
    auto it = kept[i].metrics().find(keep_best.metric());
    if (keep_best.metric().empty() || it == kept[i].metrics().end() || !std::isfinite(it->second)) {
      continue;
    }
    if (!best) {
      best = static_cast<size_t>(i);
      continue;
    }
    const v1::CheckpointInfo& b = kept[static_cast<int>(*best)];
    // Among equal steps the one saved later is newer.
    if (Better(it->second, b.metrics().at(keep_best.metric()), max, kept[i].step(),
               kept[i].saved_unix_ms(), b.step(), b.saved_unix_ms())) {
      best = static_cast<size_t>(i);
    }
  }
  return best;
}

}  // namespace convoy
