// Where a restarted attempt resumes (issue 17): every rank offers the newest valid state it
// holds (a snapshot in its host's CONVOY_SNAPSHOT_DIR; rank 0 also the newest disk
// checkpoint), the ranks agree on the newest of all (the highest global step; the lowest rank
// holding it), and that rank broadcasts its bytes, so that every rank loads the same state.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "trainer/dist.h"
#include "trainer/snapshot_file.h"

namespace convoy::trainer {

struct StateOffer {
  std::string kind;  // "snapshot", "checkpoint", "live" or "resume_from"
  std::string path;
  int64_t step = 0;
  std::string bytes;  // what SaveState wrote
  // Or, for a snapshot, the payload of its mapped file (FoundSnapshot): not copied.
  std::shared_ptr<const Bytes> file{};
  std::string_view mapped{};
  // Or, for the live state (trainer/live_state.h), nothing yet: `materialise` fills `bytes`
  // when the offer is the one every rank loads (tens of milliseconds, not paid when another
  // rank holds the same step as bytes).
  std::function<void(StateOffer&)> materialise{};
  bool lazy() const { return materialise != nullptr; }
  std::string_view data() const { return file != nullptr ? mapped : std::string_view(bytes); }
};

struct AgreedState {
  StateOffer state;  // the holder's kind, path and step, and the bytes
  int holder = 0;    // the rank that broadcast it
};

// Collective: every rank calls it with its own offer (or nothing). Returns the agreed state on
// every rank, or nothing when no rank holds one. When every rank holds the newest step, each
// keeps its own copy (`holder` is then the rank itself) and nothing is broadcast. Of the ranks
// holding the newest step, the lowest that holds it as bytes sends it; a lazy offer is
// materialised only when no rank holds that step otherwise. `device`: where
// the backend's tensors live (CUDA for NCCL). Throws when a collective fails.
std::optional<AgreedState> AgreeOnNewestState(Dist& dist, torch::Device device,
                                              std::optional<StateOffer> mine);

// Of two offers, the newer (the higher step; `a` on a tie).
std::optional<StateOffer> Newer(std::optional<StateOffer> a, std::optional<StateOffer> b);

// The attempts of a job that still have ranks alive on this host (issue 45). A restart does
// not wait for the killed attempt's ranks to be gone (its placement and start overlap their
// teardown), but the survivors save the newest state on their way out (the last will): each
// rank holds a shared lock on `<snapshot dir>/alive-<attempt>` for as long as it lives (the
// kernel drops it when the process ends, however it ends), and a rank of a later attempt
// waits for the earlier attempts' locks before it looks for the newest state.
class AttemptPresence {
 public:
  // Takes this rank's lock for `attempt` in `dir` ("" or unusable: nothing to hold).
  AttemptPresence(std::string dir, int attempt);
  ~AttemptPresence();
  AttemptPresence(const AttemptPresence&) = delete;
  AttemptPresence& operator=(const AttemptPresence&) = delete;
  // Waits until no process holds the lock of an earlier attempt in the directory (whose
  // files it then removes), at most `timeout`. Returns the seconds it waited, or -1 when it
  // gave up (a rank that does not exit: its state may then be missed).
  double WaitForEarlierAttempts(std::chrono::milliseconds timeout) const;

 private:
  const std::string dir_;
  const int attempt_;
  int fd_ = -1;
};

}  // namespace convoy::trainer
