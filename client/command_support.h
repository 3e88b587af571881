// What the verbs of the `convoy` CLI share (commands.cc, connect.cc): deadlines, rendering
// for --output, the one way a failed call is reported, the terminal's shape, and paging.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>

#include "client/commands.h"
#include "client/progress.h"
#include "convoy/v1/job.grpc.pb.h"

namespace convoy {

// Unary calls give up after this long (streams have no deadline).
inline constexpr int kRpcDeadlineS = 15;
// Page size when the CLI fetches every page (the coordinator's maximum).
inline constexpr int kPageSize = 1000;

// Unix time now, in ms.
int64_t NowMs();
// Gives a unary call its deadline (streams have none).
void SetDeadline(grpc::ClientContext& ctx);
// `msg` as --output asked: JSON on one line, or a YAML document.
std::string Render(const google::protobuf::Message& msg, const CommandOptions& options);
// Prints why the call `what` failed and returns its exit code (ExitCodeFor, or
// ExplainConnectFailure's).
int RpcFailed(const CoordinatorClient& c, const grpc::Status& st, const std::string& what);
// One worker as a verb that changed it answers (drain, cordon): rendered, or a one-row table.
int PrintChangedWorker(const v1::WorkerInfo& worker, const CommandOptions& options);
// The live view's mode for --output and the terminal.
ProgressView::Options ViewOptions(const CommandOptions& options);
// Columns of stdout when it is a terminal, else 0.
int TerminalColumns();
// Whether stdout is a terminal that takes colours (and NO_COLOR is not set).
bool ColorTerminal();
// Every page of `req` from its page_token on, merged into `out` (whose next_page_token is
// then empty). A job submitted while paging is listed once or not at all.
grpc::Status ListAllJobs(CoordinatorClient& c, v1::ListJobsRequest req, v1::ListJobsResponse* out);
// JobService.GetJobMetrics of `job`.
grpc::Status GetMetrics(CoordinatorClient& c, const std::string& job, v1::JobMetrics* out);

}  // namespace convoy
