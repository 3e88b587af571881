#include "coordinator/state/job_state_machine.h"

namespace convoy {

using v1::JobState;

bool IsTerminal(JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

bool HoldsWorkers(JobState state) {
  return state == v1::SCHEDULED || state == v1::RENDEZVOUS || state == v1::RUNNING ||
         state == v1::RESTARTING;
}

Status CheckTransition(JobState from, JobState to, bool sweep) {
  bool legal = false;
  if (!IsTerminal(from) && from != v1::JOB_STATE_UNSPECIFIED &&
      (to == v1::FAILED || to == v1::CANCELLED)) {
    legal = true;
  }
  if (sweep) {
    legal = legal || (from == v1::PENDING && to == v1::RUNNING) ||
            (from == v1::RUNNING && to == v1::SUCCEEDED);
    if (legal) return Status::Ok();
    return Status::FailedPrecondition("illegal sweep transition " + StateName(from) + " -> " +
                                      StateName(to));
  }
  switch (from) {
    case v1::PENDING:
      legal = legal || to == v1::SCHEDULED;
      break;
    case v1::SCHEDULED:
      legal = legal || to == v1::RENDEZVOUS || to == v1::RESTARTING || to == v1::PENDING;
      break;
    case v1::RENDEZVOUS:
      legal = legal || to == v1::RUNNING || to == v1::RESTARTING || to == v1::PENDING;
      break;
    case v1::RUNNING:
      legal = legal || to == v1::SUCCEEDED || to == v1::RESTARTING || to == v1::PENDING;
      break;
    case v1::RESTARTING:
      legal = legal || to == v1::SCHEDULED || to == v1::PENDING;
      break;
    default:
      break;
  }
  if (legal) return Status::Ok();
  return Status::FailedPrecondition("illegal job transition " + StateName(from) + " -> " +
                                    StateName(to));
}

std::string StateName(JobState state) { return v1::JobState_Name(state); }

}  // namespace convoy
