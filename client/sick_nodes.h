// The CLI's side of "When nodes are sick" (README): `convoy cordon` / `convoy uncordon`, and
// how health, cordons, stragglers and node faults read in `convoy workers`, `status`, `top`.
#pragma once

#include <cstdint>
#include <string>

#include "client/commands.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

// `convoy cordon WORKER [--reason TEXT]` / `convoy uncordon WORKER` (admins): prints the
// worker's new line (or the message with -o json|yaml).
int CordonCommand(CoordinatorClient& c, const std::string& worker, bool cordon,
                  const std::string& reason, const CommandOptions& options);

// ",UNHEALTHY", ",CHECKING", ",CORDONED" (in that order, as they apply) after a worker's state.
std::string SickStateSuffix(const v1::WorkerInfo& w);
// Why a worker takes no new ranks, for the table's WHY column: its health check's reason,
// its cordon's reason; empty when nothing is wrong.
std::string SickReason(const v1::WorkerInfo& w);

// The lines of `convoy status` about sick ranks: the stragglers named now, the bad steps
// skipped and rewinds of the current attempt, and the moves off nodes that used no restart;
// empty when there is nothing to say.
std::string FormatSickRanks(const v1::Job& job);
// The current attempt's bad steps (trainer.max_bad_steps), from its ranks' latest records.
struct BadSteps {
  int64_t skipped = 0;
  int64_t rewinds = 0;
};
BadSteps JobBadSteps(const v1::Job& job);
// `convoy top`'s SLOWEST cell when the job has a straggler ("rank 1 3.9x (straggler)"), else
// empty.
std::string TopStragglerCell(const v1::Job& job);

}  // namespace convoy
