#include "client/command_support.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "client/format.h"

namespace convoy {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SetDeadline(grpc::ClientContext& ctx) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kRpcDeadlineS));
}

// `msg` as --output asked: JSON on one line, or a YAML document.
std::string Render(const google::protobuf::Message& msg, const CommandOptions& options) {
  return options.yaml ? ToYaml(msg) : ToJson(msg);
}

// Prints why the call `what` failed and returns its exit code (ExitCodeFor, or
// ExplainConnectFailure's).
int RpcFailed(const CoordinatorClient& c, const grpc::Status& st, const std::string& what) {
  std::cerr << "convoy: " << what << ": ";
  if (auto better = ExplainConnectFailure(c, st)) {
    std::cerr << better->second << "\n";
    return better->first;
  }
  switch (st.error_code()) {
    case grpc::StatusCode::UNAUTHENTICATED:
      std::cerr << "not authenticated: " << st.error_message();
      break;
    case grpc::StatusCode::PERMISSION_DENIED:
      std::cerr << st.error_message();
      break;
    default:
      std::cerr << st.error_message();
      // A coordinator that answered UNAVAILABLE itself (its store refuses writes, say) is
      // running, and its message says why: the hint is for one that could not be reached.
      if (ExitCodeFor(st) == kExitUnavailable &&
          !(c.channel && c.channel->GetState(false) == GRPC_CHANNEL_READY)) {
        if (c.target.find(',') == std::string::npos) {
          std::cerr << " (is the coordinator running at " << c.target << "?)";
        } else {
          // A group on etcd: only the leader listens.
          std::cerr << " (none of " << c.target
                    << " serves: is one of them running and leading? A follower does not "
                       "listen, and none leads while etcd has no quorum: see their logs)";
        }
      }
  }
  std::cerr << "\n";
  return ExitCodeFor(st);
}

ProgressView::Options ViewOptions(const CommandOptions& options) {
  ProgressView::Options o;
  if (options.structured()) {
    o.mode = options.yaml ? ProgressView::Mode::kYaml : ProgressView::Mode::kJson;
    return o;
  }
  const char* term = std::getenv("TERM");
  const bool tty =
      isatty(STDOUT_FILENO) != 0 && (term == nullptr || std::strcmp(term, "dumb") != 0);
  o.mode = tty ? ProgressView::Mode::kTerminal : ProgressView::Mode::kPlain;
  winsize ws{};
  if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) o.terminal_columns = ws.ws_col;
  return o;
}

// Columns of stdout when it is a terminal, else 0.
int TerminalColumns() {
  winsize ws{};
  if (isatty(STDOUT_FILENO) != 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) return ws.ws_col;
  return 0;
}

bool ColorTerminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr &&
         (term == nullptr || std::strcmp(term, "dumb") != 0);
}

// Every page of `req` from its page_token on (kPageSize at a time), merged into `out` (whose
// next_page_token is then empty). A job submitted while paging is listed once or not at all.
grpc::Status ListAllJobs(CoordinatorClient& c, v1::ListJobsRequest req, v1::ListJobsResponse* out) {
  req.set_limit(kPageSize);
  out->Clear();
  for (;;) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    v1::ListJobsResponse page;
    grpc::Status st = c.stub->ListJobs(&ctx, req, &page);
    if (!st.ok()) return st;
    for (v1::Job& job : *page.mutable_jobs()) *out->add_jobs() = std::move(job);
    if (page.next_page_token().empty()) return grpc::Status::OK;
    req.set_page_token(page.next_page_token());
  }
}

grpc::Status GetMetrics(CoordinatorClient& c, const std::string& job, v1::JobMetrics* out) {
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  v1::GetJobMetricsRequest req;
  req.set_job_id(job);
  return c.stub->GetJobMetrics(&ctx, req, out);
}

int PrintChangedWorker(const v1::WorkerInfo& worker, const CommandOptions& options) {
  if (options.structured()) {
    std::cout << Render(worker, options) << "\n";
  } else {
    v1::ListWorkersResponse one;
    *one.add_workers() = worker;
    std::cout << FormatWorkerTable(one, NowMs());
  }
  return kExitOk;
}

}  // namespace convoy
