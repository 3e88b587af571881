#include "worker/files/code_unpacker.h"

#include <utility>

#include "common/code_archive.h"

namespace convoy {

CodeUnpacker::CodeUnpacker(std::string work_dir,
                           std::function<void(const std::string&)> before_unpack)
    : work_dir_(std::move(work_dir)), before_unpack_(std::move(before_unpack)) {}

CodeUnpacker::~CodeUnpacker() { Stop(); }

void CodeUnpacker::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void CodeUnpacker::Unpack(std::string sha256, std::string dest, int64_t uid, int64_t gid,
                          Done done) {
  MutexLock lock(mu_);
  queue_.push_back({std::move(sha256), std::move(dest), uid, gid, std::move(done)});
  cv_.Signal();
}

void CodeUnpacker::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void CodeUnpacker::Loop() {
  for (;;) {
    Job job;
    {
      MutexLock lock(mu_);
      while (queue_.empty() && !stop_) cv_.Wait(mu_);
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (before_unpack_) before_unpack_(job.sha256);
    // Streamed from the cache file, a buffer at a time (bounded memory whatever the archive).
    job.done(
        UnpackCodeArchiveFile(CodeArchivePath(work_dir_, job.sha256), job.dest, job.uid, job.gid));
  }
}

}  // namespace convoy
