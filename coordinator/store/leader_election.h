// Leader election among coordinators on one etcd (issue 30), as etcd's concurrency.Election
// does it: each coordinator holds a lease; the leader is the one whose transaction created
// the election key (`<prefix>leader`, bound to its lease, holding its address) while the key
// was absent. The key's create revision is the leader's fencing token: the etcd store
// compares it in every write (EtcdJobStore::SetFence), so that a coordinator that lost its
// lease can never write again, even if it does not know yet that it lost.
//
// A follower polls the key: when its holder's lease ends (a clean stop revokes it at once; a
// kill -9 lets it expire after `ttl_s`), the next campaign wins. The leader renews its lease
// every `renew_ms`; when a renewal finds the lease gone, or none succeeds for `ttl_s` (etcd
// unreachable, this process paused), `on_lost` runs once: the coordinator must stop acting
// at once (crash-only: it exits, and systemd restarts it as a follower).
//
// Threading: Campaign and Resign from one thread; the renewal runs on a thread of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"
#include "coordinator/store/etcd_client.h"

namespace convoy {

class LeaderElection {
 public:
  struct Options {
    std::string key;    // "<prefix>leader"
    std::string value;  // who this coordinator is (its advertised address), for followers
    int64_t ttl_s = 2;
    int64_t renew_ms = 500;
    int64_t poll_ms = 250;  // how often a follower looks at the key
  };
  LeaderElection(EtcdClient& client, Options options);
  // Resigns (as Resign) if leading.
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Blocks until this coordinator leads: OK, and revision() is its fencing token. Logs who
  // leads meanwhile, each time that changes. Returns CANCELLED-like UNAVAILABLE("stopped")
  // when `stop` says so (checked every poll), or an error etcd gave that retrying cannot
  // mend. etcd being unreachable is retried (and logged once a change).
  Status Campaign(const std::function<bool()>& stop);
  // After Campaign: renews the lease on a thread of its own; `on_lost` (with why) once the
  // leadership is lost.
  void StartRenewal(std::function<void(const std::string& why)> on_lost);
  // Ends the renewal and revokes the lease: the key goes at once and a follower takes over
  // without waiting for the TTL (a clean stop).
  void Resign();

  int64_t revision() const { return revision_; }
  int64_t lease() const { return lease_; }
  // Who holds the key now (its value), or "" when nobody does or etcd cannot be reached.
  std::string Leader();

 private:
  void Renew(std::function<void(const std::string&)> on_lost);

  EtcdClient& client_;
  const Options options_;
  int64_t lease_ = 0;
  int64_t revision_ = 0;
  // Waits up to `ms` (0: not at all) for Resign; whether it was called.
  bool WaitForStop(int64_t ms) EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread renewal_;
};

}  // namespace convoy
