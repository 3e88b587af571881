// The verbs of the `convoy` CLI, one function each. Each prints its result to stdout and
// its errors to stderr (prefixed "convoy: ") and returns the process exit code (format.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <grpcpp/channel.h>

#include "client/config.h"
#include "client/sweep.h"
#include "common/status.h"
#include "convoy/v1/job.grpc.pb.h"

namespace convoy {

// A channel to convoy-coordinator and its JobService stub, and how it was chosen (to
// explain a failure to connect).
struct CoordinatorClient {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::JobService::Stub> stub;
  std::string target;
  bool plaintext = false;  // plain text (else TLS)
  // Plain text only because no token and no CA were given (not --insecure).
  bool plaintext_by_default = false;
  bool has_ca = false;  // TLS verified against a CA given (else the system's roots)
  bool has_token = false;
  // A new channel to the same coordinator(s), with the same credentials: with several
  // coordinators, a retry dials afresh rather than wait out the old channel's backoff
  // towards the ones that refused (followers do not listen).
  std::function<std::shared_ptr<grpc::Channel>()> redial;
};

// The one place where the CLI's channel is made: TLS verified against the cluster CA with
// the token as `authorization: Bearer` on every call, or plain text when `config.insecure`
// (`insecure_flag`: --insecure asked for it; otherwise it was implied). `config.coordinator`
// is HOST:PORT (or any gRPC target URI). Connects lazily.
CoordinatorClient ConnectToCoordinator(const ClientConfig& config, bool insecure_flag = false);

// A failure to reach the coordinator that has a better explanation than "is it running?",
// as the exit code and the message (without "convoy: "); nullopt otherwise:
//  - TLS whose handshake failed on the coordinator's certificate: 6, "the coordinator's
//    certificate is not trusted" with what to pass (--ca, or login --ca-fingerprint);
//  - plain text chosen because no token or CA was given, to a coordinator that speaks TLS
//    (asked once, with a short unverified TLS call): 6, "not authenticated: no token";
//  - --insecure to a coordinator that speaks TLS: 2, "give its CA and a token instead";
//  - TLS to a coordinator that speaks plain text (an --insecure one): 2, "use --insecure".
std::optional<std::pair<int, std::string>> ExplainConnectFailure(const CoordinatorClient& c,
                                                                 const grpc::Status& st);

// The cluster CA's certificate, fetched without verifying the coordinator and then checked
// against `fingerprint` ("SHA256:..."): how `convoy login --ca-fingerprint` trusts a cluster.
StatusOr<std::string> FetchPinnedCa(const std::string& target, const std::string& fingerprint);

// `convoy login`: checks the credentials with one call, then writes them to `path`.
int LoginCommand(const ClientConfig& config, const std::string& path);

struct CommandOptions {
  bool json = false;  // --output json
  bool yaml = false;  // --output yaml
  // Structured output (json or yaml) rather than text.
  bool structured() const { return json || yaml; }
};

// What `convoy submit` was given.
struct SubmitArgs {
  // The spec file; "-" reads it from standard input; empty: the spec is built from
  // `command` (required then), `nodes`, `procs_per_node` and `name`.
  std::string file;
  // --code DIR: packed (common/code_archive.h), uploaded once by hash, named in the spec.
  std::string code_dir;
  int nodes = 0;                     // > 0: overrides the spec's (default 1 without a file)
  int procs_per_node = 0;            // > 0: overrides the spec's (default 1 without a file)
  std::string name;                  // overrides the spec's; without a file default "job"
  std::vector<std::string> command;  // what followed `--`
  // --set PATH=VALUE, in order: any spec field, typed and checked as in the file
  // (ParseJobSpec); applied before --nodes, --procs-per-node and --name, which win.
  std::vector<std::string> sets;
  // --after JOB[:WHEN], in order: appended to the spec's `after` (spec/dependency_spec.h).
  std::vector<std::string> after;
  // --sweep, --max-parallel, --sweep-metric (client/sweep.h): applied after the others.
  SweepArgs sweep;
};

// Builds the spec (file, stdin or flags), uploads --code, submits; prints the job's id.
int SubmitCommand(CoordinatorClient& c, const SubmitArgs& args, bool watch,
                  const CommandOptions& options);

// The spec `convoy submit` would send, before any --code upload. Usage errors as
// INVALID_ARGUMENT. `in` is standard input (for "-").
StatusOr<v1::JobSpec> BuildSubmitSpec(const SubmitArgs& args, std::istream& in);
// What `convoy list` was given. Without `limit` every page is fetched and printed as one
// list; with it, one page, and the token of the next one (stderr in text, the
// next_page_token field otherwise).
struct ListArgs {
  std::vector<std::string> states;  // --state, as typed (client/list_filters.h)
  std::string owner;
  std::string since;  // --since, as typed
  int limit = 0;      // 0: every page
  std::string page_token;
  bool trials = false;  // --trials: sweeps' trials too (ListJobsRequest.include_trials)
};
int ListCommand(CoordinatorClient& c, const ListArgs& args, const CommandOptions& options);
// The waiting jobs in the order they will start, with why each waits (`convoy queue`).
int QueueCommand(CoordinatorClient& c, const CommandOptions& options);
int StatusCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options);
int WatchCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options,
                 bool connected = false);
// Streams the log of `rank` to stdout as raw bytes; attempt < 0 means the latest.
int LogsCommand(CoordinatorClient& c, const std::string& job, int rank, int attempt, bool follow,
                int64_t tail_bytes);
// `cascade` (--cascade): also cancels the jobs of the same owner that wait on it, in turn.
int CancelCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options,
                  bool cascade = false);
// Deletes a finished job (DeleteJob); prints which workers remove its files. A job that is
// finished but whose ranks are still being stopped (just cancelled) is waited for, up to
// `wait_for_teardown_ms`, with a line on stderr, then deleted.
int DeleteCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options,
                  int64_t wait_for_teardown_ms = 60'000);
// `convoy workers`: every worker (paged in 1000s), or with `limit` one page from
// `page_token`.
int WorkersCommand(CoordinatorClient& c, int limit, const std::string& page_token,
                   const CommandOptions& options);
// Drains (`drain`) or undrains a worker (admins); prints the worker's new line. With `now`
// the jobs running there are preempted (they checkpoint, stop and wait to run elsewhere).
int DrainCommand(CoordinatorClient& c, const std::string& worker, bool drain, bool now,
                 const CommandOptions& options);
// `convoy worker forget WORKER` (admins): removes a LOST worker's record for good; prints
// what was forgotten and which deleted jobs' files stay on its disk.
int ForgetWorkerCommand(CoordinatorClient& c, const std::string& worker,
                        const CommandOptions& options);

// `convoy plot JOB`: the job's metric history (GetJobMetrics) as a terminal chart, or with
// `output` "csv" / "json" the series as text. `metric`: loss, samples_per_second or
// accuracy; `rank` < 0: every rank. The chart is as wide as the terminal (80 when stdout is
// not one) and coloured on a terminal.
int PlotCommand(CoordinatorClient& c, const std::string& job, const std::string& metric, int rank,
                const std::string& output);

// `convoy top`: every job that is not finished (FormatTop), redrawn in place every
// `interval_ms` until interrupted (Ctrl-C); with `once`, printed once without escape codes.
int TopCommand(CoordinatorClient& c, bool once, int interval_ms);

}  // namespace convoy
