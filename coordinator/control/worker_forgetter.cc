#include "coordinator/control/worker_forgetter.h"

#include <memory>
#include <utility>

namespace convoy {

WorkerForgetter::Outcome WorkerForgetter::Combine(StatusOr<JobManager::ForgottenWorker> forgotten,
                                                  const StatusOr<bool>& had_certificate) {
  Outcome out;
  out.status = forgotten.status();
  if (forgotten.ok()) out.forgotten = std::move(*forgotten);
  if (!had_certificate.ok()) {
    out.status = had_certificate.status();
  } else if (*had_certificate && !out.status.ok()) {
    out.status = Status::Ok();  // joined, never registered: its record was what was left
  }
  return out;
}

void WorkerForgetter::Forget(const std::string& name, const std::string& by,
                             std::function<void(Outcome)> done) {
  auto shared = std::make_shared<std::function<void(Outcome)>>(std::move(done));
  coordinator_.ForgetWorker(
      name, by, [this, name, shared](StatusOr<JobManager::ForgottenWorker> forgotten) {
        // On the commit thread: only what needs no store is decided here.
        const StatusCode code = forgotten.status().code();
        if (tokens_ == nullptr || (!forgotten.ok() && code != StatusCode::kNotFound)) {
          Outcome out;
          out.status = forgotten.status();
          if (forgotten.ok()) out.forgotten = std::move(*forgotten);
          (*shared)(std::move(out));
          return;
        }
        thread_.Post([this, name, shared, forgotten = std::move(forgotten)]() mutable {
          (*shared)(Combine(std::move(forgotten), tokens_->ForgetCertificate(name)));
        });
      });
}

}  // namespace convoy
