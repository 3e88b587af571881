// Checkpoints: model, optimiser, position (epoch, samples of the epoch consumed, global step),
// the epoch's sample counts (trainer/sampler.h) and the seed and data-set size they belong
// to. Rank 0 writes them atomically (temporary file, fsync, rename) as ckpt-<step>.pt and
// keeps the two newest; snapshots in host memory (trainer/snapshot_file.h) carry the same
// bytes. At a resume the ranks agree on the newest state any of them holds and its holder
// broadcasts the bytes (trainer/resume.h), so that every rank restores the same state.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/sampler.h"

namespace convoy::trainer {

// Where training resumes. A position is world-size independent: `sample` counts samples of
// the epoch's permutation, whatever the world size that consumed them.
struct Position {
  int64_t epoch = 0;
  int64_t sample = 0;  // P: samples of `epoch` already consumed
  int64_t global_step = 0;
};

// What a state must belong to: the seed (the epochs' permutations) and the training set's size;
// and the job's identity (CONVOY_JOB_UID, CONVOY_CLUSTER_ID), written into the state when the
// run has a uid: a run with a uid loads only state of the same uid and cluster and refuses
// state without one; a run without (by hand) loads any (IdentityMismatch, snapshot_file.h).
struct StateIdentity {
  int64_t seed = 0;
  int64_t samples = 0;
  std::string job_uid;
  std::string cluster_id;
  // Deliberate resume (spec.resume_from): state of this uid (of the same cluster) is accepted
  // too; with `resume_any`, state of any identity (a path the user named).
  std::string resume_uid{};
  bool resume_any = false;
};

// The first tensor of the model (parameters and buffers) or of the optimiser's state (SGD's
// momentum, Adam's moments) holding a value that is not finite: "fc1.weight", "optimizer
// state of fc1.weight" (-like); "" when every value is finite.
std::string NonFiniteState(torch::nn::Module& model, torch::optim::Optimizer& optimizer);

// Serialises model + optimiser + position + the counts of `pos.epoch` + identity to bytes.
// Throws std::runtime_error, saving nothing, for a state with a value that is not finite
// (NonFiniteState): no checkpoint or snapshot ever holds one (trainer/bad_steps.h).
std::string SaveState(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                      const Position& pos, const std::vector<uint8_t>& counts,
                      const StateIdentity& id);
// The same into `out`, replacing its content but reusing its capacity (the snapshot writer
// keeps one buffer rather than growing a new one each time).
void SaveStateInto(std::string* out, torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                   const Position& pos, const std::vector<uint8_t>& counts,
                   const StateIdentity& id);

// Restores from bytes into model and optimiser; returns the position and fills `counts`.
// Throws on corrupt data and on a state of another identity ("made with seed 7, this run has
// 1234"; "it belongs to job <uid> of cluster <id>, not this job (...)"), before touching model or
// optimiser. A checkpoint from before global positions (its position is a step within the epoch) is
// read as made at `legacy_shape`: P = steps x A·B·W, the first P samples of the epoch's order
// counted once. Tensors are read onto `device` (the model's): a snapshot is written from host
// memory, a checkpoint from wherever the model was.
Position LoadState(std::string_view bytes, torch::nn::Module& model,
                   torch::optim::Optimizer& optimizer, const StateIdentity& id,
                   const StepShape& legacy_shape, std::vector<uint8_t>* counts,
                   torch::Device device = torch::kCPU);

// Saves and loads a tiny state (a 2x2 linear layer, SGD with momentum) once. The first load
// in a process builds LibTorch's archive reader (its JIT importer) on the way: tens of
// milliseconds, and 60-90 ms in a rank forked from the warm trainer, on a restart's critical
// path. The warm trainer does it before it forks any rank (trainer/main.cc), so that its ranks
// inherit the built reader. Starts no thread (a process that forks must have none).
void WarmUpStateLoading();

// Writes bytes as <dir>/ckpt-<global_step>.pt atomically and prunes all but the newest
// `keep_newest` (0: none is pruned; the job's checkpoint policy is the worker's then).
// Returns the path. Throws on I/O errors.
std::string WriteCheckpoint(const std::string& dir, const std::string& bytes, int64_t step,
                            int keep_newest = 2);

// The path a checkpoint of `step` has in `dir`.
std::string CheckpointPath(const std::string& dir, int64_t step);

struct FoundCheckpoint {
  std::string path;
  std::string bytes;
};

// The newest checkpoint in `dir` that `probe` accepts, skipping (with a warning on stderr)
// the ones it throws for (corrupt, or another run's); nothing when there is none.
std::optional<FoundCheckpoint> ReadNewestValid(
    const std::string& dir, const std::function<void(const std::string&)>& probe);

}  // namespace convoy::trainer
