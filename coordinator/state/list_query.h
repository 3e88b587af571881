// What ListJobs and ListWorkers may ask for (filters and paging), checked apart from the RPC
// glue: free functions that return an error naming the field, and the order pages follow.
//
// Paging is by cursor, never by offset: a page token names the last job id (or worker
// name) returned, and the next page starts after it. Ids are sequential, so a job
// submitted between two pages comes after every job already paged through (it appears on a
// later page, once), and a job deleted between pages shifts nothing.
//
// Threading: free functions without shared state; any thread.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "common/status.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

// Page sizes: the default when a request gives none, and the most one page may hold (a
// page of 1000 summaries is a few hundred kilobytes).
constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;

// Orders job ids by submission: a shorter id is older ("j-999999" before "j-1000000"),
// ids of one length compare as strings ("j-000009" before "j-000010").
struct JobIdLess {
  bool operator()(const std::string& a, const std::string& b) const {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  }
};

// A checked ListJobsRequest.
struct JobQuery {
  bool full = false;
  std::set<v1::JobState> states;  // empty: every state
  std::string owner;              // empty: every owner
  int64_t since_unix_ms = 0;      // jobs created at or after it; 0: all
  int limit = kDefaultPageSize;
  // Oldest first: the job id the page starts after (empty: from the oldest). Newest first:
  // the job id the page starts before (empty: from the newest).
  std::string after;
  bool newest_first = false;
  // A sweep's trials (Job.sweep_id set) are left out unless include_trials; with sweep_id,
  // only that sweep's trials are listed (README "Sweeps").
  bool include_trials = false;
  std::string sweep_id;

  // Whether `job` passes the filters (states, owner, since, trials).
  bool Matches(const v1::Job& job) const;
};

// INVALID_ARGUMENT naming the field: "states: unknown state 42", "limit: -1 is not between
// 0 and 1000", "since_unix_ms: must not be negative", "page_token: malformed".
StatusOr<JobQuery> ParseJobQuery(const v1::ListJobsRequest& req);

// A checked ListWorkersRequest.
struct WorkerQuery {
  int limit = kDefaultPageSize;
  std::string after;  // the worker name the page starts after; empty: from the first
};
StatusOr<WorkerQuery> ParseWorkerQuery(const v1::ListWorkersRequest& req);

// The next_page_token after a page whose last entry is `last_job_id` / `last_worker`
// ("jobs-after:ID", or "jobs-before:ID" for a page newest first).
std::string JobPageToken(const std::string& last_job_id, bool newest_first = false);
std::string WorkerPageToken(const std::string& last_worker);

}  // namespace convoy
