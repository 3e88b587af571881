// What the controllers' unit tests share (attempt_lifecycle_test, scheduling_test): the real
// job table, capacity ledger, statistics, watch hub, writer and attempt lifecycle over the
// in-memory store, with a fake clock and a fake worker channel, and helpers that add workers
// and pending jobs.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>

#include "coordinator/control/attempt_lifecycle.h"
#include "coordinator/control/job_stats.h"
#include "coordinator/control/job_writer.h"
#include "coordinator/control/watch_hub.h"
#include "coordinator/sched/capacity_ledger.h"
#include "coordinator/state/job_table.h"
#include "tests/support/job_manager_fixture.h"

namespace convoy {

class ControllersFixture : public ::testing::Test {
 protected:
  // A registered, connected worker "wN" at 10.0.0.N with `slots` slots and cores.
  void AddWorker(const std::string& name, int slots = 1) {
    v1::Register reg;
    reg.set_name(name);
    reg.set_address("10.0.0." + name.substr(1));
    reg.set_cores(slots);
    reg.set_slots(slots);
    registry_.OnRegister(reg);
    channel_.connected.insert(name);
  }

  // A PENDING job of `nodes` nodes, one process each, in the table.
  JobRecord& Job(int nodes, int max_restarts = 0, const std::string& owner = "alice",
                 int max_runtime_s = 0) {
    v1::Job job;
    job.set_id(table_.NextId());
    job.set_uid("uid-" + job.id());
    job.set_state(v1::PENDING);
    job.set_owner(owner);
    job.set_created_unix_ms(clock_.NowUnixMs());
    job.mutable_spec()->set_nodes(nodes);
    job.mutable_spec()->set_procs_per_node(1);
    job.mutable_spec()->set_max_restarts(max_restarts);
    job.mutable_spec()->set_max_runtime_s(max_runtime_s);
    return table_.Insert(std::move(job), lifecycle_.NewRuntime());
  }

  FakeClock clock_;
  MemoryJobStore store_;
  WorkerRegistry registry_{clock_, 10000};
  FakeWorkerChannel channel_;
  JobTable table_{clock_};
  CapacityLedger ledger_;
  JobStats stats_{clock_};
  WatchHub watches_;
  JobWriter writer_{clock_,
                    store_,
                    table_,
                    watches_,
                    stats_,
                    2000,
                    [](JobRecord&, v1::JobState, v1::JobState) {}};
  // What an attempt's release does (the lifecycle's `on_released`): set by each test fixture.
  std::function<void()> on_released_ = [] {};
  AttemptLifecycle lifecycle_{clock_,
                              {3000, 10000, 60000, 100, 30000, "c-1"},
                              table_,
                              ledger_,
                              stats_,
                              writer_,
                              registry_,
                              channel_,
                              [this] { on_released_(); }};
};

}  // namespace convoy
