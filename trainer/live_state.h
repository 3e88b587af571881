// The live state (issue 45): the training state kept in host memory in place, so that a
// restart after every rank of a job died at once (nobody left to write a last will) loses at
// most the step in flight, not a snapshot interval.
//
// The snapshot-writing rank of each host (its lowest local rank) moves its model's parameters
// and SGD's momentum buffers into a shared mapping of `<snapshot dir>/live-<rank>.state`
// (tmpfs): the optimiser updates them there, in place, so nothing is copied per step. Around
// each optimiser step the file's sequence number says "updating" (odd) and then "step N
// committed" (even), with the step's position, the epoch's sample counts and the model's
// buffers (batch norm's running statistics, which the forward changes) copied in at the
// commit: tens of kilobytes. A rank killed mid-update leaves an odd number, and its file is
// not used (the periodic snapshots are); killed anywhere else, the file holds the state of
// the last step it completed. The mapping survives the process (the page cache of tmpfs),
// not the host.
//
// What it needs: the CPU (a GPU's tensors cannot live in a host file) and SGD (its momentum
// buffers in the file) or Adam (its moments in the file, and its step counts, which are C++
// members, copied in at each commit). Otherwise Attach says why, and the periodic snapshots
// are what a restart after every rank died finds.
//
// A restarted attempt's writer reads the newest committed file of the job's directory
// (ReadLiveState, before the ranks agree on the newest state), checks that it belongs to this
// job and model, loads it and offers it like a snapshot.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/optim/optimizer.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/checkpoint.h"
#include "trainer/resume.h"
#include "trainer/snapshot_file.h"

namespace convoy::trainer {

// Where the file's sequence number lies (a uint64: odd while a step updates the file, even and
// non-zero once a step is committed), for tests that tear a file as a death mid-update would.
inline constexpr size_t kLiveStateSeqOffset = 8;

class LiveState {
 public:
  // Makes `<dir>/live-<rank>.state` anew, copies the model's parameters, the optimiser's
  // state (SGD's momentum buffers or Adam's moments and step counts; made, zero, where the
  // optimiser has none yet: its first step then computes what it would have) and the
  // position into it, points the parameters and buffers at it and
  // commits. Null with `why` set when this state cannot be kept in place.
  static std::unique_ptr<LiveState> Attach(const std::string& dir, int rank,
                                           const SnapshotMeta& identity, torch::nn::Module& model,
                                           torch::optim::Optimizer& optimizer, const Position& pos,
                                           const std::vector<uint8_t>& counts, std::string* why);
  ~LiveState();
  LiveState(const LiveState&) = delete;
  LiveState& operator=(const LiveState&) = delete;

  // Before the optimiser step: the file's tensors are about to change.
  void BeginUpdate();
  // After it: the model's buffers, the position and the counts copied in, the step committed.
  void Commit(const Position& pos, const std::vector<uint8_t>& counts);

  const std::string& path() const { return path_; }
  size_t bytes() const { return size_; }

  struct Header;  // the file's first page (live_state.cc)

 private:
  LiveState(std::string path, std::shared_ptr<void> mapping, void* base, size_t size)
      : path_(std::move(path)), mapping_(std::move(mapping)), base_(base), size_(size) {}
  Header* header() const;
  void WriteBuffersAndPosition(const Position& pos, const std::vector<uint8_t>& counts);

  std::string path_;
  std::shared_ptr<void> mapping_;  // also held by every tensor viewing it
  void* base_ = nullptr;
  size_t size_ = 0;
  std::vector<torch::Tensor> buffers_;  // the model's, copied in at each commit
  std::vector<size_t> buffer_offsets_;
  std::vector<torch::optim::AdamParamState*> adam_;  // Adam's step counts, copied in too
  size_t steps_offset_ = 0;
  size_t counts_offset_ = 0;
  size_t counts_capacity_ = 0;
};

// The newest committed live state in `dir` (any rank's: DDP keeps them identical) that belongs
// to `identity`, has this model's and optimiser's layout and is of a step after `newer_than`
// (the newest state this rank holds otherwise: a last will is of the same step), offered
// lazily (kind "live"): only when the ranks choose it (resume.h) is it loaded into `model` and
// `optimizer` and serialised (SaveState's bytes), so a rank whose peer holds the same step as
// bytes pays nothing. Nothing when there is none, or when the one found was being updated, is
// another job's, or holds a value that is not finite (a line on stdout says which). Call it
// only once the earlier attempts' ranks on this host are gone: the file is read in place.
// `model` and `optimizer` must outlive the offer.
std::optional<StateOffer> ReadLiveState(const std::string& dir, const SnapshotMeta& identity,
                                        const StateIdentity& state_id, int64_t newer_than,
                                        torch::nn::Module& model,
                                        torch::optim::Optimizer& optimizer);

}  // namespace convoy::trainer
