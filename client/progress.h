// The display of `convoy watch` (and `submit --watch`): fed the WatchJob stream's updates,
// it writes to one ostream. Time is passed in, so it is tested without a terminal or a clock.
// One thread feeds it the stream; another may add why the job waits (ShowWaiting): each
// public method holds the view's lock.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <string>

#include "convoy/v1/job.pb.h"

namespace convoy {

class ProgressView {
 public:
  enum class Mode {
    kTerminal,  // one line per rank, redrawn in place with ANSI escapes
    kPlain,     // events as they come, one progress line at most every plain_interval_ms
    kJson,      // one JSON object per line per update, nothing else
    kYaml,      // one YAML document ("---" first) per update, nothing else
  };
  struct Options {
    Mode mode = Mode::kPlain;
    int64_t plain_interval_ms = 2000;
    int64_t terminal_interval_ms = 200;  // redraws on metrics at most this often
    int terminal_columns = 0;            // live lines are cut to this width (0: never)
    int max_rank_lines = 16;             // more ranks are summarised in one line
  };

  ProgressView(std::ostream& out, Options options);

  // Shows one update of the stream. A `job` update is a snapshot: the first message of each
  // WatchJob call (also after a reconnect) and again after every state change; events it
  // holds that were not shown yet are shown then.
  void Update(const v1::WatchJobResponse& update, int64_t now_unix_ms);

  // Why the job waits, from a fresher copy of it (GetJob): the WatchJob stream sends a
  // snapshot only when the state changes, but the scheduler revises a PENDING job's reason
  // on every pass. While the job is PENDING, a reason (or queue place) that differs from the
  // last one shown is printed as a line "HH:MM:SS  waiting: REASON (#N in the queue)"; the
  // snapshots' own reasons are shown the same way. Text modes only: JSON and YAML print the
  // stream's updates as they are.
  void ShowWaiting(const v1::Job& job, int64_t now_unix_ms);

  // True while the job waits to be placed (PENDING) in a text mode: when ShowWaiting is
  // worth calling.
  bool Waiting() const;

  // Removes the live lines (terminal mode) before something else is written to the
  // terminal, e.g. a message on stderr. The next update draws them again.
  void Interrupt();

  // True once the job is SUCCEEDED, FAILED or CANCELLED.
  bool Finished() const;

  // Prints the end: the final state, the final test accuracy, and for FAILED the root
  // cause (nothing in JSON mode). Returns the exit code: 0 iff the job SUCCEEDED, else 1.
  int Finish();

  // The job as the stream last showed it; for the thread that feeds the view.
  const v1::Job& job() const { return job_; }

 private:
  void OnSnapshot(const v1::Job& job, int64_t now);
  void OnWaiting(const v1::Job& job, int64_t now);
  void InterruptLocked();
  void OnEvent(const v1::JobEvent& event);
  void OnMetric(const v1::MetricRecord& record);
  void StartAttempt(int attempt);
  void PrintEvent(const v1::JobEvent& event);
  void Draw(int64_t now);
  std::string HeaderLine(int64_t now) const;
  std::string RankLine(const v1::MetricRecord& m) const;
  std::string RankState(int rank) const;
  std::string PlainProgressLine(int64_t now) const;
  std::string Cut(const std::string& line) const;

  std::ostream& out_;
  const Options options_;
  v1::Job job_;
  int events_shown_ = 0;
  int attempt_ = 0;
  std::map<int, v1::MetricRecord> ranks_;  // latest record of each rank of attempt_
  bool fresh_metrics_ = false;             // records arrived since the last plain line
  int drawn_lines_ = 0;                    // live lines on the terminal now
  int64_t last_draw_ms_ = 0;
  std::string waiting_shown_;  // the last "waiting: ..." text printed; empty once placed
  mutable std::mutex mu_;
};

}  // namespace convoy
