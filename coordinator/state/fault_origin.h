// Whose fault a rank failure is: the job's or the node's (README "When nodes are sick").
// Decided once, where the attempt's root cause is decided (AttemptLifecycle::Fail), and
// carried typed in RankFailure.origin; the text in origin_reason is for people.
//
// The node's fault:
//   - FAILURE_WORKER_LOST: the worker, or its link, went away with the rank;
//   - the worker was failing its health check when the failure was decided;
//   - a rank killed by SIGBUS (a machine check or a bad page; never a bug of the job alone);
//   - a rank whose last words (its error file's type and message, or its stderr tail) name a
//     fault of the machine: a full disk (ENOSPC), an I/O error (EIO), a read-only file system
//     (EROFS), an uncorrectable ECC error, a GPU that fell off the bus, a CUDA or NCCL error
//     of the hardware or the driver (kNodeSignatures in fault_origin.cc).
// Anything else is the job's: an exit code, a signal, the OOM killer at its own
// memory_per_proc, a launch or rendezvous failure, a hang.
//
// Pure functions; no clock, no state.
#pragma once

#include <string>

#include "convoy/v1/common.pb.h"
#include "convoy/v1/job.pb.h"

namespace convoy {

// Free moves per job: past them, a node's fault uses a restart like any other (a job that
// fills every disk it runs on must not move around the cluster for ever).
inline constexpr int kMaxFreeNodeMoves = 3;

// Sets f->origin and f->origin_reason. `worker`: the failed rank's worker as the registry
// knows it now (null: unknown).
void AttributeOrigin(v1::RankFailure* f, const v1::WorkerInfo* worker);

// Whether the failure `cause` of `job`'s current attempt moves the job off the node without
// using a restart: the node's fault, the job has not failed on that worker for the node's
// reasons before (twice on one node, the job is as likely the cause), and it has moved fewer
// than kMaxFreeNodeMoves times (Job.node_moves).
bool NodeMoveIsFree(const v1::Job& job, const v1::RankFailure& cause);

// The node signature found in what the rank said (its error file, its stderr tail), quoted
// ("No space left on device"), or empty.
std::string NodeSignatureIn(const v1::ProcessExit& exit);

}  // namespace convoy
