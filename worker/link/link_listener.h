// What the coordinator connection (worker/link/coordinator_connection.h) tells the rest of the
// worker and asks of it: the supervisor implements it. The connection calls it from its own
// thread; an implementation never blocks on process work there.
#pragma once

#include <string>
#include <vector>

#include "convoy/v1/worker.pb.h"

namespace convoy {

class LinkListener {
 public:
  virtual ~LinkListener() = default;
  // The Register that opens every stream: what the worker offers and what it still runs.
  virtual v1::Register BuildRegister() = 0;
  // The coordinator acknowledged the last BuildRegister; heartbeats every
  // `heartbeat_interval_ms`. `stale_snapshot_keys`: RegisterAck's.
  virtual void OnConnected(int heartbeat_interval_ms,
                           std::vector<std::string> stale_snapshot_keys) = 0;
  // The stream of the last OnConnected broke.
  virtual void OnDisconnected() = 0;
  // A message from the coordinator, in the order the stream delivered it.
  virtual void Post(const v1::CoordinatorMessage& msg) = 0;
};

}  // namespace convoy
