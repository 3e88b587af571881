#include "worker/files/rank_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace convoy {

RankLog::RankLog(std::string path, int64_t max_bytes, int owner_uid, int owner_gid)
    : path_(std::move(path)),
      max_bytes_(max_bytes < 1 ? 1 : max_bytes),
      owner_uid_(owner_uid),
      owner_gid_(owner_gid) {
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  struct stat st {};
  if (fd_ >= 0 && fstat(fd_, &st) == 0) bytes_ = st.st_size;
  Own();
}

void RankLog::Own() {
  if (fd_ < 0) return;
  // 0600 whatever the umask, also for a log left by an older worker; the owner is the rank's
  // user. On the descriptor: no path is followed between creating the file and giving it away.
  (void)!fchmod(fd_, 0600);
  if (owner_uid_ < 0) return;
  (void)!fchown(fd_, static_cast<uid_t>(owner_uid_), static_cast<gid_t>(owner_gid_));
}

RankLog::~RankLog() {
  if (fd_ >= 0) close(fd_);
}

void RankLog::Append(const char* data, size_t n, bool is_stderr) {
  Write(data, n);
  if (!is_stderr) return;
  partial_.append(data, n);
  size_t start = 0, pos;
  while ((pos = partial_.find('\n', start)) != std::string::npos) {
    tail_.push_back(partial_.substr(start, std::min(pos - start, kMaxLineBytes)));
    if (tail_.size() > kTailLines) tail_.pop_front();
    start = pos + 1;
  }
  partial_.erase(0, start);
  if (partial_.size() > kMaxLineBytes) partial_.resize(kMaxLineBytes);
}

void RankLog::Note(const std::string& line) {
  const std::string text = "[convoy-worker] " + line + "\n";
  Write(text.data(), text.size());
  tail_.push_back(line.substr(0, kMaxLineBytes));
  if (tail_.size() > kTailLines) tail_.pop_front();
}

void RankLog::Close() {
  if (!partial_.empty()) {
    tail_.push_back(partial_);
    if (tail_.size() > kTailLines) tail_.pop_front();
    partial_.clear();
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::vector<std::string> RankLog::StderrTail() const { return {tail_.begin(), tail_.end()}; }

void RankLog::Write(const char* data, size_t n) {
  if (fd_ < 0 || n == 0) return;
  if (bytes_ > 0 && bytes_ + static_cast<int64_t>(n) > max_bytes_) Rotate();
  if (fd_ < 0) return;
  while (n > 0) {
    const ssize_t w = write(fd_, data, n);
    if (w <= 0) return;  // disk full or the like: the output is lost, the rank goes on
    bytes_ += w;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

void RankLog::Rotate() {
  close(fd_);
  std::rename((path_ + ".1").c_str(), (path_ + ".2").c_str());
  std::rename(path_.c_str(), (path_ + ".1").c_str());
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  Own();
  bytes_ = 0;
}

}  // namespace convoy
