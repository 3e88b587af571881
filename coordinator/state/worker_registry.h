// The coordinator's view of its workers: who is connected, when each was last heard from,
// and who is lost. Plain C++ with an injected Clock.
//
// Threading: not thread-safe; the Coordinator calls it with its state lock held (directly,
// and through JobManager).
//
// Cost: every event is O(log workers); ExpireLost is O(workers that expire), because the
// workers are kept in the order they were last heard from; the counts by state and the
// READY slots are kept as things change, so reading them is O(1).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "convoy/v1/job.pb.h"
#include "convoy/v1/worker.pb.h"

namespace convoy {

// Whether `health` lets its worker take new ranks: HEALTH_OK, or a worker older than health
// checks (HEALTH_STATE_UNSPECIFIED), placed on as before.
bool HealthAllowsRanks(const v1::WorkerHealth& health);
// Whether new ranks may be placed on `w`: READY, neither drained nor cordoned, and healthy.
bool TakesNewRanks(const v1::WorkerInfo& w);
// Why new ranks are not placed on `w` ("unhealthy: <reason>", "cordoned: <reason>",
// "drained"), or empty when they are (or when it is not READY).
std::string WhyNoNewRanks(const v1::WorkerInfo& w);

class WorkerRegistry {
 public:
  WorkerRegistry(const Clock& clock, int64_t worker_timeout_ms)
      : clock_(clock), worker_timeout_ms_(worker_timeout_ms) {}
  WorkerRegistry(const WorkerRegistry&) = delete;
  WorkerRegistry& operator=(const WorkerRegistry&) = delete;

  // Records a (re)registration: the worker is READY and heard from now.
  void OnRegister(const v1::Register& reg);

  // Any message from the worker counts as a heartbeat. Does not revive a LOST worker (only a
  // registration does).
  void OnHeard(const std::string& name);

  // The stream to the worker broke: it is UNREACHABLE until it comes back or times out.
  void OnDisconnect(const std::string& name);

  // Adds a worker known from the store after a coordinator restart: UNREACHABLE, heard from
  // now, so that it has a full timeout to reconnect.
  void Restore(const v1::WorkerInfo& info);

  // Marks workers not heard from for the timeout as LOST and returns their names (each name
  // once, when it becomes lost), oldest silence first.
  std::vector<std::string> ExpireLost();

  // READY workers, by name.
  std::vector<const v1::WorkerInfo*> Ready() const;

  // Drains (`by` names who) or undrains a known worker; nullptr when unknown. A drained
  // worker keeps its state (it stays connected and its ranks run); only placement skips it.
  // Registering again does not undrain it.
  const v1::WorkerInfo* SetDrained(const std::string& name, bool drained, const std::string& by);

  // ---- When nodes are sick (README)
  // The worker's health as its last check found it (Register and Heartbeat carry it); true
  // when whether it takes new ranks changed. Unknown workers are ignored (false).
  bool SetHealth(const std::string& name, const v1::WorkerHealth& health);
  // Cordons (with `reason`, `by` naming who: "coordinator" when automatic) or uncordons a
  // known worker; nullptr when unknown. Like a drain, registering again keeps it.
  const v1::WorkerInfo* SetCordoned(const std::string& name, bool cordoned,
                                    const std::string& reason, const std::string& by);

  // Removes a known worker (an admin forgot it), whatever its state, keeping the counts;
  // false when unknown. The caller decides whether it may go (JobManager::ForgetWorker). A
  // later registration of the name is a new worker.
  bool Forget(const std::string& name);

  // nullptr when unknown.
  const v1::WorkerInfo* Find(const std::string& name) const;
  bool IsReady(const std::string& name) const;

  // Every known worker, by name, with last_heartbeat_unix_ms filled in.
  std::vector<v1::WorkerInfo> List() const;
  // At most `limit` workers whose names sort after `after` (empty: from the first), by name;
  // `more` says whether others follow. O(log workers + limit).
  std::vector<v1::WorkerInfo> ListAfter(const std::string& after, size_t limit, bool* more) const;

  // How many known workers are in each state (states with none are absent). O(1).
  const std::map<v1::WorkerState, int>& counts() const { return counts_; }
  // The slots of the READY workers, summed. O(1).
  int64_t ready_slots() const { return ready_slots_; }

  int64_t worker_timeout_ms() const { return worker_timeout_ms_; }

 private:
  struct Entry {
    v1::WorkerInfo info;
    int64_t last_heard_mono_ms = 0;
    bool in_heard_order = false;             // in heard_order_ (every worker not LOST)
    std::list<std::string>::iterator heard;  // its place there
  };
  // Moves `e` to `state`, keeping the counts.
  void SetState(Entry& e, v1::WorkerState state);
  // `e` was heard from now: the newest in heard_order_.
  void Heard(Entry& e);

  const Clock& clock_;
  const int64_t worker_timeout_ms_;
  std::map<std::string, Entry> workers_;
  // Names of the workers that are not LOST, least recently heard from first.
  std::list<std::string> heard_order_;
  std::map<v1::WorkerState, int> counts_;
  int64_t ready_slots_ = 0;
};

}  // namespace convoy
