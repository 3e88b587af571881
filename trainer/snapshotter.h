// Snapshots of the training state in host memory (issue 17). Every `--snapshot-every` steps
// the writing rank of a host (its lowest local rank) copies the model and optimiser state into
// a shadow copy held in this process (a few milliseconds: memcpy of the tensors) and a
// background thread, at the lowest CPU priority (nice 19, so that it takes the cores' idle
// time rather than a training rank's), serialises it, checksums it and writes it to
// CONVOY_SNAPSHOT_DIR (trainer/snapshot_file.h). On a host with no idle core the writer can
// wait for tens of seconds (measured: 22 s for one write, 32 captures skipped in a 100-step
// run), and a restart would lose everything since its last write: when a capture is the
// third in a row to find the writer busy, the training thread writes it itself (WriteNow, tens
// of milliseconds), so that the newest snapshot on disk is never more than kMaxBehind + 1
// intervals old. Running the writer at the training's priority instead
// cost more (bench/snapshot_cost.py, 2026-11-29: 1.17-1.48 % of the training time in 4 runs
// against 0.70-1.40 % in 3 at nice 19, where it mostly uses the moments the ranks wait in a
// collective). DDP keeps every rank's state identical, so the copy on each host is also a copy
// of every other host's state: a restart after a host is lost resumes from a surviving host's
// memory.
//
// WriteNow is the synchronous path: the last will of a rank whose collective failed or that
// stops on SIGTERM, and the snapshot that goes with a graceful stop's checkpoint.
//
// Threads: Capture, WriteNow and the destructor are called by one thread at a time (the
// training thread; the stop watchdog calls WriteNow only while it holds the state lock that
// keeps the training thread out of optimizer.step). The background thread touches only the
// shadow copy, which Capture does not touch while a write is in flight.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainer/checkpoint.h"
#include "trainer/snapshot_file.h"

namespace convoy::trainer {

class Snapshotter {
 public:
  // A second model and optimiser of the same kind, to hold the copies.
  struct Shadow {
    std::shared_ptr<torch::nn::Module> model;
    std::unique_ptr<torch::optim::Optimizer> optimizer;
  };
  // `dir` empty: disabled (every call does nothing and returns false or ""). `identity`: job,
  // model, seed, samples of the snapshots' headers; `state_id` the same for the payload.
  Snapshotter(std::string dir, SnapshotMeta identity, StateIdentity state_id,
              torch::nn::Module& model, torch::optim::Optimizer& optimizer,
              std::function<Shadow()> make_shadow);
  // Waits for the write in flight.
  ~Snapshotter();
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  // Copies the state at `pos` (the model and optimiser as they are now, `counts` of its epoch)
  // and writes it in the background. False, doing nothing, when the previous write is still
  // under way, unless kMaxBehind captures in a row found it so: then it writes this one
  // synchronously (true when written; a failure is logged, as the writer's). Call between
  // optimiser steps.
  static constexpr int kMaxBehind = 2;
  bool Capture(const Position& pos, const std::vector<uint8_t>& counts);

  // Writes the live state at `pos` now; returns the path (an existing snapshot of that step is
  // kept, not rewritten). "" when disabled. Throws std::runtime_error on I/O errors.
  std::string WriteNow(const Position& pos, const std::vector<uint8_t>& counts);

  // Waits for the background write in flight, if any.
  void Flush();
  // Whether a background write is in flight now.
  bool busy();

  // What the periodic snapshots cost (for the log): counts, and total milliseconds of the
  // synchronous copies (training thread) and of the background work (its thread).
  struct Stats {
    int64_t captures = 0;
    int64_t written = 0;
    int64_t skipped_busy = 0;    // Capture found the previous one still being written
    int64_t written_inline = 0;  // ... kMaxBehind times in a row, and wrote it itself
    double inline_ms = 0;        // the training thread's time in those writes
    double copy_ms = 0;
    double background_ms = 0;      // wall time (at nice 19 it waits for idle CPU)
    double background_cpu_ms = 0;  // CPU time of the writing thread
    std::string last_error;
  };
  Stats stats();

 private:
  void Loop();
  // Copies the live model and optimiser into the shadow; false for an optimiser whose state
  // it does not know how to copy (then Capture serialises synchronously).
  bool CopyIntoShadow();

  const std::string dir_;
  const SnapshotMeta identity_;
  const StateIdentity state_id_;
  torch::nn::Module& model_;
  torch::optim::Optimizer& optimizer_;
  std::function<Shadow()> make_shadow_;
  Shadow shadow_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;  // guarded by mu_: a capture is being written
  bool stop_ = false;  // guarded by mu_
  // The capture being written (guarded by mu_ while !busy_, owned by the thread while busy_).
  Position pos_;
  std::vector<uint8_t> counts_;
  std::string payload_;      // the serialised capture (one buffer, reused)
  bool serialised_ = false;  // Capture serialised it already (an optimiser without a shadow)
  Stats stats_;              // guarded by mu_
  int behind_ = 0;           // guarded by mu_: captures in a row that found the writer busy
  std::thread thread_;
};

}  // namespace convoy::trainer
