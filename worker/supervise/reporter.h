// The supervisor's side of the report protocol: every report to the coordinator goes out
// through Send, which first publishes the attempt table's snapshot (a report never leaves
// before the snapshot a Register would read reflects it), and only while the link is up and
// resynchronised. Reconnection: a Register records the event number it reflects
// (RegisterBuilt); once the coordinator acknowledges it, Resync sends what happened after that
// number and from then on reports go directly. Nothing produced while disconnected is queued
// here: the next Register carries the state instead. Also the heartbeats, and the orphan
// timeout (no coordinator for --orphan-timeout).
//
// Threading: Connected, Disconnected, connected, link_gen, RegisterBuilt and register_seq
// from any thread (atomics); everything else on the supervisor thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/worker.pb.h"
#include "worker/host/health.h"
#include "worker/link/report_queue.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/worker_config.h"

namespace convoy {

// The Register that opens every stream: what `config` offers and what `snapshot` reports,
// with the snapshot directories in host memory under config.snapshot_root.
// `health`: the newest health report, when the worker checks its health.
v1::Register MakeRegister(const WorkerConfig& config, const AttemptSnapshot& snapshot,
                          const HealthMonitor* health = nullptr);

// A health report as the coordinator reads it (Register.health, Heartbeat.health).
v1::WorkerHealth HealthToProto(const HealthReport& report);

class Reporter {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  // `orphan_timeout_ms`: how long without a coordinator before TakeOrphaned says so.
  Reporter(AttemptTable& table, Outbox& outbox, const Clock& clock, int64_t orphan_timeout_ms);

  // ---- Any thread.
  // A stream registered: returns its generation, which its Resync names.
  uint64_t Connected();
  // The stream broke: the orphan timeout starts now.
  void Disconnected();
  bool connected() const { return connected_; }
  uint64_t link_gen() const { return link_gen_; }
  // The event number the last Register reflected (BuildRegister), for the next Resync.
  void RegisterBuilt(uint64_t seq) { register_seq_ = seq; }
  uint64_t register_seq() const { return register_seq_; }

  // ---- Supervisor thread.
  // Whether the link is up and resynchronised: reports go out.
  bool LinkUp() const { return connected_ && sending_gen_ == link_gen_; }
  // Sends when the link is up; false otherwise (the message is dropped).
  bool Send(const v1::WorkerMessage& msg);
  // The stream of generation `gen` was acknowledged (heartbeats every `heartbeat_ms`): sends
  // every start, launch failure and exit numbered after `since_seq`, and from now on sends
  // directly. False, sending nothing, when that stream is gone already.
  bool Resync(uint64_t gen, uint64_t since_seq, int heartbeat_ms);
  void SendStarted(const Attempt& a, const Rank& r);
  void SendExited(const Attempt& a, const Rank& r);
  // Tells the coordinator that `rank` of `launch` cannot start, and why (logged too).
  void RefuseLaunch(const v1::Launch& launch, int rank, const std::string& why);

  // When the next heartbeat is due (kNever while the link is down).
  int64_t NextHeartbeatMs() const { return LinkUp() ? next_heartbeat_ms_ : kNever; }
  // Sends the heartbeat due at `now`, naming `stopped` ranks, with the newest health report.
  void SendHeartbeat(int64_t now, const std::vector<v1::StoppedRank>& stopped);
  // Where heartbeats read the worker's health (set once, before the supervisor starts).
  void UseHealth(const HealthMonitor* health) { health_ = health; }
  const HealthMonitor* health() const { return health_; }

  // When the orphan timeout expires (kNever while connected, or once it did).
  int64_t OrphanDueMs() const;
  // True once, the first time `now` is past the orphan timeout while disconnected.
  bool TakeOrphaned(int64_t now);

 private:
  AttemptTable& table_;
  Outbox& outbox_;
  const Clock& clock_;
  const int64_t orphan_timeout_ms_;

  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> link_gen_{0};  // bumped by every connect and disconnect
  std::atomic<int64_t> disconnected_since_ms_{0};
  std::atomic<uint64_t> register_seq_{0};

  // Supervisor thread only.
  uint64_t sending_gen_ = ~uint64_t{0};  // link_gen_ whose resync has been sent
  int heartbeat_ms_ = 1000;
  int64_t next_heartbeat_ms_ = 0;
  bool orphaned_ = false;
  const HealthMonitor* health_ = nullptr;
};

}  // namespace convoy
