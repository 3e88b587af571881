#include "tests/support/etcd_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "coordinator/store/etcd_client.h"

namespace convoy::testing {
namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

// A port the kernel had free a moment ago (the member binds it right after).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string Url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

}  // namespace

bool EtcdCluster::Available() { return access(kEtcd, X_OK) == 0; }

EtcdCluster::EtcdCluster(int members) {
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = FreePort();
    m.peer_port = FreePort();
    initial_cluster_ += (i > 0 ? "," : "") + m.name + "=" + Url(m.peer_port);
    members_.push_back(m);
  }
  for (int i = 0; i < members; ++i) Start(i);
  started_once_ = true;
  // Ready when a member answers with a leader.
  EtcdOptions options;
  options.endpoints = endpoints();
  options.call_timeout_ms = 1000;
  auto client = EtcdClient::Create(options);
  if (!client.ok()) {
    ADD_FAILURE() << client.status().message();
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto status = (*client)->MemberStatus();
    if (status.ok() && status->leader() != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "etcd (" << members << " members) has no leader after 30 s; logs in "
                << dir_.str();
}

EtcdCluster::~EtcdCluster() {
  for (size_t i = 0; i < members_.size(); ++i) Kill(static_cast<int>(i));
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const Member& m : members_) out.push_back("127.0.0.1:" + std::to_string(m.client_port));
  return out;
}

std::string EtcdCluster::url() const {
  std::string out = "etcd://";
  for (const std::string& e : endpoints()) out += (out.size() > 7 ? "," : "") + e;
  return out;
}

void EtcdCluster::Kill(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return;
  kill(m.pid, SIGKILL);
  waitpid(m.pid, nullptr, 0);
  m.pid = 0;
}

void EtcdCluster::Start(int i) {
  Member& m = members_[i];
  if (m.pid > 0) return;
  const std::vector<std::string> args = {
      kEtcd,
      "--name=" + m.name,
      "--data-dir=" + (dir_ / m.name),
      "--listen-client-urls=" + Url(m.client_port),
      "--advertise-client-urls=" + Url(m.client_port),
      "--listen-peer-urls=" + Url(m.peer_port),
      "--initial-advertise-peer-urls=" + Url(m.peer_port),
      "--initial-cluster=" + initial_cluster_,
      std::string("--initial-cluster-state=") + (started_once_ ? "existing" : "new"),
      "--initial-cluster-token=" + dir_.path().filename().string(),
      // A job's metric history is one value of up to 2.6 MB (etcd_job_store.h).
      "--max-request-bytes=8388608",
      // Quick elections on loopback: tests of failover wait seconds, not tens.
      "--heartbeat-interval=50",
      "--election-timeout=500",
      "--logger=zap",
      "--log-outputs=" + (dir_ / (m.name + ".log")),
      "--log-level=warn",
  };
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execv(kEtcd, argv.data());
    _exit(127);
  }
  EXPECT_GT(pid, 0) << "fork";
  m.pid = pid;
  // Serving once its client port accepts (a client's first connection then succeeds, rather
  // than waiting out gRPC's reconnect backoff).
  for (int tries = 0; tries < 200; ++tries) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(m.client_port));
    const bool up = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (up) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "etcd member " << m.name << " does not listen on " << m.client_port;
}

EtcdCluster& SharedEtcd() {
  static EtcdCluster* shared = [] {
    auto* cluster = new EtcdCluster(1);
    std::atexit([] { delete &SharedEtcd(); });
    return cluster;
  }();
  return *shared;
}

std::string UniqueEtcdPrefix() {
  static std::atomic<int> next{0};
  return "/t" + std::to_string(getpid()) + "-" + std::to_string(next++) + "/";
}

}  // namespace convoy::testing
