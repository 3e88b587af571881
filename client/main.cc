// convoy: the command-line client. Each verb is one function; rendering is in format.cc
// and the live view in watch.cc.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "client/format.h"
#include "client/watch.h"
#include "common/job_spec.h"
#include "convoy/v1/job.grpc.pb.h"

namespace convoy {
namespace {

constexpr const char* kExitCodes =
    "Exit codes: 0 success; 1 the watched job ended other than SUCCEEDED; 2 usage error or "
    "invalid spec; 3 coordinator unreachable; 4 job not found; 5 other error.";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int Fail(const grpc::Status& st, const std::string& what) {
  std::cerr << "convoy: " << what << ": " << st.error_message() << "\n";
  return ExitCodeFor(st);
}

// The one place channels are made, so that TLS and tokens slot in here.
std::unique_ptr<v1::JobService::Stub> Connect(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  return v1::JobService::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
}

void Deadline(grpc::ClientContext& ctx, int seconds = 15) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

int Submit(v1::JobService::Stub& stub, const std::string& file, bool json, std::string* id) {
  auto spec = LoadJobSpecFile(file);
  if (!spec.ok()) {
    std::cerr << "convoy: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::SubmitJobRequest req;
  *req.mutable_spec() = *spec;
  v1::SubmitJobResponse resp;
  grpc::Status st = stub.SubmitJob(&ctx, req, &resp);
  if (!st.ok()) return Fail(st, "submit " + file);
  *id = resp.job_id();
  if (json) {
    std::cout << ToJson(resp) << "\n";
  } else {
    std::cout << resp.job_id() << "\n";
  }
  return kExitOk;
}

int List(v1::JobService::Stub& stub, bool json) {
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::ListJobsResponse resp;
  grpc::Status st = stub.ListJobs(&ctx, v1::ListJobsRequest(), &resp);
  if (!st.ok()) return Fail(st, "list");
  std::cout << (json ? ToJson(resp) + "\n" : FormatJobTable(resp, NowMs()));
  return kExitOk;
}

int ShowStatus(v1::JobService::Stub& stub, const std::string& id, bool json) {
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::GetJobRequest req;
  req.set_job_id(id);
  v1::Job job;
  grpc::Status st = stub.GetJob(&ctx, req, &job);
  if (!st.ok()) return Fail(st, "status " + id);
  std::cout << (json ? ToJson(job) + "\n" : FormatJobStatus(job, NowMs()));
  return kExitOk;
}

int Cancel(v1::JobService::Stub& stub, const std::string& id, bool json) {
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::CancelJobRequest req;
  req.set_job_id(id);
  v1::Job job;
  grpc::Status st = stub.CancelJob(&ctx, req, &job);
  if (!st.ok()) return Fail(st, "cancel " + id);
  std::cout << (json ? ToJson(job) + "\n" : id + " " + StateText(job.state()) + "\n");
  return kExitOk;
}

int Workers(v1::JobService::Stub& stub, bool json) {
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::ListWorkersResponse resp;
  grpc::Status st = stub.ListWorkers(&ctx, v1::ListWorkersRequest(), &resp);
  if (!st.ok()) return Fail(st, "workers");
  std::cout << (json ? ToJson(resp) + "\n" : FormatWorkerTable(resp, NowMs()));
  return kExitOk;
}

int Logs(v1::JobService::Stub& stub, const std::string& id, int rank, int attempt, bool follow,
         int64_t tail_bytes) {
  grpc::ClientContext ctx;
  v1::GetLogsRequest req;
  req.set_job_id(id);
  req.set_rank(rank);
  if (attempt >= 0) {
    req.set_attempt(attempt);
    req.set_has_attempt(true);
  }
  req.set_follow(follow);
  req.set_tail_bytes(tail_bytes);
  auto reader = stub.GetLogs(&ctx, req);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    std::fwrite(chunk.data().data(), 1, chunk.data().size(), stdout);
    std::fflush(stdout);
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) return Fail(st, "logs " + id);
  return kExitOk;
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  using namespace convoy;
  CLI::App app{"convoy: submit and follow distributed training jobs"};
  app.footer(kExitCodes);
  app.set_version_flag("--version", std::string(CONVOY_VERSION));
  app.require_subcommand(1);
  std::string coordinator = "127.0.0.1:7070";
  app.add_option("--coordinator", coordinator, "HOST:PORT of the coordinator")
      ->envname("CONVOY_COORDINATOR")
      ->capture_default_str();
  std::string output = "text";
  auto add_output = [&output](CLI::App* cmd) {
    cmd->add_option("--output,-o", output, "text or json")->check(CLI::IsMember({"text", "json"}));
  };

  std::string file, job;
  bool watch = false, follow = false;
  int rank = 0, attempt = -1;
  int64_t tail = 0;
  CLI::App* submit = app.add_subcommand("submit", "submit a job spec (YAML or JSON)");
  submit->add_option("FILE", file, "the job spec")->required();
  submit->add_flag("--watch,-w", watch, "then follow it until it ends (exit 0 iff SUCCEEDED)");
  add_output(submit);
  CLI::App* list = app.add_subcommand("list", "list jobs");
  add_output(list);
  CLI::App* status = app.add_subcommand("status", "a job's state, progress, failures, events");
  status->add_option("JOB", job)->required();
  add_output(status);
  CLI::App* watch_cmd = app.add_subcommand("watch", "follow a job live until it ends");
  watch_cmd->add_option("JOB", job)->required();
  add_output(watch_cmd);
  CLI::App* logs = app.add_subcommand("logs", "a rank's output");
  logs->add_option("JOB", job)->required();
  logs->add_option("--rank,-r", rank, "global rank (default 0)")->check(CLI::NonNegativeNumber);
  logs->add_option("--attempt", attempt, "attempt (default: the latest)")
      ->check(CLI::NonNegativeNumber);
  logs->add_flag("--follow,-f", follow, "keep streaming until the rank exits");
  logs->add_option("--tail", tail, "only the last N bytes")->check(CLI::NonNegativeNumber);
  CLI::App* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("JOB", job)->required();
  add_output(cancel);
  CLI::App* workers = app.add_subcommand("workers", "list workers");
  add_output(workers);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  auto stub = Connect(coordinator);
  const bool json = output == "json";
  if (submit->parsed()) {
    std::string id;
    int rc = Submit(*stub, file, json, &id);  // with --watch, the first JSON line
    if (rc != kExitOk || !watch) return rc;
    return WatchJob(*stub, id, json, isatty(STDOUT_FILENO) != 0);
  }
  if (list->parsed()) return List(*stub, json);
  if (status->parsed()) return ShowStatus(*stub, job, json);
  if (watch_cmd->parsed()) return WatchJob(*stub, job, json, isatty(STDOUT_FILENO) != 0);
  if (logs->parsed()) return Logs(*stub, job, rank, attempt, follow, tail);
  if (cancel->parsed()) return Cancel(*stub, job, json);
  if (workers->parsed()) return Workers(*stub, json);
  return kExitUsage;
}
