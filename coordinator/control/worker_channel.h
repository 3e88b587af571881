// How the coordinator's controllers send messages to connected workers.
#pragma once

#include <string>

#include "convoy/v1/worker.pb.h"

namespace convoy {

class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // Queues `msg` for worker `name`. Returns false when no stream to it is open. Never blocks.
  virtual bool Send(const std::string& name, const v1::CoordinatorMessage& msg) = 0;
};

}  // namespace convoy
