// The legal transitions of a job (DESIGN.md "Job states"). Pure functions, no state.
#pragma once

#include <string>

#include "common/status.h"
#include "convoy/v1/common.pb.h"

namespace convoy {

// True for SUCCEEDED, FAILED and CANCELLED: nothing follows them.
bool IsTerminal(v1::JobState state);

// True while the job holds or is acquiring workers (SCHEDULED, RENDEZVOUS, RUNNING,
// RESTARTING).
bool HoldsWorkers(v1::JobState state);

// OK when `from -> to` is a legal transition; otherwise FAILED_PRECONDITION naming both.
// Legal: PENDING->SCHEDULED; SCHEDULED->RENDEZVOUS; RENDEZVOUS->RUNNING;
// RUNNING->SUCCEEDED; {SCHEDULED,RENDEZVOUS,RUNNING}->RESTARTING;
// {SCHEDULED,RENDEZVOUS,RUNNING}->PENDING (preempted: its ranks checkpoint and stop, and it
// waits again without a restart); RESTARTING->{SCHEDULED,PENDING}; any non-terminal ->
// FAILED | CANCELLED.
// A sweep (`sweep` = true: JobSpec.sweep; README "Sweeps") runs no attempt and is never
// placed: PENDING->RUNNING (its first trial was made), RUNNING->SUCCEEDED (every trial
// ended, one succeeded or was stopped early), and any non-terminal -> FAILED | CANCELLED;
// nothing else.
Status CheckTransition(v1::JobState from, v1::JobState to, bool sweep = false);

// "RUNNING" for RUNNING, etc.
std::string StateName(v1::JobState state);

}  // namespace convoy
