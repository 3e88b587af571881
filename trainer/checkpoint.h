// Checkpoints: model, optimiser, position (epoch, step within it, global step) and seed,
// written by rank 0 atomically (temporary file, fsync, rename) as ckpt-<step>.pt; the two
// newest are kept. Only rank 0 needs to see the directory: it reads the newest valid file
// and broadcasts its bytes, so that every rank restores the same state.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <optional>
#include <string>

namespace convoy::trainer {

// Where training resumes.
struct Position {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;  // optimiser steps already done in `epoch`
  int64_t global_step = 0;
};

// Serialises model + optimiser + position to bytes.
std::string SaveState(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                      const Position& pos, int64_t seed);
// Restores from bytes; throws on corrupt data.
Position LoadState(const std::string& bytes, torch::nn::Module& model,
                   torch::optim::Optimizer& optimizer);

// Writes bytes as <dir>/ckpt-<global_step>.pt atomically and prunes all but the newest two.
// Returns the path. Throws on I/O errors.
std::string WriteCheckpoint(const std::string& dir, const std::string& bytes, int64_t step);

// The bytes of the newest checkpoint in `dir` that loads, skipping (with a warning on
// stderr) corrupt ones; nothing when there is none. `probe` must throw for a bad file.
std::optional<std::string> ReadNewestValid(const std::string& dir,
                                           const std::function<void(const std::string&)>& probe);

}  // namespace convoy::trainer
