#include "spec/dependency_spec.h"

#include <map>

namespace convoy {

v1::DependencyCondition ConditionOf(const v1::JobDependency& dependency) {
  return dependency.when() == v1::DEPENDENCY_CONDITION_UNSPECIFIED ? v1::DEPENDENCY_SUCCEEDED
                                                                   : dependency.when();
}

std::string ConditionWord(v1::DependencyCondition when) {
  switch (when) {
    case v1::DEPENDENCY_FAILED:
      return "failed";
    case v1::DEPENDENCY_ENDED:
      return "ended";
    default:
      return "succeeded";
  }
}

std::optional<v1::DependencyCondition> ParseConditionWord(const std::string& word) {
  if (word == "succeeded") return v1::DEPENDENCY_SUCCEEDED;
  if (word == "failed") return v1::DEPENDENCY_FAILED;
  if (word == "ended") return v1::DEPENDENCY_ENDED;
  return std::nullopt;
}

std::string WaitText(const v1::JobDependency& dependency) {
  switch (ConditionOf(dependency)) {
    case v1::DEPENDENCY_FAILED:
      return dependency.job_id() + " to fail";
    case v1::DEPENDENCY_ENDED:
      return dependency.job_id() + " to end";
    default:
      return dependency.job_id() + " to succeed";
  }
}

std::vector<SpecProblem> FindDependencySpecProblems(const v1::JobSpec& spec) {
  std::vector<SpecProblem> out;
  if (spec.after_size() > kMaxDependencies) {
    out.push_back({"after", "at most " + std::to_string(kMaxDependencies) + " jobs, got " +
                                std::to_string(spec.after_size())});
  }
  std::map<std::string, int> seen;  // job id -> its first index
  for (int i = 0; i < spec.after_size(); ++i) {
    const v1::JobDependency& d = spec.after(i);
    const std::string field = "after[" + std::to_string(i) + "]";
    if (d.job_id().empty()) {
      out.push_back({field + ".job", "missing (the id of a job to wait for, e.g. j-000004)"});
    } else if (!IsJobIdLike(d.job_id()) || d.job_id().size() > 22) {
      out.push_back({field + ".job", "'" + d.job_id().substr(0, 40) +
                                         "' is not a job id (j- and digits, e.g. j-000004)"});
    } else if (auto [it, fresh] = seen.emplace(d.job_id(), i); !fresh) {
      out.push_back({field + ".job", d.job_id() + " is named twice (after[" +
                                         std::to_string(it->second) + "] too)"});
    }
    if (!v1::DependencyCondition_IsValid(d.when())) {
      out.push_back({field + ".when", "must be succeeded, failed or ended"});
    }
  }
  return out;
}

Status AppendAfterFlags(const std::vector<std::string>& values, v1::JobSpec* spec) {
  for (const std::string& value : values) {
    const size_t colon = value.find(':');
    v1::JobDependency d;
    d.set_job_id(value.substr(0, colon));
    d.set_when(v1::DEPENDENCY_SUCCEEDED);
    if (colon != std::string::npos) {
      const std::optional<v1::DependencyCondition> when =
          ParseConditionWord(value.substr(colon + 1));
      if (!when) {
        return Status::InvalidArgument("--after " + value.substr(0, 80) +
                                       ": expected JOB or JOB:WHEN, WHEN one of succeeded, "
                                       "failed, ended (e.g. --after j-000004:failed)");
      }
      d.set_when(*when);
    }
    if (d.job_id().empty()) {
      return Status::InvalidArgument("--after " + value.substr(0, 80) +
                                     ": expected a job id before the ':' (e.g. j-000004)");
    }
    *spec->add_after() = std::move(d);
  }
  return Status::Ok();
}

}  // namespace convoy
