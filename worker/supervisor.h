// The worker's supervisor: owns every rank process of every attempt on this machine. It
// launches ranks (with the torchrun-compatible environment), captures their output into
// per-rank log files, reaps them, kills attempts on request (SIGTERM, then SIGKILL after a
// grace period), serves each attempt's metrics socket, and reports all of it to the
// coordinator through an Outbox.
//
// Threading: one supervisor thread (Run) owns all process state and does every fork, so
// that PR_SET_PDEATHSIG is tied to a thread that lives as long as the worker. Other threads
// only call Post, BuildRegister, OnConnected/OnDisconnected and Stop; `mu_` guards the state
// those read, `cmd_mu_` the command queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "convoy/v1/worker.pb.h"
#include "worker/process_launcher.h"

namespace convoy {

struct WorkerConfig {
  std::string name;
  std::string address;
  std::string hostname;
  std::string work_dir;
  std::string trainer_path;
  int cores = 1;
  int slots = 1;
  std::vector<int> gpus;
  int64_t kill_grace_ms = 5000;
  int64_t orphan_timeout_ms = 60000;
  int64_t log_max_bytes = 64 << 20;
};

// Where the supervisor's reports go (the coordinator connection).
class Outbox {
 public:
  virtual ~Outbox() = default;
  // Sends now; false when not connected (the message is dropped).
  virtual bool Send(const v1::WorkerMessage& msg) = 0;
};

// The environment of one rank: the worker's own, then the spec's env, then Convoy's
// variables (DESIGN.md). OMP_NUM_THREADS defaults to max(1, cores / local_world_size).
std::map<std::string, std::string> BuildRankEnv(const std::map<std::string, std::string>& base,
                                                const v1::Launch& launch, int local_rank, int cores,
                                                const std::string& metrics_socket,
                                                const std::string& checkpoint_dir);

class Supervisor {
 public:
  Supervisor(WorkerConfig config, ProcessLauncher& launcher, Outbox& outbox);
  ~Supervisor();

  // Starts the supervisor thread.
  void Start();
  // Kills every rank (SIGTERM, SIGKILL after the grace), waits for them, stops the thread.
  void Stop();

  // Queues a coordinator message for the supervisor thread. Any thread.
  void Post(const v1::CoordinatorMessage& msg);
  // A Register carrying every attempt not yet forgotten. Any thread.
  v1::Register BuildRegister();
  // The connection came up (after register_ack) or went down. Any thread.
  void OnConnected(int heartbeat_interval_ms);
  void OnDisconnected();

 private:
  struct Rank {
    int rank = 0;
    int local_rank = 0;
    pid_t pid = 0;
    int out_fd = -1;
    int err_fd = -1;
    int log_fd = -1;
    std::string log_path;
    int64_t log_bytes = 0;
    std::string err_partial;
    std::deque<std::string> stderr_tail;
    bool running = false;
    bool signalled = false;
    int64_t kill_at_ms = 0;
    v1::ProcessExit exit;
  };
  struct MetricConn {
    int fd = -1;
    int rank = -1;  // -1: unknown peer, the record's "rank" field decides
    std::string buffer;
  };
  struct Attempt {
    std::string job_id;
    int attempt = 0;
    std::string dir;
    std::vector<Rank> ranks;
    int listen_fd = -1;
    std::string socket_path;
    std::vector<MetricConn> conns;
    std::vector<v1::MetricRecord> pending;
    bool forgotten = false;
    int64_t ended_ms = 0;
  };
  using Key = std::pair<std::string, int>;

  void Run();
  void Handle(const v1::CoordinatorMessage& msg);
  void Launch(const v1::Launch& launch);
  void KillAttempt(Attempt& a, int64_t grace_ms);
  void ReservePort(const v1::ReservePort& req);
  void ReadLogs(const v1::ReadLogs& req);
  void PumpOutput(Rank& r, int fd, bool is_stderr);
  void WriteLog(Rank& r, const char* data, size_t n);
  void Reap();
  void OnExit(Attempt& a, Rank& r, int status);
  void AcceptMetrics(Attempt& a);
  void ReadMetrics(Attempt& a, MetricConn& c);
  void FlushMetrics(bool force);
  void Timers();
  void CloseAttemptSockets(Attempt& a);
  int64_t NowMs() const;
  void Send(const v1::WorkerMessage& msg);

  const WorkerConfig config_;
  ProcessLauncher& launcher_;
  Outbox& outbox_;

  std::mutex cmd_mu_;
  std::deque<v1::CoordinatorMessage> commands_;  // guarded by cmd_mu_
  int wake_fd_[2] = {-1, -1};

  std::mutex mu_;
  std::map<Key, Attempt> attempts_;  // guarded by mu_ (written by the supervisor thread only)

  std::atomic<bool> connected_{false};
  std::atomic<int> heartbeat_ms_{1000};
  std::atomic<int64_t> disconnected_since_ms_;
  std::atomic<bool> stopping_{false};
  bool orphaned_ = false;
  int64_t next_heartbeat_ms_ = 0;
  int64_t next_flush_ms_ = 0;
  std::thread thread_;
};

}  // namespace convoy
