#include "coordinator/control/join_admission.h"

#include "common/util.h"

namespace convoy {

StatusOr<std::string> JoinAdmission::Holder(const std::string& name) {
  if (connected_ && connected_(name)) return std::string("a connected worker");
  auto not_after = tokens_.CertificateNotAfter(name);
  if (!not_after.ok()) return not_after.status();
  if (*not_after > clock_.NowUnixMs() / 1000) {
    return "a worker certificate valid until " + UtcIso8601(*not_after);
  }
  return std::string();
}

StatusOr<TokenRecord> JoinAdmission::Join(const std::string& token, const std::string& name,
                                          const std::function<StatusOr<int64_t>()>& issue) {
  MutexLock lock(mu_);
  auto record = tokens_.Check(token, clock_.NowUnixMs(), false);
  if (!record.ok()) return record.status();
  if (!record->name.empty() && record->name != name) {
    return Status::PermissionDenied("name: join token " + record->id + " joins only as '" +
                                    record->name + "', not '" + name + "'");
  }
  if (record->name.empty()) {
    // An unbound token takes only a free name: a leaked one cannot replace a live worker.
    auto holder = Holder(name);
    if (!holder.ok()) return holder.status();
    if (!holder->empty()) {
      return Status::AlreadyExists(
          "name: '" + name + "' is held by " + *holder +
          "; join it with a token bound to it (convoy-coordinator token create --role worker "
          "--name " +
          name + "), or have an admin run `convoy worker forget " + name +
          "` once that worker is gone");
    }
  }
  // The use is taken only now that the request is known to be well formed and allowed.
  auto used = tokens_.Check(token, clock_.NowUnixMs(), true);
  if (!used.ok()) return used.status();
  auto not_after = issue();
  if (!not_after.ok()) return not_after.status();
  CONVOY_RETURN_IF_ERROR(tokens_.RecordCertificate(name, *not_after));
  return record;
}

}  // namespace convoy
