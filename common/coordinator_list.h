// The coordinators a worker or the CLI was given (--coordinator A:7070 or, for a group on
// etcd with one leader, A:7070,B:7070,C:7070: README "High availability"). Each is dialled by
// its own name, so that TLS checks each coordinator's certificate against the name it was
// reached by; one channel over all of their addresses would check every one of them against
// a single name, and refuse all but one (FACTS: "Peer name A,B is not in peer certificate").
// A name with several addresses (DNS) is one entry: gRPC tries its addresses in turn.
//
// Followers do not listen, so a caller tries the current one, and after a failure moves on
// with Next(): at once while some in the round are untried, then with its backoff.
//
// Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace convoy {

class CoordinatorList {
 public:
  // `coordinators` as --coordinator takes it (checked by CheckCoordinators).
  explicit CoordinatorList(const std::string& coordinators);

  size_t size() const { return entries_.size(); }
  // The one to dial now.
  std::string current() const EXCLUDES(mu_);
  // current() did not answer: the next one. False while some coordinator of this round (the
  // failures since the last MarkGood) is still untried, so the caller tries it at once; true
  // when every one has failed: time for the caller's backoff.
  bool Next() EXCLUDES(mu_);
  // current() answered: a new round starts from it.
  void MarkGood() EXCLUDES(mu_);

  // For one-shot callers (the CLI): a channel to the first coordinator, from current() on,
  // that connects within `timeout_ms` (followers refuse at once); when none does, one to
  // current(), whose calls then fail saying why. `make` builds a channel to one HOST:PORT.
  std::shared_ptr<grpc::Channel> Connect(
      const std::function<std::shared_ptr<grpc::Channel>(const std::string&)>& make,
      int timeout_ms);

 private:
  const std::vector<std::string> entries_;
  mutable Mutex mu_;
  size_t at_ GUARDED_BY(mu_) = 0;
  size_t failures_ GUARDED_BY(mu_) = 0;
};

}  // namespace convoy
