#include "worker/supervise/reporter.h"

#include <spdlog/spdlog.h>

#include "worker/files/snapshot_dir.h"

namespace convoy {

v1::WorkerHealth HealthToProto(const HealthReport& report) {
  v1::WorkerHealth out;
  switch (report.state) {
    case HealthReport::State::kChecking:
      out.set_state(v1::HEALTH_CHECKING);
      break;
    case HealthReport::State::kOk:
      out.set_state(v1::HEALTH_OK);
      break;
    case HealthReport::State::kFailing:
      out.set_state(v1::HEALTH_FAILING);
      break;
  }
  out.set_reason(report.reason);
  out.set_checked_unix_ms(report.checked_unix_ms);
  for (const HealthCheckOutcome& c : report.checks) {
    v1::HealthCheckResult* r = out.add_checks();
    r->set_name(c.name);
    r->set_ok(c.ok);
    r->set_detail(c.detail);
  }
  return out;
}

v1::Register MakeRegister(const WorkerConfig& config, const AttemptSnapshot& snapshot,
                          const HealthMonitor* health) {
  v1::Register reg;
  if (health != nullptr) *reg.mutable_health() = HealthToProto(health->Latest());
  reg.set_name(config.name);
  reg.set_address(config.address);
  reg.set_hostname(config.hostname);
  reg.set_cores(config.cores);
  for (int g : config.gpus) reg.add_gpus(g);
  reg.set_slots(config.slots);
  reg.set_version(CONVOY_VERSION);
  reg.set_memory_bytes(config.memory_bytes);
  for (const GpuDeviceInfo& g : config.gpu_devices) {
    v1::GpuDevice* d = reg.add_gpu_devices();
    d->set_index(g.index);
    d->set_model(g.model);
    d->set_memory_bytes(g.memory_bytes);
    d->set_uuid(g.uuid);
  }
  for (const auto& [k, v] : config.labels) (*reg.mutable_labels())[k] = v;
  for (const v1::AttemptStatus& as : snapshot.attempts) *reg.add_attempts() = as;
  if (!config.snapshot_root.empty()) {
    for (const std::string& key : ListSnapshotKeys(config.snapshot_root)) {
      reg.add_snapshot_keys(key);
    }
  }
  return reg;
}

Reporter::Reporter(AttemptTable& table, Outbox& outbox, const Clock& clock,
                   int64_t orphan_timeout_ms)
    : table_(table), outbox_(outbox), clock_(clock), orphan_timeout_ms_(orphan_timeout_ms) {
  disconnected_since_ms_ = clock_.NowMonotonicMs();
}

uint64_t Reporter::Connected() {
  const uint64_t gen = ++link_gen_;
  connected_ = true;
  return gen;
}

void Reporter::Disconnected() {
  if (connected_.exchange(false)) disconnected_since_ms_ = clock_.NowMonotonicMs();
  ++link_gen_;
}

bool Reporter::Send(const v1::WorkerMessage& msg) {
  // A report never leaves before the snapshot that BuildRegister reads reflects it.
  table_.Publish();
  if (!LinkUp()) return false;
  return outbox_.Send(msg);
}

bool Reporter::Resync(uint64_t gen, uint64_t since_seq, int heartbeat_ms) {
  if (gen != link_gen_) return false;  // that connection is gone already
  sending_gen_ = gen;
  // What happened after the Register's snapshot, which therefore it did not carry.
  for (const auto& [key, a] : table_.attempts()) {
    for (const auto& r : a.ranks) {
      if (r->start_seq > since_seq) {
        if (r->launch_failed) {
          v1::WorkerMessage out;
          v1::LaunchFailed* f = out.mutable_launch_failed();
          f->set_job_id(a.job_id);
          f->set_job_uid(a.job_uid);
          f->set_attempt(a.attempt);
          f->set_rank(r->rank);
          f->set_error(r->launch_error);
          Send(out);
        } else {
          SendStarted(a, *r);
        }
      }
      if (r->exit_seq > since_seq) SendExited(a, *r);
    }
  }
  heartbeat_ms_ = heartbeat_ms;
  next_heartbeat_ms_ = clock_.NowMonotonicMs() + heartbeat_ms_;
  if (orphaned_) spdlog::info("the coordinator is reachable again");
  orphaned_ = false;
  return true;
}

void Reporter::SendStarted(const Attempt& a, const Rank& r) {
  v1::WorkerMessage out;
  v1::ProcessStarted* s = out.mutable_process_started();
  s->set_job_id(a.job_id);
  s->set_job_uid(a.job_uid);
  s->set_attempt(a.attempt);
  s->set_rank(r.rank);
  s->set_local_rank(r.local_rank);
  s->set_pid(r.pid);
  Send(out);
}

void Reporter::SendExited(const Attempt& a, const Rank& r) {
  v1::WorkerMessage out;
  v1::ProcessExited* e = out.mutable_process_exited();
  e->set_job_id(a.job_id);
  e->set_job_uid(a.job_uid);
  e->set_attempt(a.attempt);
  e->set_rank(r.rank);
  e->set_local_rank(r.local_rank);
  e->set_pid(r.pid);
  *e->mutable_exit() = r.exit;
  Send(out);
}

void Reporter::RefuseLaunch(const v1::Launch& launch, int rank, const std::string& why) {
  spdlog::error("job {} attempt {}: cannot launch rank {}: {}", launch.job_id(), launch.attempt(),
                rank, why);
  v1::WorkerMessage out;
  v1::LaunchFailed* f = out.mutable_launch_failed();
  f->set_job_id(launch.job_id());
  f->set_job_uid(launch.job_uid());
  f->set_attempt(launch.attempt());
  f->set_rank(rank);
  f->set_error(why);
  Send(out);
}

void Reporter::SendHeartbeat(int64_t now, const std::vector<v1::StoppedRank>& stopped) {
  next_heartbeat_ms_ = now + heartbeat_ms_;
  v1::WorkerMessage hb;
  hb.mutable_heartbeat()->set_time_unix_ms(clock_.NowUnixMs());
  for (const v1::StoppedRank& s : stopped) *hb.mutable_heartbeat()->add_stopped() = s;
  if (health_ != nullptr)
    *hb.mutable_heartbeat()->mutable_health() = HealthToProto(health_->Latest());
  Send(hb);
}

int64_t Reporter::OrphanDueMs() const {
  if (connected_ || orphaned_) return kNever;
  return disconnected_since_ms_ + orphan_timeout_ms_ + 1;
}

bool Reporter::TakeOrphaned(int64_t now) {
  // No coordinator for too long: ranks running on their own would never be reported or
  // stopped, and would hold their slots and their peers in collectives forever.
  if (connected_ || orphaned_ || now - disconnected_since_ms_ <= orphan_timeout_ms_) return false;
  orphaned_ = true;
  return true;
}

}  // namespace convoy
