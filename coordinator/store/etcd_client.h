// A small client of etcd v3's gRPC API (proto/etcd): ranges, transactions and leases, over
// every member given, moving to the next member when one is unreachable or has lost its
// quorum. What the etcd store (etcd_job_store.h) and leader election need, nothing more.
//
// Threading: thread-safe (gRPC stubs; the member table under its own mutex, never held over a
// call); each call blocks for at most the call timeout per member tried.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace convoy {

struct EtcdOptions {
  // HOST:PORT of each member.
  std::vector<std::string> endpoints;
  // PEM files: the CA that signed the members' certificates, and this client's certificate
  // and key (etcd's --client-cert-auth). All empty: plain text (a loopback etcd).
  std::string ca_file, cert_file, key_file;
  // Each call's deadline at one member.
  int64_t call_timeout_ms = 3000;
};

// "etcd://HOST:PORT,HOST:PORT" (the coordinator's --store) into endpoints; INVALID_ARGUMENT
// naming `flag` when it is not that form.
StatusOr<std::vector<std::string>> ParseEtcdUrl(const std::string& flag, const std::string& url);

// The end of the range of every key that starts with `prefix` (etcd's range_end).
std::string EtcdPrefixEnd(const std::string& prefix);

class EtcdClient {
 public:
  // Reads the CA and key files (INVALID_ARGUMENT naming the file) and makes one channel per
  // member; connects lazily.
  static StatusOr<std::unique_ptr<EtcdClient>> Create(const EtcdOptions& options);

  // Every key and value under `prefix`, in key order (paged: any number of keys).
  StatusOr<std::vector<mvccpb::KeyValue>> GetPrefix(const std::string& prefix);
  // One key; NOT_FOUND when absent.
  StatusOr<mvccpb::KeyValue> Get(const std::string& key);
  // The transaction's response (check `succeeded()` for its comparisons' outcome).
  StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  // Puts `key` = `value` (bound to `lease`, 0: none) only where the key is absent, in one
  // transaction: `created`, and the store's revision then (the key's create revision), or
  // the value that holds it already.
  struct Created {
    bool created = false;
    int64_t revision = 0;
    std::string value;  // when not created: the holder's value
  };
  StatusOr<Created> CreateIfAbsent(const std::string& key, const std::string& value,
                                   int64_t lease = 0);
  // A lease of `ttl_s` seconds; its id.
  StatusOr<int64_t> GrantLease(int64_t ttl_s);
  // Renews `lease` once; NOT_FOUND when it has expired (its keys are gone).
  Status KeepAlive(int64_t lease);
  Status RevokeLease(int64_t lease);
  // The cluster's id and the answering member's id, raft term and leader (health and
  // --check-config).
  StatusOr<etcdserverpb::StatusResponse> MemberStatus();

 private:
  struct Member {
    std::string endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  };
  EtcdClient(EtcdOptions options, std::shared_ptr<grpc::ChannelCredentials> creds)
      : options_(std::move(options)), creds_(std::move(creds)) {}
  std::shared_ptr<Member> Dial(const std::string& endpoint) const;
  std::shared_ptr<Member> MemberAt(size_t i) EXCLUDES(mu_);
  // Replaces member i's channel with a fresh one, unless it was replaced since `failed` was
  // taken or less than kRedialIntervalMs ago. A channel whose first connect attempts ran
  // into a member that was not ready yet (or a host too loaded to finish the handshake in
  // time) can stay failing after the member is well ("tcp handshaker shutdown", "timed out
  // before receiving SETTINGS frame"); a new channel connects afresh, as the worker's
  // CoordinatorConnection dials anew for each reconnect.
  void Redial(size_t i, const std::shared_ptr<Member>& failed) EXCLUDES(mu_);
  // Runs `call` on the member last found working, then on each other one in turn while the
  // answer is UNAVAILABLE or DEADLINE_EXCEEDED (unreachable, or no quorum there); each member
  // that failed so is redialled. The last error names every member tried.
  template <typename Call>
  Status OnSomeMember(const char* what, Call&& call);

  static constexpr int64_t kRedialIntervalMs = 2000;
  const EtcdOptions options_;
  const std::shared_ptr<grpc::ChannelCredentials> creds_;
  Mutex mu_;
  std::vector<std::shared_ptr<Member>> members_ GUARDED_BY(mu_);
  std::vector<int64_t> dialled_ms_ GUARDED_BY(mu_);  // steady clock, per member
  std::atomic<size_t> current_{0};
};

// A gRPC status from etcd as a Convoy one: UNAVAILABLE stays (retry elsewhere or later), and so
// does a timeout, the client's or etcd's own (UNKNOWN "context deadline exceeded").
Status FromEtcd(const grpc::Status& status, const std::string& what);

}  // namespace convoy
