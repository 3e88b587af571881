// Where a restarted attempt resumes (issue 17): every rank offers the newest valid state it
// holds (a snapshot in its host's CONVOY_SNAPSHOT_DIR; rank 0 also the newest disk
// checkpoint), the ranks agree on the newest of all (the highest global step; the lowest rank
// holding it), and that rank broadcasts its bytes, so that every rank loads the same state.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "trainer/dist.h"

namespace convoy::trainer {

struct StateOffer {
  std::string kind;  // "snapshot" or "checkpoint"
  std::string path;
  int64_t step = 0;
  std::string bytes;  // what SaveState wrote
};

struct AgreedState {
  StateOffer state;  // the holder's kind, path and step, and the bytes
  int holder = 0;    // the rank that broadcast it
};

// Collective: every rank calls it with its own offer (or nothing). Returns the agreed state on
// every rank, or nothing when no rank holds one. `device`: where the backend's tensors live
// (CUDA for NCCL). Throws when a collective fails.
std::optional<AgreedState> AgreeOnNewestState(Dist& dist, torch::Device device,
                                              std::optional<StateOffer> mine);

// Of two offers, the newer (the higher step; `a` on a tie).
std::optional<StateOffer> Newer(std::optional<StateOffer> a, std::optional<StateOffer> b);

}  // namespace convoy::trainer
