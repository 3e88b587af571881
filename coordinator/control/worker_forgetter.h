// Forgetting a worker (`convoy worker forget`, JobService.ForgetWorker): the Coordinator
// removes it from the registry (refused while its stream is open), then its name's
// certificate record goes from the token store, so that a join token may take the name
// again; also for a name that joined but never registered (NOT_FOUND in the registry), which
// then counts as forgotten when it had a record.
//
// Threading: Forget may be called from any thread. The certificate record is removed on a
// thread of its own (a SQLite transaction or an etcd round trip), never on the Coordinator's
// commit thread, where the registry's removal reports; `done` runs there, or on the commit
// thread when there is no token store (--insecure). The forgetter must outlive the
// Coordinator's commit thread (the server stops the Coordinator before destroying it).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "common/work_thread.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/store/token_store.h"

namespace convoy {

class WorkerForgetter {
 public:
  struct Outcome {
    Status status;
    // The registry's removal, when the registry had the worker.
    std::optional<JobManager::ForgottenWorker> forgotten;
  };

  // `tokens` null: --insecure (no certificate records).
  WorkerForgetter(Coordinator& coordinator, TokenStore* tokens)
      : coordinator_(coordinator), tokens_(tokens) {}

  // Forgets `name` (`by`: who asked, for the event); `done` gets the outcome once the
  // removal is durable and the record gone.
  void Forget(const std::string& name, const std::string& by, std::function<void(Outcome)> done);

  // The outcome, given the registry's answer and whether the name had a certificate record
  // (or the store's error asking).
  static Outcome Combine(StatusOr<JobManager::ForgottenWorker> forgotten,
                         const StatusOr<bool>& had_certificate);

 private:
  Coordinator& coordinator_;
  TokenStore* const tokens_;
  WorkThread thread_;
};

}  // namespace convoy
