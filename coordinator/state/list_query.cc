#include "coordinator/state/list_query.h"

#include "common/util.h"

namespace convoy {
namespace {

constexpr const char kJobTokenPrefix[] = "jobs-after:";
constexpr const char kJobNewestTokenPrefix[] = "jobs-before:";
constexpr const char kWorkerTokenPrefix[] = "workers-after:";

Status CheckLimit(int32_t limit, int* out) {
  if (limit < 0 || limit > kMaxPageSize) {
    return Status::InvalidArgument("limit: " + std::to_string(limit) + " is not between 0 and " +
                                   std::to_string(kMaxPageSize));
  }
  *out = limit == 0 ? kDefaultPageSize : limit;
  return Status::Ok();
}

// The name after `prefix` in `token`, or an error naming page_token.
StatusOr<std::string> ParseToken(const std::string& token, const std::string& prefix) {
  if (token.empty()) return std::string();
  if (token.compare(0, prefix.size(), prefix) != 0 || !IsValidName(token.substr(prefix.size()))) {
    return Status::InvalidArgument(
        "page_token: malformed (pass the next_page_token of the previous page as it is)");
  }
  return token.substr(prefix.size());
}

}  // namespace

bool JobQuery::Matches(const v1::Job& job) const {
  if (!states.empty() && states.count(job.state()) == 0) return false;
  if (!owner.empty() && job.owner() != owner) return false;
  if (!sweep_id.empty() && job.sweep_id() != sweep_id) return false;
  if (sweep_id.empty() && !include_trials && !job.sweep_id().empty()) return false;
  return job.created_unix_ms() >= since_unix_ms;
}

StatusOr<JobQuery> ParseJobQuery(const v1::ListJobsRequest& req) {
  JobQuery q;
  q.full = req.full();
  for (int s : req.states()) {
    if (s == v1::JOB_STATE_UNSPECIFIED || !v1::JobState_IsValid(s)) {
      return Status::InvalidArgument("states: unknown state " + std::to_string(s));
    }
    q.states.insert(static_cast<v1::JobState>(s));
  }
  q.owner = req.owner();
  if (req.since_unix_ms() < 0) {
    return Status::InvalidArgument("since_unix_ms: must not be negative");
  }
  q.since_unix_ms = req.since_unix_ms();
  CONVOY_RETURN_IF_ERROR(CheckLimit(req.limit(), &q.limit));
  q.newest_first = req.newest_first();
  q.include_trials = req.include_trials() || !req.sweep_id().empty();
  if (!req.sweep_id().empty() && !IsValidName(req.sweep_id())) {
    return Status::InvalidArgument("sweep_id: '" + req.sweep_id().substr(0, 40) +
                                   "' is not a job id");
  }
  q.sweep_id = req.sweep_id();
  auto after =
      ParseToken(req.page_token(), q.newest_first ? kJobNewestTokenPrefix : kJobTokenPrefix);
  if (!after.ok()) return after.status();
  q.after = *after;
  return q;
}

StatusOr<WorkerQuery> ParseWorkerQuery(const v1::ListWorkersRequest& req) {
  WorkerQuery q;
  CONVOY_RETURN_IF_ERROR(CheckLimit(req.limit(), &q.limit));
  auto after = ParseToken(req.page_token(), kWorkerTokenPrefix);
  if (!after.ok()) return after.status();
  q.after = *after;
  return q;
}

std::string JobPageToken(const std::string& last_job_id, bool newest_first) {
  return (newest_first ? kJobNewestTokenPrefix : kJobTokenPrefix) + last_job_id;
}

std::string WorkerPageToken(const std::string& last_worker) {
  return kWorkerTokenPrefix + last_worker;
}

}  // namespace convoy
