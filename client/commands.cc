#include "client/commands.h"

#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <grpcpp/grpcpp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "client/command_support.h"
#include "client/dependencies.h"
#include "client/format.h"
#include "client/list_filters.h"
#include "client/plot.h"
#include "client/progress.h"
#include "client/top.h"
#include "client/watch.h"
#include "common/code_archive.h"
#include "common/coordinator_list.h"
#include "common/pki.h"
#include "common/util.h"
#include "convoy/v1/auth.grpc.pb.h"
#include "spec/dependency_spec.h"
#include "spec/job_spec.h"
#include "spec/job_spec_validation.h"

namespace convoy {

StatusOr<v1::JobSpec> BuildSubmitSpec(const SubmitArgs& args, std::istream& in) {
  v1::JobSpec spec;
  if (args.file == "-") {
    std::ostringstream text;
    text << in.rdbuf();
    auto parsed = ParseJobSpec(text.str(), "<stdin>", args.sets);
    if (!parsed.ok()) return parsed.status();
    spec = std::move(*parsed);
  } else if (!args.file.empty()) {
    auto loaded = LoadJobSpecFile(args.file, args.sets);
    if (!loaded.ok()) return loaded.status();
    spec = std::move(*loaded);
  } else if (args.command.empty()) {
    return Status::InvalidArgument(
        "submit: give a spec file, '-' for standard input, or a command after '--' "
        "(convoy submit --nodes 2 -- python3 train.py)");
  } else {
    spec.set_name("job");
    spec.set_nodes(1);
    spec.set_procs_per_node(1);
  }
  if (!args.command.empty()) {
    if (!args.file.empty()) {
      return Status::InvalidArgument("submit: a command after '--' or a spec file, not both");
    }
    for (const std::string& a : args.command) spec.add_command(a);
    if (!args.sets.empty()) {
      auto overridden = OverrideJobSpec(spec, args.sets, "submit");
      if (!overridden.ok()) return overridden.status();
      spec = std::move(*overridden);
    }
  }
  if (!args.name.empty()) spec.set_name(args.name);
  if (args.nodes > 0) spec.set_nodes(args.nodes);
  if (args.procs_per_node > 0) {
    spec.set_procs_per_node(args.procs_per_node);
    spec.set_procs_per_node_gpu(false);
  }
  Status after = AppendAfterFlags(args.after, &spec);
  if (!after.ok()) return after;
  CONVOY_RETURN_IF_ERROR(ApplySweepArgs(args.sweep, &spec));
  Status valid = ValidateJobSpec(spec);
  if (!valid.ok()) return valid;
  CONVOY_RETURN_IF_ERROR(CheckSweepTrials(spec));
  return spec;
}

namespace {

// Packs `dir` and stores it on the coordinator (UploadCode, 4 MiB a call), setting `sha_out` to
// its hash. Returns the exit code: a directory that cannot be packed is a usage error; a
// refused call exits as any other RPC (7 for a viewer, 6 for a bad token).
int UploadCodeDir(CoordinatorClient& c, const std::string& dir, std::string* sha_out) {
  auto packed = PackCodeDirectory(dir);
  if (!packed.ok()) {
    std::cerr << "convoy: " << packed.status().message() << "\n";
    return packed.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitRpcError;
  }
  const std::string sha = Sha256Hex(packed->archive);
  const int64_t total = static_cast<int64_t>(packed->archive.size());
  std::cerr << "convoy: --code " << dir << ": " << packed->files << " file(s), " << packed->bytes
            << " bytes, " << total << " compressed, sha256 " << sha.substr(0, 12) << "\n";
  int64_t offset = 0;
  while (offset < total) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::UploadCodeRequest req;
    req.set_sha256(sha);
    req.set_total_size(total);
    req.set_offset(offset);
    req.set_data(
        packed->archive.substr(static_cast<size_t>(offset), static_cast<size_t>(kCodeChunkBytes)));
    v1::UploadCodeResponse resp;
    grpc::Status st = c.stub->UploadCode(&ctx, req, &resp);
    if (!st.ok()) return RpcFailed(c, st, "upload " + dir);
    if (resp.complete()) {
      *sha_out = sha;
      return kExitOk;
    }
    if (resp.received() <= offset) {
      std::cerr << "convoy: upload " << dir << ": the coordinator made no progress\n";
      return kExitRpcError;
    }
    offset = resp.received();
  }
  std::cerr << "convoy: upload " << dir << ": the coordinator did not say complete\n";
  return kExitRpcError;
}

}  // namespace

int SubmitCommand(CoordinatorClient& c, const SubmitArgs& args, bool watch,
                  const CommandOptions& options) {
  auto spec = BuildSubmitSpec(args, std::cin);
  if (!spec.ok()) {
    std::cerr << "convoy: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  const std::string what = args.file.empty() ? "submit" : "submit " + args.file;
  if (!args.code_dir.empty()) {
    std::string sha;
    const int uploaded = UploadCodeDir(c, args.code_dir, &sha);
    if (uploaded != kExitOk) return uploaded;
    spec->set_code_sha256(sha);
  }
  v1::SubmitJobRequest req;
  *req.mutable_spec() = std::move(*spec);
  // One id for every try: a submit whose reply was lost (a coordinator failover, a timeout)
  // is retried without making a second job.
  req.set_request_id("submit-" + RandomHexId());
  v1::SubmitJobResponse resp;
  grpc::Status st;
  // While no coordinator serves (the leader just died, a follower is taking over), try again
  // for up to kRpcDeadlineS in all.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(kRpcDeadlineS);
  for (int wait_ms = 250;; wait_ms = std::min(wait_ms * 2, 2000)) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    st = c.stub->SubmitJob(&ctx, req, &resp);
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE ||
        std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms) > give_up) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    if (c.redial && c.target.find(',') != std::string::npos) {
      c.channel = c.redial();
      c.stub = v1::JobService::NewStub(c.channel);
    }
  }
  if (!st.ok()) return RpcFailed(c, st, what);
  // With --watch and JSON, this is the first of the lines.
  std::cout << (options.structured()
                    ? (watch && options.yaml ? "---\n" : "") + Render(resp, options)
                    : resp.job_id())
            << "\n"
            << std::flush;
  if (!watch) return kExitOk;
  return WatchCommand(c, resp.job_id(), options, /*connected=*/true);
}

int ListCommand(CoordinatorClient& c, const ListArgs& args, const CommandOptions& options) {
  v1::ListJobsRequest req;
  auto states = ParseStateFilter(args.states);
  if (!states.ok()) {
    std::cerr << "convoy: list: " << states.status().message() << "\n";
    return kExitUsage;
  }
  for (v1::JobState s : *states) req.add_states(s);
  req.set_owner(args.owner);
  if (!args.since.empty()) {
    auto since = ParseSince(args.since, NowMs());
    if (!since.ok()) {
      std::cerr << "convoy: list: " << since.status().message() << "\n";
      return kExitUsage;
    }
    req.set_since_unix_ms(*since);
  }
  req.set_page_token(args.page_token);
  req.set_include_trials(args.trials);
  v1::ListJobsResponse resp;
  grpc::Status st;
  if (args.limit > 0) {
    req.set_limit(args.limit);
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    st = c.stub->ListJobs(&ctx, req, &resp);
  } else {
    st = ListAllJobs(c, req, &resp);
  }
  if (!st.ok()) return RpcFailed(c, st, "list");
  std::cout << (options.structured() ? Render(resp, options) + "\n"
                                     : FormatJobTable(resp, NowMs()));
  if (!options.structured() && !resp.next_page_token().empty()) {
    std::cerr << "convoy: more jobs follow: add --page-token " << resp.next_page_token() << "\n";
  }
  return kExitOk;
}

int QueueCommand(CoordinatorClient& c, const CommandOptions& options) {
  v1::ListJobsRequest req;  // the jobs that wait: PENDING, and RESTARTING between attempts
  req.add_states(v1::PENDING);
  req.add_states(v1::RESTARTING);
  v1::ListJobsResponse resp;
  grpc::Status st = ListAllJobs(c, req, &resp);
  if (!st.ok()) return RpcFailed(c, st, "queue");
  // A job of those states without a queue position is not in the queue yet: its previous
  // attempt's ranks are still stopping (a restart's teardown, a preemption's checkpoint).
  v1::ListJobsResponse waiting;
  // Jobs that wait for others (`after`) have no place yet either: listed after the queue.
  for (const v1::Job& j : resp.jobs()) {
    if (ShownInQueue(j)) *waiting.add_jobs() = j;
  }
  std::sort(waiting.mutable_jobs()->begin(), waiting.mutable_jobs()->end(), QueueOrderLess);
  std::cout << (options.structured() ? Render(waiting, options) + "\n"
                                     : FormatQueue(waiting, NowMs()));
  return kExitOk;
}

int StatusCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::GetJobRequest req;
  req.set_job_id(job);
  v1::Job resp;
  grpc::Status st = c.stub->GetJob(&ctx, req, &resp);
  if (!st.ok()) return RpcFailed(c, st, "status " + job);
  if (options.structured()) {
    std::cout << Render(resp, options) << "\n";
    return kExitOk;
  }
  std::string text = FormatJobStatus(resp, NowMs());
  if (const std::string trials = FormatSweepStatus(resp); !trials.empty()) {
    const size_t at = text.find("\nevents:\n");  // a sweep's trials, before its events
    text.insert(at == std::string::npos ? text.size() : at + 1, trials);
  }
  // The history section goes before the failures and events; a coordinator without
  // GetJobMetrics (older) or a refusal just leaves it out.
  v1::JobMetrics metrics;
  if (GetMetrics(c, job, &metrics).ok()) {
    const std::string history = FormatHistorySummary(metrics);
    size_t at = text.find("\nfailures (");
    if (at == std::string::npos) at = text.find("\nevents:\n");
    if (!history.empty() && at != std::string::npos) text.insert(at + 1, history);
  }
  std::cout << text;
  return kExitOk;
}

int WatchCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options,
                 bool connected) {
  ProgressView view(std::cout, ViewOptions(options));
  return WatchJob(c.stub.get(), c.channel.get(), job, view, connected, std::cerr,
                  [&c](const grpc::Status& st) { return ExplainConnectFailure(c, st); });
}

int LogsCommand(CoordinatorClient& c, const std::string& job, int rank, int attempt, bool follow,
                int64_t tail_bytes) {
  grpc::ClientContext ctx;
  v1::GetLogsRequest req;
  req.set_job_id(job);
  req.set_rank(rank);
  req.set_attempt(attempt);
  req.set_has_attempt(attempt >= 0);
  req.set_follow(follow);
  req.set_tail_bytes(tail_bytes);
  auto reader = c.stub->GetLogs(&ctx, req);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    std::fwrite(chunk.data().data(), 1, chunk.data().size(), stdout);
    std::fflush(stdout);
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) return RpcFailed(c, st, "logs " + job);
  return kExitOk;
}

int CancelCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options,
                  bool cascade) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::CancelJobRequest req;
  req.set_job_id(job);
  req.set_cascade(cascade);
  v1::Job resp;
  grpc::Status st = c.stub->CancelJob(&ctx, req, &resp);
  if (!st.ok()) return RpcFailed(c, st, "cancel " + job);
  // With --cascade the message names the jobs cancelled with it.
  std::cout << (options.structured() ? Render(resp, options)
                                     : resp.id() + " " + StateText(resp.state()) +
                                           (cascade ? ": " + resp.message() : ""))
            << "\n";
  return kExitOk;
}

int DeleteCommand(CoordinatorClient& c, const std::string& job, const CommandOptions& options,
                  int64_t wait_for_teardown_ms) {
  const auto start = std::chrono::steady_clock::now();
  auto waited_ms = [&start] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  int64_t next_note_ms = 0;  // when to say again that it still waits
  v1::DeleteJobResponse resp;
  for (;;) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::DeleteJobRequest req;
    req.set_job_id(job);
    grpc::Status st = c.stub->DeleteJob(&ctx, req, &resp);
    if (st.ok()) break;
    if (st.error_code() != grpc::StatusCode::FAILED_PRECONDITION ||
        waited_ms() >= wait_for_teardown_ms) {
      return RpcFailed(c, st, "delete " + job);
    }
    // Refused although finished: its last attempt's ranks are still being stopped (a cancel
    // a moment ago). Wait for them; a job that is not finished is refused at once.
    grpc::ClientContext get_ctx;
    SetDeadline(get_ctx);
    v1::GetJobRequest get;
    get.set_job_id(job);
    v1::Job state;
    if (!c.stub->GetJob(&get_ctx, get, &state).ok() || !IsTerminalState(state.state())) {
      return RpcFailed(c, st, "delete " + job);
    }
    if (waited_ms() >= next_note_ms) {
      std::cerr << "convoy: delete " << job << ": " << StateText(state.state())
                << "; waiting for the ranks of attempt " << state.attempt() << " to stop"
                << (next_note_ms == 0
                        ? " (up to " + std::to_string(wait_for_teardown_ms / 1000) + " s)"
                        : " (" + FormatDuration(waited_ms()) + " so far)")
                << "\n";
      next_note_ms = waited_ms() + 10'000;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (options.structured()) {
    std::cout << Render(resp, options) << "\n";
    return kExitOk;
  }
  std::string workers;
  for (const std::string& w : resp.workers()) workers += (workers.empty() ? "" : ", ") + w;
  std::cout << resp.job_id() << " deleted"
            << (workers.empty() ? std::string(" (it never ran: no files on any worker)")
                                : "; its files are removed from " + workers +
                                      " (a worker that is offline removes them when it is back)")
            << "\n";
  return kExitOk;
}

int WorkersCommand(CoordinatorClient& c, int limit, const std::string& page_token,
                   const CommandOptions& options) {
  v1::ListWorkersRequest req;
  req.set_limit(limit > 0 ? limit : kPageSize);
  req.set_page_token(page_token);
  v1::ListWorkersResponse resp;
  for (;;) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::ListWorkersResponse page;
    grpc::Status st = c.stub->ListWorkers(&ctx, req, &page);
    if (!st.ok()) return RpcFailed(c, st, "workers");
    for (v1::WorkerInfo& w : *page.mutable_workers()) *resp.add_workers() = std::move(w);
    resp.set_next_page_token(page.next_page_token());
    if (limit > 0 || page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  std::cout << (options.structured() ? Render(resp, options) + "\n"
                                     : FormatWorkerTable(resp, NowMs()));
  if (!options.structured() && !resp.next_page_token().empty()) {
    std::cerr << "convoy: more workers follow: add --page-token " << resp.next_page_token() << "\n";
  }
  return kExitOk;
}

int DrainCommand(CoordinatorClient& c, const std::string& worker, bool drain, bool now,
                 const CommandOptions& options) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::DrainWorkerRequest req;
  req.set_name(worker);
  req.set_drain(drain);
  req.set_now(now);
  v1::WorkerInfo resp;
  grpc::Status st = c.stub->DrainWorker(&ctx, req, &resp);
  if (!st.ok()) return RpcFailed(c, st, (drain ? "drain " : "undrain ") + worker);
  return PrintChangedWorker(resp, options);
}

int ForgetWorkerCommand(CoordinatorClient& c, const std::string& worker,
                        const CommandOptions& options) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::ForgetWorkerRequest req;
  req.set_name(worker);
  v1::ForgetWorkerResponse resp;
  grpc::Status st = c.stub->ForgetWorker(&ctx, req, &resp);
  if (!st.ok()) return RpcFailed(c, st, "worker forget " + worker);
  if (options.structured()) {
    std::cout << Render(resp, options) << "\n";
    return kExitOk;
  }
  std::cout << "worker " << resp.worker().name() << " forgotten";
  if (resp.abandoned_file_deletions_size() > 0) {
    std::string jobs;
    for (const std::string& id : resp.abandoned_file_deletions()) {
      jobs += (jobs.empty() ? "" : ", ") + id;
    }
    std::cout << "; the files of deleted job(s) " << jobs
              << " were not removed from it and stay on its disk";
  }
  std::cout << "\n";
  return kExitOk;
}

int PlotCommand(CoordinatorClient& c, const std::string& job, const std::string& metric_name,
                int rank, const std::string& output) {
  PlotMetric metric;
  if (!ParsePlotMetric(metric_name, &metric)) {
    std::cerr << "convoy: plot: --metric must be loss, samples_per_second or accuracy\n";
    return kExitUsage;
  }
  v1::JobMetrics metrics;
  grpc::Status st = GetMetrics(c, job, &metrics);
  if (!st.ok()) return RpcFailed(c, st, "plot " + job);
  const std::vector<PlotSeries> series = ExtractSeries(metrics, metric, rank);
  if (output == "csv") {
    std::cout << SeriesCsv(series, metric);
  } else if (output == "json") {
    std::cout << SeriesJson(series, metric) << "\n";
  } else if (output == "yaml") {
    std::cout << JsonToYaml(SeriesJson(series, metric)) << "\n";
  } else {
    ChartOptions o;
    const int columns = TerminalColumns();
    o.width = columns > 0 ? columns : 80;
    o.color = ColorTerminal();
    o.title = PlotMetricName(metric) + " of " + job +
              (rank >= 0 ? ", rank " + std::to_string(rank) : std::string(", every rank"));
    std::cout << RenderChart(series, o);
  }
  return kExitOk;
}

int TopCommand(CoordinatorClient& c, bool once, int interval_ms) {
  for (;;) {
    v1::ListJobsRequest req;  // the jobs that are not finished
    for (v1::JobState s :
         {v1::PENDING, v1::SCHEDULED, v1::RENDEZVOUS, v1::RUNNING, v1::RESTARTING}) {
      req.add_states(s);
    }
    v1::ListJobsResponse resp;
    grpc::Status st = ListAllJobs(c, req, &resp);
    if (!st.ok()) return RpcFailed(c, st, "top");
    const std::string text = FormatTop(resp, NowMs());
    if (once) {
      std::cout << text << std::flush;
      return kExitOk;
    }
    // Cursor home, clear the screen, draw: one write, so the picture does not flicker.
    std::cout << "\x1b[H\x1b[2J" << text << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
}

}  // namespace convoy
