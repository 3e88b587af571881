#include "client/progress.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "client/format.h"

namespace convoy {
namespace {

const v1::Attempt* FindAttempt(const v1::Job& job, int attempt) {
  for (const auto& a : job.attempts()) {
    if (a.attempt() == attempt) return &a;
  }
  return nullptr;
}

}  // namespace

ProgressView::ProgressView(std::ostream& out, Options options) : out_(out), options_(options) {}

bool ProgressView::Finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return IsTerminalState(job_.state());
}

bool ProgressView::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  const bool text = options_.mode != Mode::kJson && options_.mode != Mode::kYaml;
  return text && job_.state() == v1::PENDING;
}

void ProgressView::ShowWaiting(const v1::Job& job, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.mode == Mode::kJson || options_.mode == Mode::kYaml) return;
  if (job_.state() != v1::PENDING || job.state() != v1::PENDING) return;
  OnWaiting(job, now);
  Draw(now);
}

void ProgressView::OnWaiting(const v1::Job& job, int64_t now) {
  if (job.state() != v1::PENDING) {
    waiting_shown_.clear();  // placed: a later wait (a preemption) is shown again
    return;
  }
  if (job.pending_reason().empty()) return;
  std::string text = "waiting: " + job.pending_reason();
  if (job.queue_position() > 0) {
    text += " (#" + std::to_string(job.queue_position()) + " in the queue)";
  }
  if (text == waiting_shown_) return;
  waiting_shown_ = text;
  InterruptLocked();
  out_ << FormatClock(now) << "  " << text << "\n" << std::flush;
}

void ProgressView::Update(const v1::WatchJobResponse& update, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.mode == Mode::kJson || options_.mode == Mode::kYaml) {
    out_ << (options_.mode == Mode::kJson ? ToJson(update) : "---\n" + ToYaml(update)) << "\n"
         << std::flush;
    if (update.has_job()) job_ = update.job();
    if (update.has_event()) job_.set_state(update.event().to());
    return;
  }
  if (update.has_job()) {
    OnSnapshot(update.job(), now);
    Draw(now);
  } else if (update.has_event()) {
    OnEvent(update.event());
    Draw(now);
  } else if (update.has_metric()) {
    OnMetric(update.metric());
    // Metrics come fast: redraw on a schedule.
    const int64_t interval = options_.mode == Mode::kTerminal ? options_.terminal_interval_ms
                                                              : options_.plain_interval_ms;
    if (now - last_draw_ms_ >= interval) Draw(now);
  }
}

void ProgressView::OnSnapshot(const v1::Job& job, int64_t now) {
  job_ = job;
  if (job.attempt() != attempt_) StartAttempt(job.attempt());
  for (const auto& m : job.latest()) {
    if (m.attempt() != attempt_) continue;
    auto it = ranks_.find(m.rank());
    if (it == ranks_.end() || it->second.time_unix_ms() <= m.time_unix_ms()) ranks_[m.rank()] = m;
  }
  // Events this view has not shown: the history on the first snapshot, and those missed
  // while the stream was broken.
  if (events_shown_ > job.events_size()) events_shown_ = job.events_size();
  for (int i = events_shown_; i < job.events_size(); ++i) PrintEvent(job.events(i));
  events_shown_ = job.events_size();
  OnWaiting(job, now);
}

void ProgressView::OnEvent(const v1::JobEvent& event) {
  PrintEvent(event);
  ++events_shown_;
  job_.set_state(event.to());
  job_.set_message(event.reason());
  if (event.to() != v1::PENDING) waiting_shown_.clear();
  if (event.attempt() != attempt_) {
    job_.set_attempt(event.attempt());
    StartAttempt(event.attempt());
  }
}

void ProgressView::OnMetric(const v1::MetricRecord& record) {
  if (record.attempt() < attempt_) return;  // a late record of an old attempt
  if (record.attempt() > attempt_) StartAttempt(record.attempt());
  v1::MetricRecord& m = ranks_[record.rank()];
  v1::MetricRecord merged = record;
  if (m.attempt() == record.attempt()) {
    // A record of another kind (eval) keeps what it does not carry itself.
    for (const auto& [k, v] : m.values()) merged.mutable_values()->insert({k, v});
    if (!merged.has_loss() && m.has_loss()) {
      merged.set_loss(m.loss());
      merged.set_has_loss(true);
    }
  }
  m = std::move(merged);
  fresh_metrics_ = true;
}

void ProgressView::StartAttempt(int attempt) {
  attempt_ = attempt;
  ranks_.clear();
}

void ProgressView::PrintEvent(const v1::JobEvent& event) {
  InterruptLocked();
  out_ << FormatEvent(event) << "\n";
  if (event.has_failure()) out_ << FormatFailureDetails(event.failure(), "    ");
  out_ << std::flush;
}

void ProgressView::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  InterruptLocked();
}

void ProgressView::InterruptLocked() {
  if (drawn_lines_ > 0) {
    // To the start of the first live line, then erase to the end of the screen.
    out_ << "\r\033[" << drawn_lines_ << "A\033[J" << std::flush;
    drawn_lines_ = 0;
  }
}

std::string ProgressView::Cut(const std::string& line) const {
  const size_t cols = static_cast<size_t>(std::max(options_.terminal_columns, 0));
  if (cols == 0 || line.size() < cols) return line;
  return line.substr(0, cols - 1);  // never fill the last column: some terminals wrap there
}

std::string ProgressView::RankState(int rank) const {
  if (const v1::Attempt* a = FindAttempt(job_, attempt_)) {
    for (const auto& e : a->exits()) {
      if (e.rank() != rank) continue;
      const std::string exit = ExitText(e.exit());
      return exit.empty() ? "done" : exit;
    }
  }
  return StateText(job_.state());
}

std::string ProgressView::RankLine(const v1::MetricRecord& m) const {
  return "  rank " + std::to_string(m.rank()) + "  " + RankState(m.rank()) + "  " +
         (m.time_unix_ms() > 0 || m.has_step() ? FormatRankProgress(m) : "no metrics yet");
}

std::string ProgressView::HeaderLine(int64_t now) const {
  std::string line = job_.id() + " (" + job_.spec().name() + ")  " + StateText(job_.state()) +
                     "  attempt " + std::to_string(job_.attempt());
  if (job_.created_unix_ms() > 0) line += "  " + FormatDuration(now - job_.created_unix_ms());
  return line;
}

std::string ProgressView::PlainProgressLine(int64_t now) const {
  std::string line =
      FormatClock(now) + "  " + StateText(job_.state()) + "  attempt " + std::to_string(attempt_);
  if (ranks_.size() <= 4) {
    for (const auto& [rank, m] : ranks_) {
      line += " | rank " + std::to_string(rank) + ": " + FormatRankProgress(m);
    }
    return line;
  }
  // Many ranks: one summary.
  int64_t lo = ranks_.begin()->second.step(), hi = lo;
  double loss = 0, rate = 0;
  int losses = 0;
  for (const auto& [rank, m] : ranks_) {
    lo = std::min(lo, m.step());
    hi = std::max(hi, m.step());
    if (m.has_loss()) {
      loss += m.loss();
      ++losses;
    }
    auto it = m.values().find("samples_per_s");
    if (it != m.values().end()) rate += it->second;
  }
  char buf[160];
  std::snprintf(buf, sizeof(buf), " | %zu ranks: step %lld-%lld  mean loss %.4f  %.0f samples/s",
                ranks_.size(), static_cast<long long>(lo), static_cast<long long>(hi),
                losses > 0 ? loss / losses : 0.0, rate);
  return line + buf;
}

void ProgressView::Draw(int64_t now) {
  if (options_.mode == Mode::kPlain) {
    // At the end, Finish shows the last records.
    if (!fresh_metrics_ || IsTerminalState(job_.state())) return;
    fresh_metrics_ = false;
    last_draw_ms_ = now;
    out_ << PlainProgressLine(now) << "\n" << std::flush;
    return;
  }
  // Terminal: every rank of the attempt's placement, with or without records.
  std::map<int, v1::MetricRecord> rows = ranks_;
  if (const v1::Attempt* a = FindAttempt(job_, attempt_)) {
    for (const auto& node : a->nodes()) {
      for (int r : node.ranks()) rows[r].set_rank(r);
    }
  }
  std::vector<std::string> lines{Cut(HeaderLine(now))};
  for (const auto& [rank, m] : rows) {
    if (static_cast<int>(lines.size()) > options_.max_rank_lines) {
      lines.push_back("  ... and " + std::to_string(rows.size() + 1 - lines.size()) +
                      " more ranks");
      break;
    }
    lines.push_back(Cut(RankLine(m)));
  }
  InterruptLocked();
  last_draw_ms_ = now;
  for (const auto& line : lines) out_ << line << "\n";
  out_ << std::flush;
  drawn_lines_ = static_cast<int>(lines.size());
}

int ProgressView::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  const int code = job_.state() == v1::SUCCEEDED ? kExitOk : kExitJobNotSucceeded;
  if (options_.mode == Mode::kJson || options_.mode == Mode::kYaml) return code;
  InterruptLocked();
  int shown = 0;
  for (const auto& [rank, m] : ranks_) {
    if (shown++ == options_.max_rank_lines) {
      out_ << "  ... and " << ranks_.size() - options_.max_rank_lines << " more ranks\n";
      break;
    }
    out_ << "  rank " << rank << "  " << FormatRankProgress(m) << "\n";
  }
  out_ << "job " << job_.id() << " " << StateText(job_.state());
  if (job_.created_unix_ms() > 0 && job_.updated_unix_ms() >= job_.created_unix_ms()) {
    out_ << " after " << FormatDuration(job_.updated_unix_ms() - job_.created_unix_ms());
  }
  out_ << ": " << job_.message() << "\n";
  std::vector<v1::MetricRecord> records;
  for (const auto& [rank, m] : ranks_) records.push_back(m);
  double accuracy = TestAccuracy(records, attempt_);
  if (accuracy < 0) accuracy = TestAccuracy(job_);
  if (accuracy >= 0) out_ << "final test accuracy: " << FormatPercent(accuracy) << "\n";
  if (job_.state() == v1::FAILED) {
    const v1::Attempt* failed = nullptr;
    for (const auto& a : job_.attempts()) {
      if (a.has_failure()) failed = &a;
    }
    if (failed != nullptr) {
      out_ << "root cause (attempt " << failed->attempt() << "):\n"
           << FormatFailure(failed->failure(), "  ");
    }
  }
  out_ << std::flush;
  return code;
}

}  // namespace convoy
