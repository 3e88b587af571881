#include "coordinator/state/job_state_machine.h"

#include <gtest/gtest.h>

namespace convoy {
namespace job_state_machine_test {

using v1::JobState;

struct Case {
  JobState from;
  JobState to;
  bool legal;
};

TEST(JobStateMachineTest, TransitionTable) {
  const Case cases[] = {
      {v1::PENDING, v1::SCHEDULED, true},    {v1::SCHEDULED, v1::RENDEZVOUS, true},
      {v1::RENDEZVOUS, v1::RUNNING, true},   {v1::RUNNING, v1::SUCCEEDED, true},
      {v1::RUNNING, v1::RESTARTING, true},   {v1::RENDEZVOUS, v1::RESTARTING, true},
      {v1::RESTARTING, v1::SCHEDULED, true}, {v1::RESTARTING, v1::PENDING, true},
      {v1::PENDING, v1::CANCELLED, true},    {v1::RUNNING, v1::CANCELLED, true},
      {v1::RESTARTING, v1::FAILED, true},    {v1::RUNNING, v1::FAILED, true},
      {v1::PENDING, v1::RUNNING, false},     {v1::PENDING, v1::SUCCEEDED, false},
      {v1::SCHEDULED, v1::SUCCEEDED, false}, {v1::RENDEZVOUS, v1::SUCCEEDED, false},
      {v1::SUCCEEDED, v1::RUNNING, false},   {v1::FAILED, v1::RESTARTING, false},
      {v1::CANCELLED, v1::FAILED, false},    {v1::SUCCEEDED, v1::CANCELLED, false},
      {v1::RESTARTING, v1::RUNNING, false},  {v1::PENDING, v1::RESTARTING, false},
      {v1::RUNNING, v1::PENDING, true},      {v1::JOB_STATE_UNSPECIFIED, v1::FAILED, false},
      {v1::SCHEDULED, v1::PENDING, true},    {v1::RENDEZVOUS, v1::PENDING, true},
      {v1::SUCCEEDED, v1::PENDING, false},
  };
  for (const Case& c : cases) {
    Status st = CheckTransition(c.from, c.to);
    EXPECT_EQ(st.ok(), c.legal) << StateName(c.from) << " -> " << StateName(c.to);
    if (!c.legal) {
      EXPECT_NE(st.message().find(StateName(c.from)), std::string::npos);
      EXPECT_NE(st.message().find(StateName(c.to)), std::string::npos);
    }
  }
}

TEST(JobStateMachineTest, TerminalStatesHaveNoSuccessor) {
  for (JobState from : {v1::SUCCEEDED, v1::FAILED, v1::CANCELLED}) {
    EXPECT_TRUE(IsTerminal(from));
    for (int to = v1::PENDING; to <= v1::CANCELLED; ++to) {
      EXPECT_FALSE(CheckTransition(from, static_cast<JobState>(to)).ok());
    }
  }
  EXPECT_FALSE(IsTerminal(v1::RESTARTING));
}

}  // namespace job_state_machine_test
}  // namespace convoy
