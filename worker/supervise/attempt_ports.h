// Master ports for attempts (ReservePort): reserved through PortReservations
// (worker/exec/port_reservations.h), answered with PortReserved, and held bound until the
// attempt's ranks have ended here; a reservation for an attempt that never launches here goes
// after PortReservations::kHoldMs, or at once when the coordinator kills it. A launch still
// being prepared (its checkpoints copied, its code unpacked) holds its port as one that runs.
//
// Threading: the supervisor thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/clock.h"
#include "convoy/v1/worker.pb.h"
#include "worker/exec/port_reservations.h"
#include "worker/host/attempt_key.h"
#include "worker/supervise/attempt_table.h"
#include "worker/supervise/reporter.h"

namespace convoy {

class AttemptPorts {
 public:
  // Whether a launch of that key is being prepared (LaunchAdmission::Preparing).
  using Preparing = std::function<bool(const AttemptKey&)>;

  // `address`: the worker's advertised address (ports are bound there first).
  AttemptPorts(std::string address, const Clock& clock, const AttemptTable& table,
               Reporter& reporter, Preparing preparing);

  // Reserves (or finds) the attempt's port and answers with PortReserved.
  void Reserve(const v1::ReservePort& req);
  // Releases `key`'s (a Kill of an attempt never launched here).
  void Release(const AttemptKey& key) { ports_.Release(key); }
  // Releases those whose attempt ended, or that were held too long for one not here.
  void ReleaseUnused();
  void ReleaseAll() { ports_.ReleaseAll(); }
  // When the first reservation for an attempt not here expires (kNever: none will).
  int64_t NextExpiryMs() const;
  // Where attempt `key` stands here.
  PortReservations::Use UseOf(const AttemptKey& key) const;

 private:
  const AttemptTable& table_;
  Reporter& reporter_;
  const Preparing preparing_;
  PortReservations ports_;
};

}  // namespace convoy
