// The RPC interceptor against a real gRPC server using the callback API: unary calls and
// server streams are counted by method and status code, with their latency, and the
// exporter's store-commit histogram sees the commit thread's group commits.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "convoy/v1/job.grpc.pb.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/rpc/grpc_server.h"
#include "coordinator/rpc/metrics_exporter.h"
#include "tests/support/memory_job_store.h"

namespace convoy {
namespace metrics_coordinator_rpc_test {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

TEST(RpcMetrics, InterceptorCountsCallbackRpcs) {
  SystemClock clock;
  MemoryJobStore store;
  CoordinatorOptions options;
  Coordinator coordinator(clock, store, options);
  MetricsExporter exporter(clock, {});
  coordinator.pipeline().set_on_commit(
      [&exporter](double seconds, size_t writes) { exporter.OnCommit(seconds, writes); });
  ASSERT_TRUE(coordinator.Start().ok());
  auto server = GrpcServer::Start(coordinator, "127.0.0.1:0", InsecureForTests(), {}, &exporter);
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::JobService::NewStub(channel);

  {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    v1::ListJobsResponse resp;
    ASSERT_TRUE(stub->ListJobs(&ctx, req, &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id("j-999999");
    v1::Job resp;
    EXPECT_EQ(stub->GetJob(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    req.mutable_spec()->set_name("sleep");
    req.mutable_spec()->set_nodes(1);
    req.mutable_spec()->set_procs_per_node(1);
    req.mutable_spec()->add_command("/bin/true");
    v1::SubmitJobResponse resp;
    ASSERT_TRUE(stub->SubmitJob(&ctx, req, &resp).ok());
  }
  {
    grpc::ClientContext ctx;  // a server stream, ended by the client
    v1::WatchJobRequest req;
    req.set_job_id("j-000001");
    auto reader = stub->WatchJob(&ctx, req);
    v1::WatchJobResponse update;
    EXPECT_TRUE(reader->Read(&update));
    ctx.TryCancel();
    while (reader->Read(&update)) {
    }
    reader->Finish();
  }
  // The interceptor reports when gRPC destroys the call, just after the client saw it end.
  std::string text;
  for (int i = 0; i < 500; ++i) {
    text = exporter.Serialize();
    if (Has(text, "method=\"WatchJob\"")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string svc = "service=\"convoy.v1.JobService\"";
  EXPECT_TRUE(
      Has(text, "convoy_grpc_server_handled_total{code=\"OK\",method=\"ListJobs\"," + svc + "} 1"))
      << text;
  EXPECT_TRUE(Has(text, "convoy_grpc_server_handled_total{code=\"NOT_FOUND\",method=\"GetJob\"," +
                            svc + "} 1"));
  EXPECT_TRUE(Has(
      text, "convoy_grpc_server_handled_total{code=\"OK\",method=\"SubmitJob\"," + svc + "} 1"));
  EXPECT_TRUE(Has(text, "method=\"WatchJob\"")) << text;
  EXPECT_TRUE(
      Has(text, "convoy_grpc_server_handling_seconds_count{method=\"ListJobs\"," + svc + "} 1"));
  // The submit was committed before its reply: at least one group commit was timed.
  EXPECT_FALSE(Has(text, "convoy_store_commit_seconds_count 0")) << text;
  EXPECT_TRUE(Has(text, "convoy_store_commit_seconds_count"));

  (*server)->Shutdown(500);
  coordinator.Stop();
}

}  // namespace metrics_coordinator_rpc_test
}  // namespace convoy
