// The supervisor's answers that only read state: Register, ReservePort, ReadLogs; and the
// batching of metric records. Threading as in supervisor.h.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/job_paths.h"
#include "common/util.h"
#include "worker/files/attempt_dir_retention.h"
#include "worker/files/snapshot_dir.h"
#include "worker/supervise/supervisor.h"

namespace convoy {
namespace {

constexpr int kFlushIntervalMs = 200;
constexpr size_t kRecordsPerBatch = 500;
constexpr int64_t kMaxLogRead = 1 << 20;

}  // namespace

std::vector<Supervisor::RankSample> Supervisor::RankSamples() {
  std::vector<RankSample> out;
  std::shared_ptr<const Snapshot> snap;
  {
    MutexLock lock(snap_mu_);
    snap = snapshot_;
  }
  for (const v1::AttemptStatus& a : snap->attempts) {
    for (const v1::RankStatus& r : a.ranks()) {
      out.push_back({a.job_id(), a.attempt(), r.rank(), r.pid(), r.running()});
    }
  }
  return out;
}

Supervisor::Counters Supervisor::counters() const {
  Counters c;
  c.log_bytes = log_bytes_total_.load(std::memory_order_relaxed);
  c.records_received = records_received_total_.load(std::memory_order_relaxed);
  c.records_dropped = records_dropped_total_.load(std::memory_order_relaxed);
  c.restarts_seen = restarts_seen_total_.load(std::memory_order_relaxed);
  return c;
}

v1::Register Supervisor::BuildRegister() {
  v1::Register reg;
  reg.set_name(config_.name);
  reg.set_address(config_.address);
  reg.set_hostname(config_.hostname);
  reg.set_cores(config_.cores);
  for (int g : config_.gpus) reg.add_gpus(g);
  reg.set_slots(config_.slots);
  reg.set_version(CONVOY_VERSION);
  reg.set_memory_bytes(config_.memory_bytes);
  for (const GpuDeviceInfo& g : config_.gpu_devices) {
    v1::GpuDevice* d = reg.add_gpu_devices();
    d->set_index(g.index);
    d->set_model(g.model);
    d->set_memory_bytes(g.memory_bytes);
    d->set_uuid(g.uuid);
  }
  for (const auto& [k, v] : config_.labels) (*reg.mutable_labels())[k] = v;
  std::shared_ptr<const Snapshot> snap;
  {
    MutexLock lock(snap_mu_);
    snap = snapshot_;
    register_seq_ = snap->seq;
  }
  for (const v1::AttemptStatus& as : snap->attempts) *reg.add_attempts() = as;
  // The snapshot directories in host memory (config_ does not change: any thread may read it).
  if (!config_.snapshot_root.empty()) {
    for (const std::string& key : ListSnapshotKeys(config_.snapshot_root)) {
      reg.add_snapshot_keys(key);
    }
  }
  return reg;
}

void Supervisor::PublishSnapshot() {
  if (!snapshot_dirty_) return;
  snapshot_dirty_ = false;
  auto snap = std::make_shared<Snapshot>();
  snap->seq = seq_;
  for (const auto& [key, a] : attempts_) {
    // A forgotten attempt is still reported while it runs: the coordinator must learn of it
    // (and kill it) rather than lose track of its processes.
    if (a.forgotten && !a.AnyRunning()) continue;
    v1::AttemptStatus& as = snap->attempts.emplace_back();
    as.set_job_id(a.job_id);
    as.set_job_uid(a.job_uid);
    as.set_attempt(a.attempt);
    for (const auto& r : a.ranks) {
      v1::RankStatus* rs = as.add_ranks();
      rs->set_rank(r->rank);
      rs->set_local_rank(r->local_rank);
      rs->set_pid(r->pid);
      rs->set_running(r->running);
      if (!r->running) *rs->mutable_exit() = r->exit;
    }
  }
  MutexLock lock(snap_mu_);
  snapshot_ = std::move(snap);
}

void Supervisor::ReservePort(const v1::ReservePort& req) {
  v1::WorkerMessage out;
  v1::PortReserved* p = out.mutable_port_reserved();
  p->set_job_id(req.job_id());
  p->set_job_uid(req.job_uid());
  p->set_attempt(req.attempt());
  // Held until the attempt's ranks have ended (PortUse).
  auto port = ports_.Reserve({req.job_id(), req.attempt(), req.job_uid()});
  if (port.ok()) {
    p->set_port(*port);
  } else {
    p->set_error(port.status().message());
    spdlog::error("job {} attempt {}: cannot reserve a port: {}", req.job_id(), req.attempt(),
                  p->error());
  }
  Send(out);
}

PortReservations::Use Supervisor::PortUse(const Key& key) const {
  auto a = attempts_.find(key);
  if (a != attempts_.end()) {
    return a->second.AnyRunning() ? PortReservations::Use::kRunning : PortReservations::Use::kEnded;
  }
  // A launch whose code is still being unpacked holds its port as one that runs.
  return unpacking_.count(key) > 0 ? PortReservations::Use::kRunning
                                   : PortReservations::Use::kNotHere;
}

void Supervisor::ReadLogs(const v1::ReadLogs& req) {
  // At most this many held at once; more are answered at once (empty), as without wait_ms.
  constexpr size_t kMaxHeld = 1024;
  if (req.wait_ms() > 0 && held_logs_.size() < kMaxHeld && LogsWouldWait(req)) {
    held_logs_.push_back({req, clock_.NowMonotonicMs() + req.wait_ms()});
    return;
  }
  AnswerLogs(req);
}

bool Supervisor::LogsWouldWait(const v1::ReadLogs& req) const {
  if (req.offset() < 0) return false;  // a tail: answer with what is there
  auto it = attempts_.find({req.job_id(), req.attempt(), req.job_uid()});
  if (it == attempts_.end()) return false;
  for (const auto& r : it->second.ranks) {
    if (r->rank != req.rank()) continue;
    if (!r->running) return false;
    struct stat st {};
    const int64_t size = stat(r->log->path().c_str(), &st) == 0 ? st.st_size : 0;
    return req.offset() >= size;
  }
  return false;
}

void Supervisor::RetryHeldLogs() {
  if (held_logs_.empty()) return;
  const int64_t now = clock_.NowMonotonicMs();
  std::vector<HeldLogRead> still;
  for (HeldLogRead& h : held_logs_) {
    if (now < h.deadline_ms && LogsWouldWait(h.req)) {
      still.push_back(std::move(h));
    } else {
      AnswerLogs(h.req);
    }
  }
  held_logs_.swap(still);
}

void Supervisor::AnswerLogs(const v1::ReadLogs& req) {
  v1::WorkerMessage out;
  v1::LogData* d = out.mutable_log_data();
  d->set_request_id(req.request_id());
  auto it = attempts_.find({req.job_id(), req.attempt(), req.job_uid()});
  std::string path;
  bool running = false;
  if (it != attempts_.end()) {
    for (const auto& r : it->second.ranks) {
      if (r->rank == req.rank()) {
        path = r->log->path();
        running = r->running;
      }
    }
  } else if (IsValidName(req.job_id()) && req.attempt() >= 0 && req.rank() >= 0) {
    // Not in memory any more (worker restarted, attempt forgotten): the file may still be.
    // The name was validated, so the path stays inside the work dir.
    path = config_.work_dir + "/jobs/" + JobDirName(req.job_id(), req.job_uid()) + "/attempt-" +
           std::to_string(req.attempt()) + "/rank-" + std::to_string(req.rank()) + ".log";
    if (!std::filesystem::exists(path)) path.clear();
  }
  // Removed by --attempt-dir-retention (worker/files/attempt_dir_retention.h): say so.
  const bool removed =
      IsValidName(req.job_id()) && req.attempt() >= 0 &&
      access(AttemptTombstonePath(config_.work_dir, JobDirName(req.job_id(), req.job_uid()),
                                  req.attempt())
                 .c_str(),
             F_OK) == 0;
  if (removed) {
    d->set_removed(true);
    d->set_error("the logs of attempt " + std::to_string(req.attempt()) + " of job " +
                 req.job_id() + " were removed from worker " + config_.name +
                 " after the attempt ended (its --attempt-dir-retention)");
    Send(out);
    return;
  }
  if (path.empty()) {
    d->set_error("no log for rank " + std::to_string(req.rank()) + " of attempt " +
                 std::to_string(req.attempt()) + " of job " + req.job_id() + " on worker " +
                 config_.name);
    Send(out);
    return;
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    // A rank that never wrote (or whose file could not be created) has an empty log.
    if (errno == ENOENT) {
      d->set_eof(!running);
    } else {
      d->set_error(path + ": " + strerror(errno));
    }
    if (fd >= 0) close(fd);
    Send(out);
    return;
  }
  int64_t offset = req.offset();
  if (offset < 0) offset = std::max<int64_t>(0, st.st_size + offset);
  // Past the end (the file was rotated under a follower): continue from its end.
  offset = std::min<int64_t>(offset, st.st_size);
  const int64_t max =
      req.max_bytes() <= 0 ? kMaxLogRead : std::min<int64_t>(req.max_bytes(), kMaxLogRead);
  std::string data(static_cast<size_t>(std::min<int64_t>(max, st.st_size - offset)), '\0');
  ssize_t n = data.empty() ? 0 : pread(fd, data.data(), data.size(), offset);
  close(fd);
  if (n < 0) n = 0;
  data.resize(static_cast<size_t>(n));
  d->set_next_offset(offset + n);
  d->set_eof(!running && offset + n >= st.st_size);
  d->set_data(std::move(data));
  Send(out);
}

void Supervisor::AddRecords(const Key& key, std::vector<v1::MetricRecord>* records) {
  records_received_total_.fetch_add(static_cast<int64_t>(records->size()),
                                    std::memory_order_relaxed);
  for (v1::MetricRecord& rec : *records) {
    rec.set_attempt(key.attempt);
    pending_.push_back({key, std::move(rec)});
  }
  if (pending_.size() > kMaxPendingRecords) {
    const size_t excess = pending_.size() - kMaxPendingRecords;
    if (dropped_records_ == 0) {
      spdlog::warn("more than {} metric records wait for the coordinator; dropping the oldest",
                   kMaxPendingRecords);
    }
    dropped_records_ += static_cast<int64_t>(excess);
    records_dropped_total_.fetch_add(static_cast<int64_t>(excess), std::memory_order_relaxed);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(excess));
  }
}

void Supervisor::FlushMetrics(bool force) {
  const int64_t now = clock_.NowMonotonicMs();
  if (!force && now < next_flush_ms_ && pending_.size() < kRecordsPerBatch) return;
  next_flush_ms_ = now + kFlushIntervalMs;
  // Consecutive records of one attempt make a batch; a batch the link refuses stays queued.
  while (!pending_.empty() && LinkUp()) {
    v1::WorkerMessage out;
    v1::MetricBatch* b = out.mutable_metrics();
    const Key key = pending_.front().key;
    b->set_job_id(key.job_id);
    b->set_job_uid(key.job_uid);
    b->set_attempt(key.attempt);
    size_t n = 0;
    while (n < pending_.size() && n < kRecordsPerBatch && pending_[n].key == key) {
      *b->add_records() = pending_[n].record;
      ++n;
    }
    if (!Send(out)) return;
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  if (pending_.empty() && dropped_records_ > 0) {
    spdlog::warn("{} metric records were dropped while the coordinator was away", dropped_records_);
    dropped_records_ = 0;
  }
}

}  // namespace convoy
