// What one of the Coordinator's locked sections decided (`Effects`: durable writes, then
// messages, then callbacks), and the two recorders the JobManager decides through:
// `WriteBehindStore` (a JobStore whose writes are recorded, not made) and `StreamChannel` (a
// WorkerChannel whose messages are bound to the worker's current stream and recorded, not
// sent). At the end of the section the Coordinator hands the Effects to the CommitPipeline
// (commit_pipeline.h), which makes the writes durable and only then sends and calls back.
//
// Threading: the recorders are called by the JobManager with the state lock held (`state_mu`,
// which guards the Effects they record into); their Load* methods read the durable store
// (recovery, before anything else runs).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "convoy/v1/worker.pb.h"
#include "coordinator/control/worker_channel.h"
#include "coordinator/control/worker_streams.h"
#include "coordinator/store/job_store.h"

namespace convoy {

struct Effects {
  std::vector<StoreWrite> writes;
  std::vector<std::pair<std::shared_ptr<WorkerStream>, v1::CoordinatorMessage>> sends;
  std::vector<std::function<void()>> after;
  bool empty() const { return writes.empty() && sends.empty() && after.empty(); }
};

// The JobStore the JobManager writes to: each write is recorded in `effects`.
class WriteBehindStore : public JobStore {
 public:
  // `durable`: where the Load* methods read. `effects`: the section in progress, guarded by
  // `state_mu`. Both outlive this.
  WriteBehindStore(JobStore& durable, Mutex& state_mu, Effects& effects)
      : durable_(durable), state_mu_(state_mu), effects_(effects) {}
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

 private:
  // Records `w` in the section's effects (state lock held).
  Status Record(StoreWrite w);

  JobStore& durable_;
  Mutex& state_mu_;
  Effects& effects_;
};

// The WorkerChannel the JobManager sends through: binds each message to the worker's current
// stream and records it in `effects`.
class StreamChannel : public WorkerChannel {
 public:
  StreamChannel(const WorkerStreamTable& streams, Mutex& state_mu, Effects& effects)
      : streams_(streams), state_mu_(state_mu), effects_(effects) {}
  bool Send(const std::string& name, const v1::CoordinatorMessage& msg) override;

 private:
  const WorkerStreamTable& streams_;
  Mutex& state_mu_;
  Effects& effects_;
};

}  // namespace convoy
