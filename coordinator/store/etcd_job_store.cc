#include "coordinator/store/etcd_job_store.h"

#include <cstdio>
#include <set>
#include <utility>

namespace convoy {
namespace {

etcdserverpb::RequestOp Put(const std::string& key, std::string value) {
  etcdserverpb::RequestOp op;
  op.mutable_request_put()->set_key(key);
  op.mutable_request_put()->set_value(std::move(value));
  return op;
}

etcdserverpb::RequestOp DeleteKey(const std::string& key) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(key);
  return op;
}

etcdserverpb::RequestOp DeletePrefix(const std::string& prefix) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(prefix);
  op.mutable_request_delete_range()->set_range_end(EtcdPrefixEnd(prefix));
  return op;
}

std::string Seq(int64_t seq) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%012lld", static_cast<long long>(seq));
  return buf;
}

// The keys one transaction touches: etcd refuses a transaction that writes a key twice, or a
// key inside a range it deletes.
class TouchedKeys {
 public:
  bool Overlaps(const etcdserverpb::RequestOp& op) const {
    const auto [a, b] = Range(op);
    for (const auto& [x, y] : ranges_) {
      if (a < y && x < b) return true;
    }
    return false;
  }
  void Add(const etcdserverpb::RequestOp& op) { ranges_.push_back(Range(op)); }
  void Clear() { ranges_.clear(); }

 private:
  // [first, end): a put's key alone, or a delete's range.
  static std::pair<std::string, std::string> Range(const etcdserverpb::RequestOp& op) {
    if (op.has_request_put()) {
      return {op.request_put().key(), op.request_put().key() + std::string(1, '\0')};
    }
    const auto& d = op.request_delete_range();
    return {d.key(), d.range_end().empty() ? d.key() + std::string(1, '\0') : d.range_end()};
  }
  std::vector<std::pair<std::string, std::string>> ranges_;
};

size_t OpBytes(const etcdserverpb::RequestOp& op) { return op.ByteSizeLong(); }

}  // namespace

StatusOr<std::string> LoadOrMakeEtcdClusterId(EtcdClient& client, const std::string& prefix,
                                              const std::string& candidate, bool* made) {
  const std::string key = prefix + "cluster-id";
  auto resp = client.CreateIfAbsent(key, candidate);
  if (!resp.ok()) return resp.status();
  *made = resp->created;
  if (*made) return candidate;
  const std::string& id = resp->value;
  if (id.size() != 32 || id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Status::FailedPrecondition("etcd: " + key + " does not hold a Convoy cluster id ('" +
                                      id.substr(0, 64) + "'): is --etcd-prefix another program's?");
  }
  return id;
}

EtcdJobStore::EtcdJobStore(EtcdClient& client, std::string prefix)
    : client_(client), prefix_(std::move(prefix)) {}

void EtcdJobStore::SetFence(std::string key, int64_t create_revision) {
  fence_key_ = std::move(key);
  fence_revision_ = create_revision;
}

StatusOr<int64_t> EtcdJobStore::NextEventSeq(const std::string& id) {
  auto it = next_event_.find(id);
  if (it != next_event_.end()) return it->second;
  auto events = client_.GetPrefix(prefix_ + "event/" + id + "/");
  if (!events.ok()) return events.status();
  int64_t next = 1;
  if (!events->empty()) {
    const std::string& last = events->back().key();
    next = std::stoll(last.substr(last.rfind('/') + 1)) + 1;
  }
  next_event_[id] = next;
  return next;
}

Status EtcdJobStore::AddOps(const StoreWrite& w, Group* g) {
  auto add = [g](etcdserverpb::RequestOp op) {
    g->bytes += OpBytes(op);
    g->ops.push_back(std::move(op));
  };
  if (w.job) {
    v1::Job body = *w.job;
    body.clear_events();
    std::string value = body.SerializeAsString();
    if (value.size() > kMaxValueBytes) {
      return Status::ResourceExhausted("etcd store: job " + body.id() + " is " +
                                       std::to_string(value.size()) + " bytes, over " +
                                       std::to_string(kMaxValueBytes));
    }
    add(Put(prefix_ + "job/" + body.id(), std::move(value)));
    if (w.event) {
      auto seq = NextEventSeq(body.id());
      if (!seq.ok()) return seq.status();
      batch_first_event_.emplace(body.id(), *seq);  // the first of this batch's, kept
      add(Put(prefix_ + "event/" + body.id() + "/" + Seq(*seq), w.event->SerializeAsString()));
      next_event_[body.id()] = *seq + 1;
    }
  }
  if (w.worker) add(Put(prefix_ + "worker/" + w.worker->name(), w.worker->SerializeAsString()));
  if (w.job_metrics) {
    std::string value = w.job_metrics->SerializeAsString();
    if (value.size() > kMaxValueBytes) {
      return Status::ResourceExhausted(
          "etcd store: the metric history of job " + w.job_metrics->job_id() + " is " +
          std::to_string(value.size()) + " bytes, over " + std::to_string(kMaxValueBytes));
    }
    add(Put(prefix_ + "metrics/" + w.job_metrics->job_id(), std::move(value)));
  }
  if (w.delete_job) {
    const std::string& id = *w.delete_job;
    add(DeleteKey(prefix_ + "job/" + id));
    add(DeletePrefix(prefix_ + "event/" + id + "/"));
    add(DeleteKey(prefix_ + "metrics/" + id));
    next_event_.erase(id);
  }
  if (w.delete_worker) {
    add(DeleteKey(prefix_ + "worker/" + *w.delete_worker));
    add(DeletePrefix(prefix_ + "deletion/" + *w.delete_worker + "/"));
  }
  if (w.file_deletion) {
    const std::string key =
        prefix_ + "deletion/" + w.file_deletion->worker + "/" + w.file_deletion->job_id;
    add(w.file_deletion_pending ? Put(key, w.file_deletion->job_uid) : DeleteKey(key));
  }
  return Status::Ok();
}

Status EtcdJobStore::CommitOne(const std::vector<const etcdserverpb::RequestOp*>& ops) {
  if (ops.empty()) return Status::Ok();
  etcdserverpb::TxnRequest txn;
  if (fence_revision_ != 0) {
    etcdserverpb::Compare* c = txn.add_compare();
    c->set_key(fence_key_);
    c->set_target(etcdserverpb::Compare::CREATE);
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_create_revision(fence_revision_);
  }
  for (const etcdserverpb::RequestOp* op : ops) *txn.add_success() = *op;
  auto resp = client_.Txn(txn);
  if (!resp.ok()) return resp.status();
  if (!resp->succeeded()) {
    return Status::FailedPrecondition(
        "etcd store: write refused: this coordinator is no longer the leader (election key " +
        fence_key_ + " is not the one it created at revision " + std::to_string(fence_revision_) +
        ")");
  }
  return Status::Ok();
}

Status EtcdJobStore::Commit(const std::vector<Group>& groups) {
  std::vector<const etcdserverpb::RequestOp*> txn;
  size_t bytes = 0;
  TouchedKeys touched;
  for (const Group& g : groups) {
    bool clash = false;
    for (const auto& op : g.ops) clash = clash || touched.Overlaps(op);
    const bool full = txn.size() + g.ops.size() > static_cast<size_t>(kMaxOpsPerTxn - 1) ||
                      bytes + g.bytes > kMaxTxnBytes;
    if (!txn.empty() && (clash || full)) {
      CONVOY_RETURN_IF_ERROR(CommitOne(txn));
      txn.clear();
      bytes = 0;
      touched.Clear();
    }
    for (const auto& op : g.ops) {
      txn.push_back(&op);
      touched.Add(op);
    }
    bytes += g.bytes;
  }
  return CommitOne(txn);
}

Status EtcdJobStore::Write(const std::vector<StoreWrite>& writes) {
  std::vector<Group> groups(writes.size());
  batch_first_event_.clear();
  Status st = Status::Ok();
  for (size_t i = 0; i < writes.size() && st.ok(); ++i) st = AddOps(writes[i], &groups[i]);
  if (st.ok()) st = Commit(groups);
  if (!st.ok()) {
    // The coordinator retries the same batch: it must write the same event keys again, so
    // that a transaction that timed out but landed after all (etcd lost its quorum
    // mid-write, say) is overwritten with the same values, never appended twice.
    for (const auto& [id, seq] : batch_first_event_) next_event_[id] = seq;
  }
  return st;
}

Status EtcdJobStore::SaveJob(const v1::Job& job, const v1::JobEvent* event) {
  StoreWrite w;
  w.job = job;
  if (event != nullptr) w.event = *event;
  return Write({w});
}

Status EtcdJobStore::SaveWorker(const v1::WorkerInfo& worker) {
  StoreWrite w;
  w.worker = worker;
  return Write({w});
}

Status EtcdJobStore::DeleteWorker(const std::string& name) {
  StoreWrite w;
  w.delete_worker = name;
  return Write({w});
}

Status EtcdJobStore::SaveJobMetrics(const v1::JobMetrics& job_metrics) {
  StoreWrite w;
  w.job_metrics = job_metrics;
  return Write({w});
}

Status EtcdJobStore::DeleteJob(const std::string& id) {
  StoreWrite w;
  w.delete_job = id;
  return Write({w});
}

Status EtcdJobStore::SaveFileDeletion(const FileDeletion& deletion, bool pending) {
  StoreWrite w;
  w.file_deletion = deletion;
  w.file_deletion_pending = pending;
  return Write({w});
}

namespace {

// `kv`'s value as `out`; INTERNAL naming the key when it is not one.
template <typename Message>
Status ParseValue(const mvccpb::KeyValue& kv, Message* out) {
  if (!out->ParseFromString(kv.value())) {
    return Status::Internal("etcd store: key " + kv.key() + " does not hold a " +
                            out->GetTypeName());
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<v1::Job>> EtcdJobStore::LoadJobs() {
  auto bodies = client_.GetPrefix(prefix_ + "job/");
  if (!bodies.ok()) return bodies.status();
  auto events = client_.GetPrefix(prefix_ + "event/");
  if (!events.ok()) return events.status();
  std::vector<v1::Job> jobs;
  std::map<std::string, size_t> index;
  for (const mvccpb::KeyValue& kv : *bodies) {
    v1::Job job;
    CONVOY_RETURN_IF_ERROR(ParseValue(kv, &job));
    index[job.id()] = jobs.size();
    jobs.push_back(std::move(job));
  }
  next_event_.clear();
  const std::string event_prefix = prefix_ + "event/";
  for (const mvccpb::KeyValue& kv : *events) {
    const std::string rest = kv.key().substr(event_prefix.size());
    const size_t slash = rest.rfind('/');
    if (slash == std::string::npos) {
      return Status::Internal("etcd store: key " + kv.key() + " is not event/<id>/<seq>");
    }
    const std::string id = rest.substr(0, slash);
    v1::JobEvent event;
    CONVOY_RETURN_IF_ERROR(ParseValue(kv, &event));
    auto it = index.find(id);
    if (it != index.end()) *jobs[it->second].add_events() = std::move(event);
    next_event_[id] = std::stoll(rest.substr(slash + 1)) + 1;
  }
  return jobs;
}

StatusOr<std::vector<v1::WorkerInfo>> EtcdJobStore::LoadWorkers() {
  auto kvs = client_.GetPrefix(prefix_ + "worker/");
  if (!kvs.ok()) return kvs.status();
  std::vector<v1::WorkerInfo> workers;
  for (const mvccpb::KeyValue& kv : *kvs) {
    v1::WorkerInfo w;
    CONVOY_RETURN_IF_ERROR(ParseValue(kv, &w));
    workers.push_back(std::move(w));
  }
  return workers;
}

StatusOr<std::vector<v1::JobMetrics>> EtcdJobStore::LoadJobMetrics() {
  auto kvs = client_.GetPrefix(prefix_ + "metrics/");
  if (!kvs.ok()) return kvs.status();
  std::vector<v1::JobMetrics> out;
  for (const mvccpb::KeyValue& kv : *kvs) {
    v1::JobMetrics m;
    CONVOY_RETURN_IF_ERROR(ParseValue(kv, &m));
    out.push_back(std::move(m));
  }
  return out;
}

StatusOr<std::vector<FileDeletion>> EtcdJobStore::LoadFileDeletions() {
  const std::string base = prefix_ + "deletion/";
  auto kvs = client_.GetPrefix(base);
  if (!kvs.ok()) return kvs.status();
  std::vector<FileDeletion> out;
  for (const mvccpb::KeyValue& kv : *kvs) {
    const std::string rest = kv.key().substr(base.size());
    const size_t slash = rest.find('/');
    if (slash == std::string::npos) {
      return Status::Internal("etcd store: key " + kv.key() + " is not deletion/<worker>/<id>");
    }
    out.push_back({rest.substr(0, slash), rest.substr(slash + 1), kv.value()});
  }
  return out;
}

}  // namespace convoy
