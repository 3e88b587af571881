// The standard gRPC health service (grpc.health.v1.Health) on the coordinator: answered
// without credentials over TLS, SERVING while the coordinator serves; gone with it.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "coordinator/rpc/health_server.h"
#include "coordinator/rpc/listener.h"
#include "tests/support/test_cluster.h"

namespace convoy {
namespace coordinator_health_test {

using namespace std::chrono_literals;

// Health.Check for `service` ("": the whole server): the raw HealthCheckResponse bytes.
grpc::Status Check(const std::shared_ptr<grpc::Channel>& channel, std::string* response,
                   const std::string& service = "") {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  // HealthCheckRequest{service}: field 1, length-delimited (empty: no bytes at all).
  const std::string body =
      service.empty() ? "" : std::string("\x0a") + static_cast<char>(service.size()) + service;
  grpc::Slice slice(body.data(), body.size());
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer reply;
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &reply,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = s;
                   done = true;
                   cv.notify_all();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  response->clear();
  std::vector<grpc::Slice> slices;
  if (status.ok() && reply.Dump(&slices).ok()) {
    for (const auto& s : slices)
      response->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

TEST(CoordinatorHealth, ServingWithoutCredentialsOverTls) {
  auto options = testing::TestCluster::DefaultOptions();
  options.secure = true;
  testing::TestCluster cluster(options);
  std::string response;
  grpc::Status st = Check(cluster.SecureChannel(""), &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  // HealthCheckResponse{status: SERVING (1)}: field 1, varint 1.
  EXPECT_EQ(response, std::string("\x08\x01", 2));

  cluster.StopCoordinator();
  st = Check(cluster.SecureChannel(""), &response);
  EXPECT_FALSE(st.ok());
  cluster.StartCoordinator();
  st = Check(cluster.SecureChannel(""), &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(response, std::string("\x08\x01", 2));
}

const std::string kServing("\x08\x01", 2);
const std::string kNotServing("\x08\x02", 2);

// --health-listen: health in plain text (Kubernetes' grpc probes cannot speak TLS), and
// nothing else there: the coordinator's own services are not on that port. Service "" says
// the process is up (liveness); "leader" says it leads and serves (readiness), so that a
// Service over an etcd group's coordinators routes to the leader alone.
TEST(CoordinatorHealth, PlainTextHealthPortSaysAliveAndWhetherLeading) {
  int port = 0;
  {
    auto l = Listener::Bind("127.0.0.1:0");  // a free port for the health server
    ASSERT_TRUE(l.ok());
    port = (*l)->port();
  }
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  auto server = HealthServer::Start(listen);
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto channel = grpc::CreateChannel(listen, grpc::InsecureChannelCredentials());
  std::string response;
  grpc::Status st = Check(channel, &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(response, kServing);
  ASSERT_TRUE(Check(channel, &response, HealthServer::kLeaderService).ok());
  EXPECT_EQ(response, kNotServing);  // a follower, waiting
  (*server)->SetLeading(true);
  ASSERT_TRUE(Check(channel, &response, HealthServer::kLeaderService).ok());
  EXPECT_EQ(response, kServing);
  EXPECT_EQ(Check(channel, &response, "convoy.v1.JobService").error_code(),
            grpc::StatusCode::NOT_FOUND);

  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  grpc::CompletionQueue cq;
  auto call =
      stub.PrepareUnaryCall(&ctx, "/convoy.v1.JobService/ListJobs", grpc::ByteBuffer(), &cq);
  call->StartCall();
  grpc::ByteBuffer reply;
  grpc::Status listed;
  call->Finish(&reply, &listed, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_EQ(listed.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }

  (*server)->Shutdown();
  EXPECT_FALSE(Check(channel, &response).ok());
}

// A coordinator with --health-listen on SQLite leads its cluster once it serves.
TEST(CoordinatorHealth, ASqliteCoordinatorIsLeaderOnItsHealthPort) {
  int port = 0;
  {
    auto l = Listener::Bind("127.0.0.1:0");
    ASSERT_TRUE(l.ok());
    port = (*l)->port();
  }
  auto options = testing::TestCluster::DefaultOptions();
  options.flags.health_listen = "127.0.0.1:" + std::to_string(port);
  testing::TestCluster cluster(options);
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  std::string response;
  ASSERT_TRUE(Check(channel, &response, HealthServer::kLeaderService).ok());
  EXPECT_EQ(response, kServing);
  cluster.StopCoordinator();
  EXPECT_FALSE(Check(channel, &response).ok());
}

}  // namespace coordinator_health_test
}  // namespace convoy
