// The coordinator's view of its workers: who is connected, when each was last heard from,
// and who is lost. Plain C++ with an injected Clock; not thread-safe (the coordinator's state
// lock guards it).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

class WorkerRegistry {
 public:
  WorkerRegistry(const Clock& clock, int64_t worker_timeout_ms)
      : clock_(clock), worker_timeout_ms_(worker_timeout_ms) {}

  // Records a (re)registration: the worker is READY and heard from now.
  void OnRegister(const v1::Register& reg);

  // Any message from the worker counts as a heartbeat.
  void OnHeard(const std::string& name);

  // The stream to the worker broke: it is UNREACHABLE until it comes back or times out.
  void OnDisconnect(const std::string& name);

  // Adds a worker known from the store after a coordinator restart: UNREACHABLE, heard from
  // now, so that it has a full timeout to reconnect.
  void Restore(const v1::WorkerInfo& info);

  // Marks workers not heard from for the timeout as LOST and returns their names (each name
  // once, when it becomes lost).
  std::vector<std::string> ExpireLost();

  // READY workers.
  std::vector<const v1::WorkerInfo*> Ready() const;

  // nullptr when unknown.
  const v1::WorkerInfo* Find(const std::string& name) const;
  bool IsReady(const std::string& name) const;

  // Every known worker, by name, with last_heartbeat_unix_ms filled in.
  std::vector<v1::WorkerInfo> List() const;

  int64_t worker_timeout_ms() const { return worker_timeout_ms_; }

 private:
  struct Entry {
    v1::WorkerInfo info;
    int64_t last_heard_mono_ms = 0;
  };
  const Clock& clock_;
  const int64_t worker_timeout_ms_;
  std::map<std::string, Entry> workers_;
};

}  // namespace convoy
