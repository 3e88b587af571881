// The captured output of one rank: stdout and stderr appended raw, in arrival order, to
// `<attempt dir>/rank-<R>.log`, rotated at a size limit (rank-R.log -> .1 -> .2, two
// rotated files kept), and the last lines of stderr kept in memory for the exit report.
//
// Threading: not thread-safe; owned by the supervisor thread.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace convoy {

class RankLog {
 public:
  static constexpr size_t kTailLines = 20;       // ProcessExit.stderr_tail holds at most 20
  static constexpr size_t kMaxLineBytes = 4096;  // longer stderr lines are cut in the tail

  // Opens `path` for appending (created 0644, never through a symlink). A file that cannot
  // be opened is not fatal: output is then only kept in the stderr tail, and ok() is false.
  // `owner_uid`/`owner_gid` >= 0: every file it creates (rotations too) belongs to them
  // (the job's run-as user).
  RankLog(std::string path, int64_t max_bytes, int owner_uid = -1, int owner_gid = -1);
  ~RankLog();
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Appends output of the rank; stderr also feeds the tail.
  void Append(const char* data, size_t n, bool is_stderr);
  // A line of the worker's own about this rank (e.g. why it could not start): into the log
  // and the tail.
  void Note(const std::string& line);
  // The rank ended: an unterminated last stderr line joins the tail; the file is closed.
  void Close();
  // The last stderr lines, oldest first (at most kTailLines).
  std::vector<std::string> StderrTail() const;

 private:
  void Write(const char* data, size_t n);
  void Rotate();
  void Own();

  const std::string path_;
  const int64_t max_bytes_;
  const int owner_uid_;
  const int owner_gid_;
  int fd_ = -1;
  int64_t bytes_ = 0;    // size of the current file
  std::string partial_;  // stderr after its last newline
  std::deque<std::string> tail_;
};

}  // namespace convoy
