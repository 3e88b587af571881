// Who may join the cluster as which worker name (JoinService.Join, issue 28): a join token
// bound to a name joins only as that name, and may take it while it is held (replacing that
// machine); an unbound one takes only a name nobody holds (no connected worker, no worker
// certificate that has not expired), so that a leaked token cannot replace a live worker. A
// token's use is taken only once the request is known to be allowed, and the check that a
// name is free and the record of its new certificate are one step.
//
// Threading: any thread. Joins wait on each other (they are rare: one lock of its own), never
// on the coordinator's state lock; each makes a few token-store calls.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "coordinator/store/token_store.h"

namespace convoy {

class JoinAdmission {
 public:
  // `connected(name)`: whether a worker of that name has its stream open now. `tokens` and
  // `clock` outlive this.
  JoinAdmission(TokenStore& tokens, const Clock& clock,
                std::function<bool(const std::string&)> connected)
      : tokens_(tokens), clock_(clock), connected_(std::move(connected)) {}

  // Admits `token` (the bearer token's text) to join as `name`; then `issue` signs the
  // worker's certificate and returns its not-after (Unix s), which is recorded as the name's.
  // Returns the token's record. Refusals: the token's (UNAUTHENTICATED), PERMISSION_DENIED
  // for a token bound to another name, ALREADY_EXISTS for a name held (both naming the field
  // `name`); else `issue`'s error or the store's.
  StatusOr<TokenRecord> Join(const std::string& token, const std::string& name,
                             const std::function<StatusOr<int64_t>()>& issue) EXCLUDES(mu_);

  // Who holds `name` now ("a connected worker", "a worker certificate valid until ...");
  // empty: nobody, an unbound join token may take it.
  StatusOr<std::string> Holder(const std::string& name);

 private:
  TokenStore& tokens_;
  const Clock& clock_;
  const std::function<bool(const std::string&)> connected_;
  Mutex mu_;  // one Join at a time
};

}  // namespace convoy
