// The coordinator's durable state in etcd v3 (issue 30), behind the same JobStore interface as
// SQLite: for clusters that must not lose their queue, history and state with one machine.
//
// Keys, under a prefix that is this cluster's (--etcd-prefix, default "/convoy/"):
//   job/<id>                 v1.Job without its events (attempts included)
//   event/<id>/<seq>         v1.JobEvent, seq from 1, 12 digits (the job's log in order)
//   worker/<name>            v1.WorkerInfo
//   metrics/<id>             v1.JobMetrics (a job's whole metric history: up to 2.6 MB)
//   deletion/<worker>/<id>   a pending file deletion; the value is the job's uid
//
// Writes: Write() applies a batch as few transactions as etcd's limits allow: at most
// kMaxOpsPerTxn operations (etcd's --max-txn-ops default) and kMaxTxnBytes each, a key at
// most once per transaction, and one StoreWrite never split. A batch that needs several is
// applied in order, each transaction all or nothing: a failure part-way leaves a prefix of the
// batch, which is a state the coordinator passed through (it acts on none of it before
// Write returns OK, and reconciles with the workers on restart). A job's metric history is
// one value: etcd must accept requests of kMaxValueBytes (its --max-request-bytes at 8 MiB;
// its default of 1.5 MiB refuses the largest histories, with an error naming the job).
//
// Fencing: with SetFence, every transaction also compares the election key's create
// revision, so that a coordinator that lost its leadership (its lease expired, another
// won) can never write again: its transactions fail with FAILED_PRECONDITION.
//
// Threading: as JobStore (one caller at a time: the commit thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/store/etcd_client.h"
#include "coordinator/store/job_store.h"

namespace convoy {

// The cluster's id kept in etcd at `<prefix>cluster-id`: every coordinator of the cluster
// reads the same one; the first to start writes `candidate` there (`*made` true).
StatusOr<std::string> LoadOrMakeEtcdClusterId(EtcdClient& client, const std::string& prefix,
                                              const std::string& candidate, bool* made);

class EtcdJobStore : public JobStore {
 public:
  static constexpr int kMaxOpsPerTxn = 128;
  static constexpr size_t kMaxTxnBytes = 1 << 20;
  static constexpr size_t kMaxValueBytes = 7 << 20;

  // `prefix` must end with '/'. The client must outlive the store.
  EtcdJobStore(EtcdClient& client, std::string prefix);

  // From now on every write also requires `key` to exist with `create_revision` (the
  // leader's election key); a write refused by it is FAILED_PRECONDITION.
  void SetFence(std::string key, int64_t create_revision);

  Status SaveJob(const v1::Job& job, const v1::JobEvent* event) override;
  StatusOr<std::vector<v1::Job>> LoadJobs() override;
  Status SaveWorker(const v1::WorkerInfo& worker) override;
  StatusOr<std::vector<v1::WorkerInfo>> LoadWorkers() override;
  Status DeleteWorker(const std::string& name) override;
  Status SaveJobMetrics(const v1::JobMetrics& job_metrics) override;
  StatusOr<std::vector<v1::JobMetrics>> LoadJobMetrics() override;
  Status DeleteJob(const std::string& id) override;
  Status SaveFileDeletion(const FileDeletion& deletion, bool pending) override;
  StatusOr<std::vector<FileDeletion>> LoadFileDeletions() override;
  Status Write(const std::vector<StoreWrite>& writes) override;

 private:
  // The operations of one StoreWrite, never split across transactions.
  struct Group {
    std::vector<etcdserverpb::RequestOp> ops;
    size_t bytes = 0;
  };
  Status AddOps(const StoreWrite& w, Group* g);
  // The next event number of job `id` (its stored events' count + 1, asked once per job).
  StatusOr<int64_t> NextEventSeq(const std::string& id);
  Status Commit(const std::vector<Group>& groups);
  Status CommitOne(const std::vector<const etcdserverpb::RequestOp*>& ops);

  EtcdClient& client_;
  const std::string prefix_;
  std::string fence_key_;
  int64_t fence_revision_ = 0;
  std::map<std::string, int64_t> next_event_;  // job id -> its next event's seq
  // The first event seq each job got in the batch Write is making (restored on failure).
  std::map<std::string, int64_t> batch_first_event_;
};

}  // namespace convoy
