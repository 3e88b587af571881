// Text and JSON rendering for the `convoy` CLI, and its exit codes. Pure functions of their
// arguments ("now" is passed in), so they are tested without a server or a clock.
#pragma once

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <string>
#include <vector>

#include "convoy/v1/job.pb.h"

namespace convoy {

// CLI exit codes; kExitCodesHelp documents them in `convoy --help`. Scripts rely on them.
enum ExitCode : int {
  kExitOk = 0,
  kExitJobNotSucceeded = 1,   // the watched job ended FAILED or CANCELLED
  kExitUsage = 2,             // bad command line or invalid spec (the message names the field)
  kExitUnavailable = 3,       // the coordinator cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED)
  kExitNotFound = 4,          // no such job
  kExitRpcError = 5,          // any other RPC error
  kExitUnauthenticated = 6,   // no, malformed, unknown, expired or revoked credentials
  kExitPermissionDenied = 7,  // valid credentials without the right (the message names it)
};
extern const char* const kExitCodesHelp;

// The exit code for the status of a finished RPC (kExitOk for OK).
int ExitCodeFor(const grpc::Status& status);

// One JSON document on one line: proto field names, enums by name ("SUCCEEDED"), fields
// with default values printed.
std::string ToJson(const google::protobuf::Message& msg);
// The same document as YAML, in block style (no trailing newline): proto field names, enums
// by name, 64-bit integers quoted as in JSON.
std::string ToYaml(const google::protobuf::Message& msg);
// JSON text (one value) as block-style YAML; the text itself when it is not JSON.
std::string JsonToYaml(const std::string& json);

// A duration, coarsely: "850ms" below a second, then "3s", "4m05s", "2h10m", "3d04h".
// Zero and negative durations (clock skew) print as "0s".
std::string FormatDuration(int64_t ms);
// How long ago `unix_ms` was: "4m05s ago"; "-" when unix_ms is 0 (never).
std::string FormatAge(int64_t unix_ms, int64_t now_unix_ms);
// "14:03:07", local time.
std::string FormatClock(int64_t unix_ms);
// "RUNNING"; "-" for JOB_STATE_UNSPECIFIED.
std::string StateText(v1::JobState state);
// SUCCEEDED, FAILED or CANCELLED: nothing follows.
bool IsTerminalState(v1::JobState state);
// `value` through printf's `format` (one double conversion).
std::string Printf(const char* format, double value);
// "READY", "UNREACHABLE", "LOST".
std::string WorkerStateText(v1::WorkerState state);
// "2×4" (nodes × processes per node), "2×gpu".
std::string ShapeText(const v1::JobSpec& spec);
// "exited with code 1", "killed by SIGKILL (sent by the worker)", "" when the exit says
// nothing (a failure that is not a process exit: a lost worker, a hang).
std::string ExitText(const v1::ProcessExit& exit);

// Columns padded to their widest cell (counting UTF-8 characters); the last column is not
// padded. Every row has as many cells as the header.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

// `convoy list`: ID NAME STATE ATTEMPT NODES×PROCS AGE MESSAGE.
std::string FormatJobTable(const v1::ListJobsResponse& jobs, int64_t now_unix_ms);
// The waiting jobs of `jobs` (those with a queue position), in the order they will start, each
// with why it waits and its estimated start when there is one (`convoy queue`).
std::string FormatQueue(const v1::ListJobsResponse& jobs, int64_t now_unix_ms);

// `convoy workers`: NAME STATE SLOTS CORES MEMORY GPUS LABELS HEARTBEAT JOBS, each resource
// as used/total ("1/2", "4/16", "30/64 GiB", "2/4 H100"); "-" where a worker has none or
// does not say. Labels longer than 24 characters are cut ("…") and jobs beyond two counted
// ("+3"): `-o json` has them all. About 85 columns for a typical worker.
std::string FormatWorkerTable(const v1::ListWorkersResponse& workers, int64_t now_unix_ms);
// "64 GiB", "1.5 GiB", "512 MiB", "100 B": binary units, one decimal below 100 when not whole.
std::string FormatBytes(int64_t bytes);
// "30/64 GiB", "1.5/23.4 GiB": both in the unit of `total`; "-" when the total is unknown (0).
std::string FormatUsedOfBytes(int64_t used, int64_t total);
// What a GPU model is called in a table: "H100" for "NVIDIA H100 80GB HBM3", "A100-SXM4-40GB",
// "RTX A6000"; "" for "".
std::string GpuModelShort(const std::string& model);
// `convoy status JOB`: summary, placement of the current attempt, the latest metrics per
// rank, the root cause of each failed attempt, and the event history.
std::string FormatJobStatus(const v1::Job& job, int64_t now_unix_ms);
// A root-cause failure: its reason, then FormatFailureDetails indented by two more spaces.
std::string FormatFailure(const v1::RankFailure& failure, const std::string& indent);
// "rank R (local L), worker W, host H: <exit>", then the last lines of its stderr; every line
// starts with `indent`.
std::string FormatFailureDetails(const v1::RankFailure& failure, const std::string& indent);
// "14:03:07  RUNNING -> RESTARTING  rank 1 on worker w2 ... exited with code 1".
std::string FormatEvent(const v1::JobEvent& event);
// "epoch 1  step 120/1875  loss 0.4321  2100 samples/s  test acc 87.12%": the known fields
// of a rank's latest record, those it lacks left out.
std::string FormatRankProgress(const v1::MetricRecord& m);
// "87.12%" for 0.8712.
std::string FormatPercent(double fraction);

// The test accuracy of a job: the mean of values["test_accuracy"] over the records of its
// current attempt that carry one (the trainer all-reduces it, so the ranks agree). -1 when
// no rank reported one.
double TestAccuracy(const std::vector<v1::MetricRecord>& records, int attempt);
double TestAccuracy(const v1::Job& job);

}  // namespace convoy
