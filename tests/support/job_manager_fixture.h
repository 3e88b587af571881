// What the JobManager's unit tests share: a fake worker channel that records what is sent,
// and a fixture with a fake clock, the in-memory store and helpers that play the workers'
// part (register, reserve the port, start and end ranks, heartbeat as time passes).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "coordinator/control/job_manager.h"
#include "tests/support/memory_job_store.h"

namespace convoy {

// Records every message sent to a connected worker.
class FakeWorkerChannel : public WorkerChannel {
 public:
  bool Send(const std::string& name, const v1::CoordinatorMessage& msg) override {
    if (connected.count(name) == 0) return false;
    sent.emplace_back(name, msg);
    return true;
  }
  // Removes and returns the messages of one kind sent so far.
  std::vector<std::pair<std::string, v1::CoordinatorMessage>> Take(
      v1::CoordinatorMessage::MsgCase kind) {
    std::vector<std::pair<std::string, v1::CoordinatorMessage>> out, rest;
    for (auto& m : sent) (m.second.msg_case() == kind ? out : rest).push_back(m);
    sent = rest;
    return out;
  }
  // The job ids of the DeleteJobFiles sent to `worker` since the last call (removed).
  std::vector<std::string> TakeDeletions(const std::string& worker) {
    std::vector<std::string> out;
    std::vector<std::pair<std::string, v1::CoordinatorMessage>> rest;
    for (auto& [w, m] : sent) {
      if (w == worker && m.has_delete_job_files()) {
        out.push_back(m.delete_job_files().job_id());
      } else {
        rest.emplace_back(w, m);
      }
    }
    sent = rest;
    return out;
  }
  // Workers whose stream is open: Send to any other fails.
  std::set<std::string> connected;
  std::vector<std::pair<std::string, v1::CoordinatorMessage>> sent;
};

// The in-memory store, counting the body writes of each job.
class CountingStore : public MemoryJobStore {
 public:
  Status SaveJob(const v1::Job& job, const v1::JobEvent* event) override {
    ++saves[job.id()];
    return MemoryJobStore::SaveJob(job, event);
  }
  std::map<std::string, int> saves;
};

class JobManagerFixture : public ::testing::Test {
 protected:
  void SetUp() override { Restart(); }

  // A fresh JobManager over the same store, as after a coordinator restart.
  void Restart() {
    registry_ = std::make_unique<WorkerRegistry>(clock_, 10000);
    jm_ = std::make_unique<JobManager>(clock_, store_, *registry_, channel_, options_);
    ASSERT_TRUE(jm_->Recover().ok());
  }

  void AddWorker(const std::string& name, int slots,
                 const std::vector<v1::AttemptStatus>& attempts = {}) {
    v1::Register reg = Registration(name, slots);
    for (const auto& a : attempts) *reg.add_attempts() = a;
    AddWorker(reg);
  }
  // What AddWorker(name, slots) registers: address 10.0.0.<digits of the name>, as many
  // cores as slots; add GPUs, memory or labels before AddWorker(reg).
  static v1::Register Registration(const std::string& name, int slots) {
    v1::Register reg;
    reg.set_name(name);
    reg.set_address("10.0.0." + name.substr(1));
    reg.set_hostname("host-" + name);
    reg.set_cores(slots);
    reg.set_slots(slots);
    return reg;
  }
  void AddWorker(const v1::Register& reg) {
    channel_.connected.insert(reg.name());
    live_.insert(reg.name());
    v1::RegisterAck ack = jm_->OnRegister(reg);
    EXPECT_GT(ack.heartbeat_interval_ms(), 0);
    jm_->Tick();  // the coordinator's next tick places what waits for it
  }

  void KillWorker(const std::string& name) {
    channel_.connected.erase(name);
    live_.erase(name);
    jm_->OnDisconnect(name);
  }

  // Moves time on in 500 ms steps; live workers heartbeat at every step.
  void Advance(int64_t ms) {
    for (int64_t done = 0; done < ms; done += 500) {
      clock_.AdvanceMs(std::min<int64_t>(500, ms - done));
      for (const std::string& w : live_) {
        v1::WorkerMessage hb;
        hb.mutable_heartbeat()->set_time_unix_ms(clock_.NowUnixMs());
        for (const auto& s : stopped_[w]) *hb.mutable_heartbeat()->add_stopped() = s;
        jm_->OnWorkerMessage(w, hb);
      }
      jm_->Tick();
    }
  }

  std::string Submit(int nodes, int procs, int max_restarts = 0, int hang_timeout_s = 0) {
    v1::JobSpec spec;
    spec.set_name("job");
    spec.set_nodes(nodes);
    spec.set_procs_per_node(procs);
    spec.add_command("train");
    spec.set_max_restarts(max_restarts);
    spec.set_hang_timeout_s(hang_timeout_s);
    auto id = jm_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : "";
  }

  // Submits `spec` as `owner` with `role`; "" when refused.
  std::string SubmitSpec(const v1::JobSpec& spec, const std::string& owner = "",
                         const std::string& role = "") {
    auto id = jm_->Submit(spec, owner, role);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : "";
  }

  // Answers the port reservation and starts every launched rank. Returns the launches.
  std::vector<std::pair<std::string, v1::Launch>> StartAttempt(const std::string& job) {
    auto ports = channel_.Take(v1::CoordinatorMessage::kReservePort);
    EXPECT_EQ(ports.size(), 1u);
    std::vector<std::pair<std::string, v1::Launch>> launches;
    if (ports.size() != 1) return launches;
    v1::WorkerMessage reply;
    reply.mutable_port_reserved()->set_job_id(job);
    reply.mutable_port_reserved()->set_attempt(ports[0].second.reserve_port().attempt());
    reply.mutable_port_reserved()->set_port(40000);
    jm_->OnWorkerMessage(ports[0].first, reply);
    for (auto& [worker, msg] : channel_.Take(v1::CoordinatorMessage::kLaunch)) {
      launches.emplace_back(worker, msg.launch());
      for (int l = 0; l < msg.launch().local_world_size(); ++l) {
        v1::WorkerMessage started;
        auto* s = started.mutable_process_started();
        s->set_job_id(job);
        s->set_attempt(msg.launch().attempt());
        s->set_rank(msg.launch().group_rank() * msg.launch().local_world_size() + l);
        s->set_local_rank(l);
        s->set_pid(1000 + s->rank());
        jm_->OnWorkerMessage(worker, started);
      }
    }
    return launches;
  }

  void Exit(const std::string& worker, const std::string& job, int attempt, int rank, int code,
            int signal = 0, bool by_worker = false) {
    v1::WorkerMessage msg;
    auto* e = msg.mutable_process_exited();
    e->set_job_id(job);
    e->set_attempt(attempt);
    e->set_rank(rank);
    e->mutable_exit()->set_exit_code(code);
    e->mutable_exit()->set_signal(signal);
    e->mutable_exit()->set_signal_name(signal == 9 ? "SIGKILL" : signal == 15 ? "SIGTERM" : "");
    e->mutable_exit()->set_killed_by_worker(by_worker);
    e->mutable_exit()->add_stderr_tail("last words of rank " + std::to_string(rank));
    jm_->OnWorkerMessage(worker, msg);
    jm_->Tick();  // as the coordinator's ticker would (no time passes)
  }

  void Metric(const std::string& worker, const std::string& job, int attempt, int rank,
              int64_t step) {
    v1::WorkerMessage msg;
    auto* b = msg.mutable_metrics();
    b->set_job_id(job);
    b->set_attempt(attempt);
    auto* r = b->add_records();
    r->set_rank(rank);
    r->set_step(step);
    r->set_has_step(true);
    r->set_loss(0.5);
    r->set_has_loss(true);
    jm_->OnWorkerMessage(worker, msg);
  }

  v1::Job Job(const std::string& id) {
    auto job = jm_->Get(id);
    EXPECT_TRUE(job.ok());
    return job.ok() ? *job : v1::Job();
  }
  // Whether `job` has ever been in `state` (a restart passes RESTARTING at once when the next
  // attempt can be placed: it does not wait for the old ranks' teardown).
  static bool WentThrough(const v1::Job& job, v1::JobState state) {
    for (const auto& e : job.events()) {
      if (e.to() == state) return true;
    }
    return false;
  }

  FakeClock clock_;
  CountingStore store_;
  FakeWorkerChannel channel_;
  JobManagerOptions options_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> jm_;
  std::set<std::string> live_;
  std::map<std::string, std::vector<v1::StoppedRank>> stopped_;  // reported in heartbeats
};

}  // namespace convoy
