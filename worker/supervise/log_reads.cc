#include "worker/supervise/log_reads.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/job_paths.h"
#include "common/util.h"
#include "worker/files/attempt_dir_retention.h"

namespace convoy {

LogReads::LogReads(const WorkerConfig& config, const AttemptTable& table, Reporter& reporter,
                   const Clock& clock)
    : config_(config), table_(table), reporter_(reporter), clock_(clock) {}

void LogReads::Read(const v1::ReadLogs& req) {
  if (req.wait_ms() > 0 && held_.size() < kMaxHeld && WouldWait(req)) {
    held_.push_back({req, clock_.NowMonotonicMs() + req.wait_ms()});
    return;
  }
  Answer(req);
}

bool LogReads::WouldWait(const v1::ReadLogs& req) const {
  if (req.offset() < 0) return false;  // a tail: answer with what is there
  const Attempt* a = table_.Find({req.job_id(), req.attempt(), req.job_uid()});
  if (a == nullptr) return false;
  for (const auto& r : a->ranks) {
    if (r->rank != req.rank()) continue;
    if (!r->running) return false;
    struct stat st {};
    const int64_t size = stat(r->log->path().c_str(), &st) == 0 ? st.st_size : 0;
    return req.offset() >= size;
  }
  return false;
}

void LogReads::RetryHeld() {
  if (held_.empty()) return;
  const int64_t now = clock_.NowMonotonicMs();
  std::vector<Held> still;
  for (Held& h : held_) {
    if (now < h.deadline_ms && WouldWait(h.req)) {
      still.push_back(std::move(h));
    } else {
      Answer(h.req);
    }
  }
  held_.swap(still);
}

int64_t LogReads::NextDeadlineMs() const {
  int64_t due = Reporter::kNever;
  for (const Held& h : held_) due = std::min(due, h.deadline_ms);
  return due;
}

std::string LogReads::PathOf(const v1::ReadLogs& req, bool* running) const {
  *running = false;
  std::string path;
  if (const Attempt* a = table_.Find({req.job_id(), req.attempt(), req.job_uid()})) {
    for (const auto& r : a->ranks) {
      if (r->rank == req.rank()) {
        path = r->log->path();
        *running = r->running;
      }
    }
  } else if (IsValidName(req.job_id()) && req.attempt() >= 0 && req.rank() >= 0) {
    // Not in memory any more (worker restarted, attempt forgotten): the file may still be.
    // The name was validated, so the path stays inside the work dir.
    path = config_.work_dir + "/jobs/" + JobDirName(req.job_id(), req.job_uid()) + "/attempt-" +
           std::to_string(req.attempt()) + "/rank-" + std::to_string(req.rank()) + ".log";
    if (!std::filesystem::exists(path)) path.clear();
  }
  return path;
}

void LogReads::Answer(const v1::ReadLogs& req) {
  v1::WorkerMessage out;
  v1::LogData* d = out.mutable_log_data();
  d->set_request_id(req.request_id());
  bool running = false;
  const std::string path = PathOf(req, &running);
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
    reporter_.Send(out);
    return;
  }
  if (path.empty()) {
    d->set_error("no log for rank " + std::to_string(req.rank()) + " of attempt " +
                 std::to_string(req.attempt()) + " of job " + req.job_id() + " on worker " +
                 config_.name);
    reporter_.Send(out);
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
    reporter_.Send(out);
    return;
  }
  int64_t offset = req.offset();
  if (offset < 0) offset = std::max<int64_t>(0, st.st_size + offset);
  // Past the end (the file was rotated under a follower): continue from its end.
  offset = std::min<int64_t>(offset, st.st_size);
  const int64_t max =
      req.max_bytes() <= 0 ? kMaxRead : std::min<int64_t>(req.max_bytes(), kMaxRead);
  std::string data(static_cast<size_t>(std::min<int64_t>(max, st.st_size - offset)), '\0');
  ssize_t n = data.empty() ? 0 : pread(fd, data.data(), data.size(), offset);
  close(fd);
  if (n < 0) n = 0;
  data.resize(static_cast<size_t>(n));
  d->set_next_offset(offset + n);
  d->set_eof(!running && offset + n >= st.st_size);
  d->set_data(std::move(data));
  reporter_.Send(out);
}

}  // namespace convoy
