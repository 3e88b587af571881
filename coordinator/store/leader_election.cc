#include "coordinator/store/leader_election.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace convoy {

LeaderElection::LeaderElection(EtcdClient& client, Options options)
    : client_(client), options_(std::move(options)) {}

LeaderElection::~LeaderElection() { Resign(); }

std::string LeaderElection::Leader() {
  auto kv = client_.Get(options_.key);
  return kv.ok() ? kv->value() : "";
}

Status LeaderElection::Campaign(const std::function<bool()>& stop) {
  std::string last_seen = "-";
  std::string last_error;
  while (!stop()) {
    if (lease_ == 0) {
      auto lease = client_.GrantLease(options_.ttl_s);
      if (lease.ok()) {
        lease_ = *lease;
      } else if (lease.status().message() != last_error) {
        last_error = lease.status().message();
        spdlog::warn("leader election: {}; retrying", last_error);
      }
    }
    if (lease_ != 0) {
      // Create the key, bound to our lease, only where it is absent; else read who holds it.
      auto resp = client_.CreateIfAbsent(options_.key, options_.value, lease_);
      if (resp.ok() && resp->created) {
        revision_ = resp->revision;
        spdlog::info("leader election: this coordinator ({}) leads (election key {}, revision {})",
                     options_.value, options_.key, revision_);
        return Status::Ok();
      }
      if (resp.ok()) {
        const std::string& holder = resp->value;
        if (holder != last_seen) {
          spdlog::info("leader election: following {}; taking over when its lease ends",
                       holder.empty() ? "nobody yet" : holder);
          last_seen = holder;
        }
        // Our lease must outlive the wait: renew it (or get a new one if it expired).
        if (!client_.KeepAlive(lease_).ok()) lease_ = 0;
      } else if (resp.status().message() != last_error) {
        last_error = resp.status().message();
        spdlog::warn("leader election: {}; retrying", last_error);
      }
    }
    if (WaitForStop(options_.poll_ms)) break;
  }
  if (lease_ != 0) {
    client_.RevokeLease(lease_);  // a follower that stops leaves no lease behind
    lease_ = 0;
  }
  return Status::Unavailable("leader election: stopped before this coordinator led");
}

void LeaderElection::StartRenewal(std::function<void(const std::string&)> on_lost) {
  renewal_ = std::thread([this, on_lost = std::move(on_lost)] { Renew(on_lost); });
}

void LeaderElection::Renew(std::function<void(const std::string&)> on_lost) {
  auto last_ok = std::chrono::steady_clock::now();
  while (!WaitForStop(options_.renew_ms)) {
    Status st = client_.KeepAlive(lease_);
    const auto now = std::chrono::steady_clock::now();
    std::string lost;
    if (st.ok()) {
      last_ok = now;
    } else if (st.code() == StatusCode::kNotFound) {
      lost = "its etcd lease expired (another coordinator may lead now)";
    } else if (now - last_ok >= std::chrono::seconds(options_.ttl_s)) {
      lost = "its etcd lease could not be renewed for " + std::to_string(options_.ttl_s) + " s (" +
             st.message() + ")";
    }
    if (!lost.empty() && !WaitForStop(0)) {
      on_lost("this coordinator is no longer the leader: " + lost);
      return;
    }
  }
}

bool LeaderElection::WaitForStop(int64_t ms) {
  MutexLock lock(mu_);
  if (!stop_ && ms > 0) cv_.WaitFor(mu_, std::chrono::milliseconds(ms));
  return stop_;
}

void LeaderElection::Resign() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (renewal_.joinable()) renewal_.join();
  if (lease_ != 0) {
    client_.RevokeLease(lease_);
    lease_ = 0;
  }
}

}  // namespace convoy
