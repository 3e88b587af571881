// The worker's HTTP endpoint against a real coordinator: /readyz answers 503 until the
// worker is registered, 200 while it is, 503 again once the coordinator is gone; /healthz
// answers 200 throughout; /metrics serves the worker's series as Prometheus text. The worker
// is built by WorkerDaemon::Create, as convoy-worker is.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/support/test_cluster.h"
#include "worker/daemon/metrics_http.h"
#include "worker/daemon/worker_daemon.h"

namespace convoy::testing {
namespace metrics_worker_http_test {

using namespace std::chrono_literals;

struct HttpReply {
  int code = 0;  // 0: no answer
  std::string body;
};

// A plain HTTP/1.0 GET on loopback.
HttpReply Get(int port, const std::string& path) {
  HttpReply reply;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return reply;
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return reply;
  }
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
  close(fd);
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  if (all.rfind("HTTP/1.", 0) != 0 || all.size() < 12) return reply;
  reply.code = std::stoi(all.substr(9, 3));
  const auto end = all.find("\r\n\r\n");
  if (end != std::string::npos) reply.body = all.substr(end + 4);
  return reply;
}

TEST(WorkerHttp, ReadyOnlyWhileRegistered) {
  TestCluster cluster;
  const std::string address = cluster.address();
  cluster.StopCoordinator();  // the worker starts before any coordinator answers

  // Built by its composition root, as convoy-worker is, with /metrics on a free port.
  WorkerFlags flags;
  flags.coordinator = address;
  flags.name = "w1";
  flags.advertise_address = "127.0.0.1";
  flags.work_dir = cluster.dir() / "worker-w1";
  flags.cores = 1;
  flags.slots = 1;
  flags.gpus = "none";
  flags.cgroups = "off";
  flags.snapshot_dir = "none";
  flags.warm_trainers = 0;
  flags.prefill_data = {"none"};
  flags.insecure = true;
  flags.metrics_listen = "127.0.0.1:0";
  if (geteuid() == 0) {
    flags.run_as = "root";
    flags.allow_root_jobs = true;
  }
  auto worker = WorkerDaemon::Create(flags);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  const int port = (*worker)->metrics_port();
  ASSERT_GT(port, 0);
  (*worker)->Start();

  EXPECT_EQ(Get(port, "/healthz").code, 200);
  EXPECT_EQ(Get(port, "/readyz").code, 503);  // no coordinator yet
  const HttpReply metrics = Get(port, "/metrics");
  EXPECT_EQ(metrics.code, 200);
  EXPECT_NE(metrics.body.find("convoy_worker_slots{worker=\"w1\"} 1"), std::string::npos)
      << metrics.body;

  cluster.StartCoordinator();  // same port: the connection's backoff finds it
  EXPECT_TRUE(TestCluster::WaitFor([&] { return Get(port, "/readyz").code == 200; }, 30s));
  EXPECT_EQ(Get(port, "/healthz").code, 200);

  cluster.StopCoordinator();
  EXPECT_TRUE(TestCluster::WaitFor([&] { return Get(port, "/readyz").code == 503; }, 30s));
  EXPECT_EQ(Get(port, "/healthz").code, 200);
  (*worker)->Stop();
}

// The endpoint on its own: any registry it is given, refreshed before each scrape.
TEST(WorkerHttp, ServesItsRegistriesAndRefreshesBeforeEachScrape) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge()
      .Name("convoy_worker_test_value")
      .Help("a value")
      .Register(*registry)
      .Add({{"worker", "w1"}})
      .Set(42);
  std::atomic<int> refreshed{0};
  std::atomic<bool> ready{false};
  auto http = MetricsHttpServer::Start(
      "127.0.0.1:0", {registry}, [&ready] { return ready.load(); }, [&refreshed] { ++refreshed; });
  ASSERT_TRUE(http.ok()) << http.status().message();
  const int port = (*http)->port();
  const HttpReply metrics = Get(port, "/metrics");
  EXPECT_EQ(metrics.code, 200);
  EXPECT_NE(metrics.body.find("convoy_worker_test_value{worker=\"w1\"} 42"), std::string::npos)
      << metrics.body;
  EXPECT_EQ(refreshed.load(), 1);  // each scrape refreshes first
  EXPECT_EQ(Get(port, "/readyz").code, 503);
  ready = true;
  EXPECT_EQ(Get(port, "/readyz").code, 200);
  EXPECT_EQ(Get(port, "/healthz").code, 200);
  EXPECT_EQ(refreshed.load(), 1);  // probes do not scrape
}

TEST(WorkerHttp, BindFailureIsAnError) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto first = MetricsHttpServer::Start("127.0.0.1:0", {registry}, [] { return true; });
  ASSERT_TRUE(first.ok());
  auto second = MetricsHttpServer::Start("127.0.0.1:" + std::to_string((*first)->port()),
                                         {registry}, [] { return true; });
  EXPECT_FALSE(second.ok());
}

}  // namespace metrics_worker_http_test
}  // namespace convoy::testing
