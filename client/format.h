// Text and JSON rendering for the `convoy` CLI. Pure functions (testable without a server).
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <map>
#include <string>

#include "convoy/v1/job.pb.h"

namespace convoy {

// CLI exit codes (documented in `convoy --help`).
enum ExitCode : int {
  kExitOk = 0,
  kExitJobNotSucceeded = 1,
  kExitUsage = 2,  // also an invalid spec
  kExitUnavailable = 3,
  kExitNotFound = 4,
  kExitRpcError = 5,
};

// The exit code for a failed RPC.
int ExitCodeFor(const grpc::Status& status);

// One JSON document with proto field names, enum names, and default values printed.
std::string ToJson(const google::protobuf::Message& msg);

// "3s", "4m05s", "2h10m".
std::string FormatDuration(int64_t ms);
// "14:03:07" in local time.
std::string FormatClock(int64_t unix_ms);
// "RUNNING" etc.
std::string StateText(v1::JobState state);

// `convoy list` table.
std::string FormatJobTable(const v1::ListJobsResponse& jobs, int64_t now_unix_ms);
// `convoy workers` table.
std::string FormatWorkerTable(const v1::ListWorkersResponse& workers, int64_t now_unix_ms);
// `convoy status JOB`: summary, placement, per-rank progress, root causes, events.
std::string FormatJobStatus(const v1::Job& job, int64_t now_unix_ms);
// A rank failure: "rank 1 on worker w2 (host) killed by SIGKILL" and its stderr lines.
std::string FormatFailure(const v1::RankFailure& failure, const std::string& indent);
// One progress line for a rank's latest record.
std::string FormatRankProgress(const v1::MetricRecord& m);
// The final test accuracy reported by the job's ranks (mean), or -1 when none reported it.
double FinalAccuracy(const v1::Job& job);

}  // namespace convoy
