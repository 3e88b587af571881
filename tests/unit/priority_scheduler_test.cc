// The shared cluster's scheduler (issue 16): priorities, fair share, ageing, the reservation
// of the first job in line, and backfill around it. Time is the context's (a fake clock).
#include "coordinator/sched/priority_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>

namespace convoy {
namespace priority_scheduler_test {

constexpr int64_t kMin = 60 * 1000;
constexpr int64_t kT0 = 1'800'000'000'000;  // the fake clock's start, unix ms

v1::JobSpec Spec(int nodes, int procs, int priority = 0, int64_t max_runtime_s = 0) {
  v1::JobSpec spec;
  spec.set_name("t");
  spec.set_nodes(nodes);
  spec.set_procs_per_node(procs);
  spec.set_priority(priority);
  spec.set_max_runtime_s(max_runtime_s);
  return spec;
}

// Jobs waiting, with their specs kept alive.
struct Queue {
  std::deque<v1::JobSpec> specs;
  std::vector<WaitingJob> jobs;
  void Add(const std::string& id, v1::JobSpec spec, const std::string& owner = "alice",
           int64_t since = kT0) {
    specs.push_back(std::move(spec));
    WaitingJob w;
    w.id = id;
    w.spec = &specs.back();
    w.owner = owner;
    w.submitted_ms = since;
    w.waiting_since_ms = since;
    jobs.push_back(std::move(w));
  }
};

std::vector<std::string> Ids(const std::vector<Placement>& placements) {
  std::vector<std::string> ids;
  for (const auto& p : placements) ids.push_back(p.id);
  return ids;
}

const QueueEntry* Entry(const SchedulePlan& plan, const std::string& id) {
  for (const auto& e : plan.queue) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

TEST(PrioritySchedulerTest, HigherPriorityGoesFirstWhateverItsArrival) {
  Queue q;
  q.Add("j-1", Spec(1, 2, 0), "alice", kT0);
  q.Add("j-2", Spec(1, 2, 5), "bob", kT0 + 1000);
  q.Add("j-3", Spec(1, 2, -1), "carol", kT0 - 1000);
  const PriorityScheduler s;
  ScheduleContext ctx;
  ctx.now_ms = kT0 + 2000;
  SchedulePlan plan = s.Plan(q.jobs, {{"a", 2, 0}}, ctx);
  EXPECT_EQ(Ids(plan.placements), std::vector<std::string>{"j-2"});
  ASSERT_EQ(plan.queue.size(), 2u);
  EXPECT_EQ(plan.queue[0].id, "j-1");  // then priority 0, then -1
  EXPECT_EQ(plan.queue[0].position, 1);
  EXPECT_EQ(plan.queue[1].id, "j-3");
  EXPECT_EQ(plan.queue[1].position, 2);
}

TEST(PrioritySchedulerTest, FairShareFavoursTheOwnerWithLessRecentUse) {
  Queue q;
  q.Add("j-1", Spec(1, 2), "heavy", kT0);  // submitted first
  q.Add("j-2", Spec(1, 2), "light", kT0 + 1000);
  const PriorityScheduler s;
  ScheduleContext ctx;
  ctx.now_ms = kT0 + 2000;
  ctx.usage = {{"heavy", 36000}, {"light", 10}};
  EXPECT_EQ(Ids(s.Plan(q.jobs, {{"a", 2, 0}}, ctx).placements), std::vector<std::string>{"j-2"});
  // Same use: submission order.
  ctx.usage = {};
  EXPECT_EQ(Ids(s.Plan(q.jobs, {{"a", 2, 0}}, ctx).placements), std::vector<std::string>{"j-1"});
}

TEST(PrioritySchedulerTest, AgeingLetsALowPriorityJobOvertakeAStreamOfHigherOnes) {
  PriorityPolicy policy;
  policy.ageing_ms = 10 * kMin;
  const PriorityScheduler s(policy);
  Queue q;
  q.Add("old", Spec(1, 1, 0), "alice", kT0);
  ScheduleContext ctx;
  // A fresh priority-2 job arrives every minute; after 20 minutes the old one has aged to 2,
  // and wins the tie as the earlier submission.
  for (int minute = 1; minute <= 40; ++minute) {
    ctx.now_ms = kT0 + minute * kMin;
    Queue round = q;
    round.Add("new-" + std::to_string(minute), Spec(1, 1, 2), "bob", ctx.now_ms);
    round.jobs[0].spec = &round.specs[0];
    round.jobs[1].spec = &round.specs[1];
    const auto placed = Ids(s.Plan(round.jobs, {{"a", 1, 0}}, ctx).placements);
    ASSERT_EQ(placed.size(), 1u);
    if (minute < 20) {
      EXPECT_NE(placed[0], "old") << "minute " << minute;
    } else {
      EXPECT_EQ(placed[0], "old") << "minute " << minute;
    }
  }
  EXPECT_EQ(s.EffectivePriority(Spec(1, 1, 0), kT0, kT0 + 25 * kMin), 2);
}

TEST(PrioritySchedulerTest, TheFirstInLineHoldsItsSlotsAgainstSmallJobs) {
  // Two workers of 2 slots; a 1-slot job runs on each with no max_runtime. The big job
  // (2 nodes x 2) waits; small 1-slot jobs keep arriving. FIFO with backfill would hand the
  // freed slots to them forever; here they wait and the big job starts once both end.
  const PriorityScheduler s;
  Queue q;
  q.Add("big", Spec(2, 2), "alice", kT0);
  q.Add("small-1", Spec(1, 1), "bob", kT0 + 1);
  ScheduleContext ctx;
  ctx.now_ms = kT0 + 10;
  ctx.running = {{"r-a", "carol", 0, 0, {{"a", 1}}}, {"r-b", "carol", 0, 0, {{"b", 1}}}};
  SchedulePlan plan = s.Plan(q.jobs, {{"a", 1, 0}, {"b", 1, 0}}, ctx);
  EXPECT_TRUE(plan.placements.empty()) << "a small job took the held slots";
  const QueueEntry* big = Entry(plan, "big");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->position, 1);
  EXPECT_NE(big->reason.find("needs 2 workers with 2 free slots; 0 have them now"),
            std::string::npos)
      << big->reason;
  EXPECT_NE(big->reason.find("first in line"), std::string::npos) << big->reason;
  EXPECT_NE(big->reason.find("r-a, r-b"), std::string::npos) << big->reason;
  EXPECT_EQ(big->estimated_start_ms, 0);  // no max_runtime: no promise
  const QueueEntry* small = Entry(plan, "small-1");
  ASSERT_NE(small, nullptr);
  EXPECT_NE(small->reason.find("would delay big"), std::string::npos) << small->reason;
  // One running job ends: still nothing for the small job on the big job's slots.
  ctx.running.pop_back();
  plan = s.Plan(q.jobs, {{"a", 1, 0}, {"b", 2, 0}}, ctx);
  EXPECT_TRUE(plan.placements.empty());
  // Both ended: the big job starts, not the small one.
  ctx.running.clear();
  plan = s.Plan(q.jobs, {{"a", 2, 0}, {"b", 2, 0}}, ctx);
  EXPECT_EQ(Ids(plan.placements), std::vector<std::string>{"big"});
}

TEST(PrioritySchedulerTest, BackfillUsesIdleSlotsThatTheReservationDoesNotNeed) {
  // Three workers: the big job needs 2 nodes x 2 slots; c is idle but too small to matter.
  const PriorityScheduler s;
  Queue q;
  q.Add("big", Spec(2, 2), "alice", kT0);
  q.Add("small", Spec(1, 1), "bob", kT0 + 1);
  ScheduleContext ctx;
  ctx.now_ms = kT0 + 10;
  ctx.running = {{"r-a", "carol", 0, 0, {{"a", 2}}}};
  SchedulePlan plan = s.Plan(q.jobs, {{"a", 0, 0}, {"b", 2, 0}, {"c", 1, 0}}, ctx);
  ASSERT_EQ(Ids(plan.placements), std::vector<std::string>{"small"});
  EXPECT_EQ(plan.placements[0].workers, std::vector<std::string>{"c"});
}

TEST(PrioritySchedulerTest, AJobThatEndsBeforeTheReservationMayUseItsSlots) {
  const PriorityScheduler s;
  Queue q;
  q.Add("big", Spec(2, 2), "alice", kT0);
  q.Add("quick", Spec(1, 2, 0, /*max_runtime_s=*/600), "bob", kT0 + 1);
  q.Add("slow", Spec(1, 2, 0, /*max_runtime_s=*/7200), "bob", kT0 + 2);
  q.Add("unbounded", Spec(1, 2), "bob", kT0 + 3);
  ScheduleContext ctx;
  ctx.now_ms = kT0;
  // a is busy until one hour from now (its job's max_runtime); b has 4 free slots, 2 of them
  // held for the big job.
  ctx.running = {{"r-a", "carol", 0, kT0 + 60 * kMin, {{"a", 2}}}};
  SchedulePlan plan = s.Plan(q.jobs, {{"a", 0, 0}, {"b", 4, 0}}, ctx);
  EXPECT_EQ(Ids(plan.placements), std::vector<std::string>{"quick"});
  const QueueEntry* big = Entry(plan, "big");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->estimated_start_ms, kT0 + 60 * kMin);
  EXPECT_NE(big->reason.find("starts when r-a ends (by its max_runtime)"), std::string::npos)
      << big->reason;
  const QueueEntry* slow = Entry(plan, "slow");
  ASSERT_NE(slow, nullptr);
  EXPECT_NE(slow->reason.find("max_runtime ends after big"), std::string::npos) << slow->reason;
  const QueueEntry* unbounded = Entry(plan, "unbounded");
  ASSERT_NE(unbounded, nullptr);
  EXPECT_NE(unbounded->reason.find("a max_runtime that ends before it starts"), std::string::npos)
      << unbounded->reason;
}

TEST(PrioritySchedulerTest, AJobTooBigForTheClusterHoldsNothing) {
  const PriorityScheduler s;
  Queue q;
  q.Add("huge", Spec(5, 1), "alice", kT0);
  q.Add("small", Spec(1, 1), "bob", kT0 + 1);
  ScheduleContext ctx;
  ctx.now_ms = kT0;
  SchedulePlan plan = s.Plan(q.jobs, {{"a", 1, 0}, {"b", 1, 0}}, ctx);
  EXPECT_EQ(Ids(plan.placements), std::vector<std::string>{"small"});
  const QueueEntry* huge = Entry(plan, "huge");
  ASSERT_NE(huge, nullptr);
  EXPECT_NE(huge->reason.find("needs 5 workers"), std::string::npos) << huge->reason;
  EXPECT_NE(huge->reason.find("2 ready workers are taking jobs"), std::string::npos)
      << huge->reason;
}

// A simulated cluster over time: jobs arrive, run for their time, end. With a stream of
// small jobs that always has one waiting, the big job still starts (FIFO-with-backfill
// starves it here, which the last lines show), and no placement ever exceeds a worker's slots.
int64_t SimulateBigJobStart(const Scheduler& s, int64_t horizon_min) {
  // Each worker starts with one of its two slots busy for a few minutes.
  std::map<std::string, int> slots{{"a", 1}, {"b", 1}};
  struct Run {
    std::string id;
    int64_t end;
    std::vector<NodeHold> held;
  };
  std::vector<Run> running{{"init-a", kT0 + 2 * kMin, {{"a", 1}}},
                           {"init-b", kT0 + 3 * kMin, {{"b", 1}}}};
  Queue q;
  q.Add("big", Spec(2, 2), "alice", kT0);
  int next = 0;
  for (int64_t minute = 0; minute < horizon_min; ++minute) {
    const int64_t now = kT0 + minute * kMin;
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [&](const Run& r) {
                                   if (r.end > now) return false;
                                   for (const NodeHold& h : r.held) slots[h.worker] += h.slots;
                                   return true;
                                 }),
                  running.end());
    // Two small jobs arrive every minute, each running 2 minutes (no max_runtime given): the
    // workers are never idle together, so the big job never simply fits.
    for (int k = 0; k < 2; ++k) q.Add("s-" + std::to_string(next++), Spec(1, 1), "bob", now);
    std::vector<WorkerCapacity> cap;
    for (const auto& [w, n] : slots) cap.push_back({w, n, 0});
    ScheduleContext ctx;
    ctx.now_ms = now;
    for (const Run& r : running) ctx.running.push_back({r.id, "x", 0, 0, r.held});
    SchedulePlan plan = s.Plan(q.jobs, cap, ctx);
    for (const Placement& p : plan.placements) {
      if (p.id == "big") return minute;
      const int64_t lasts = 2;
      Run r{p.id, now + lasts * kMin, {}};
      for (const std::string& w : p.workers) {
        slots[w] -= 1;
        EXPECT_GE(slots[w], 0) << "over-committed worker " << w;
        r.held.push_back({w, 1});
      }
      running.push_back(r);
      q.jobs.erase(std::remove_if(q.jobs.begin(), q.jobs.end(),
                                  [&](const WaitingJob& j) { return j.id == p.id; }),
                   q.jobs.end());
    }
  }
  return -1;
}

TEST(PrioritySchedulerTest, AStreamOfSmallJobsNeverStarvesTheBigOne) {
  const int64_t started = SimulateBigJobStart(PriorityScheduler(), 120);
  EXPECT_GE(started, 0) << "the big job never started";
  EXPECT_LE(started, 5) << "it should start once the jobs on its workers end (3 min at most)";
  EXPECT_EQ(SimulateBigJobStart(FifoScheduler(), 120), -1)
      << "FIFO with backfill was expected to starve it (the test's premise)";
}

TEST(PrioritySchedulerTest, AJobOverItsOwnersQuotaWaitsWithoutHoldingAnything) {
  PriorityPolicy policy;
  policy.max_slots_per_owner = 4;
  const PriorityScheduler s(policy);
  Queue q;
  q.Add("alice-2", Spec(1, 2), "alice", kT0);  // 3 running + 2 > 4
  q.Add("bob-4", Spec(2, 2), "bob", kT0 + 1);
  q.Add("alice-1", Spec(1, 1), "alice", kT0 + 2);  // 3 + 1 = 4: fits the quota
  ScheduleContext ctx;
  ctx.now_ms = kT0 + 10;
  ctx.running = {{"r", "alice", 0, 0, {{"a", 3}}}};
  SchedulePlan plan = s.Plan(q.jobs, {{"a", 1, 0}, {"b", 4, 0}, {"c", 4, 0}}, ctx);
  // alice-2 is over quota: it holds nothing, bob's job and alice's small one start.
  auto placed = Ids(plan.placements);
  std::sort(placed.begin(), placed.end());
  EXPECT_EQ(placed, (std::vector<std::string>{"alice-1", "bob-4"}));
  const QueueEntry* over = Entry(plan, "alice-2");
  ASSERT_NE(over, nullptr);
  EXPECT_NE(over->reason.find("over quota: alice's running jobs use 3 of 4 processes "
                              "(--max-slots-per-user) and this one needs 2"),
            std::string::npos)
      << over->reason;
  // The running job ended (the accounting is what runs now): alice-2 starts.
  ctx.running.clear();
  Queue again;
  again.Add("alice-2", Spec(1, 2), "alice", kT0);
  plan = s.Plan(again.jobs, {{"a", 4, 0}}, ctx);
  EXPECT_EQ(Ids(plan.placements), std::vector<std::string>{"alice-2"});
  // Jobs without an owner are not counted.
  Queue local;
  local.Add("j", Spec(1, 8), "", kT0);
  EXPECT_EQ(Ids(s.Plan(local.jobs, {{"a", 8, 0}}, ctx).placements), std::vector<std::string>{"j"});
}

RunningJob Victim(const std::string& id, int priority, int64_t started, const std::string& worker,
                  int slots, bool preemptible = true) {
  RunningJob r;
  r.id = id;
  r.owner = "x";
  r.priority = priority;
  r.started_ms = started;
  r.preemptible = preemptible;
  r.slots = {{worker, slots}};
  return r;
}

TEST(PreemptionTest, TheLowestPriorityVictimsThatFreeEnoughAndNoMore) {
  // Four workers of 2 slots, all full. A 1x2 job needs one worker: the lowest-priority job
  // goes, and nothing else.
  const std::vector<WorkerCapacity> full{{"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"d", 0, 0}};
  std::vector<RunningJob> running{Victim("p-3", -3, kT0, "a", 2), Victim("p-9", -9, kT0, "b", 2),
                                  Victim("p-5", -5, kT0, "c", 2), Victim("p-1", -1, kT0, "d", 2)};
  EXPECT_EQ(PriorityScheduler::ChooseVictims(Spec(1, 2, 0), {}, full, running),
            std::vector<std::string>{"p-9"});
  // A 2x2 job: the two lowest.
  auto two = PriorityScheduler::ChooseVictims(Spec(2, 2, 0), {}, full, running);
  std::sort(two.begin(), two.end());
  EXPECT_EQ(two, (std::vector<std::string>{"p-5", "p-9"}));
  // Only jobs of lower priority than the job's own: a priority -4 job may stop -9 and -5.
  EXPECT_EQ(PriorityScheduler::ChooseVictims(Spec(3, 2, -4), {}, full, running),
            std::vector<std::string>{});
  // Equal priorities: the youngest goes first.
  std::vector<RunningJob> same{Victim("old", -1, kT0, "a", 2),
                               Victim("young", -1, kT0 + 5, "b", 2)};
  EXPECT_EQ(PriorityScheduler::ChooseVictims(Spec(1, 2, 0), {}, full, same),
            std::vector<std::string>{"young"});
  // Not preemptible: never chosen, even when it is the only way.
  std::vector<RunningJob> kept{Victim("kept", -9, kT0, "a", 2, false)};
  EXPECT_TRUE(PriorityScheduler::ChooseVictims(Spec(1, 2, 0), {}, full, kept).empty());
}

TEST(PreemptionTest, AVictimThatDoesNotHelpIsSpared) {
  // The lowest-priority job holds 1 slot on a; the 1x2 job needs both slots of one worker:
  // freeing b's 2 (priority -2) is enough, and a's job (priority -9) is spared after all.
  const std::vector<WorkerCapacity> cap{{"a", 0, 0}, {"b", 0, 0}};
  std::vector<RunningJob> running{Victim("small", -9, kT0, "a", 1),
                                  Victim("a-rest", -1, kT0, "a", 1),
                                  Victim("big", -2, kT0, "b", 2)};
  EXPECT_EQ(PriorityScheduler::ChooseVictims(Spec(1, 2, 0), {}, cap, running),
            std::vector<std::string>{"big"});
}

TEST(PreemptionTest, AJobThatFitsOnceStoppingJobsEndPreemptsNoOneMore) {
  const PriorityScheduler s;
  Queue q;
  q.Add("urgent", Spec(1, 2, 5), "alice", kT0);
  ScheduleContext ctx;
  ctx.now_ms = kT0 + 10;
  RunningJob stopping = Victim("was-preempted", -9, kT0, "a", 2);
  stopping.stopping = true;
  ctx.running = {stopping, Victim("other", -1, kT0, "b", 2)};
  SchedulePlan plan = s.Plan(q.jobs, {{"a", 0, 0}, {"b", 0, 0}}, ctx);
  EXPECT_TRUE(plan.preemptions.empty());
  ASSERT_NE(Entry(plan, "urgent"), nullptr);
  EXPECT_EQ(Entry(plan, "urgent")->estimated_start_ms, ctx.now_ms);  // as soon as it stops
  // Without the stopping job, "other" is preempted for it.
  ctx.running = {Victim("other", -1, kT0, "b", 2)};
  plan = s.Plan(q.jobs, {{"a", 0, 0}, {"b", 0, 0}}, ctx);
  ASSERT_EQ(plan.preemptions.size(), 1u);
  EXPECT_EQ(plan.preemptions[0].victim, "other");
  EXPECT_EQ(plan.preemptions[0].for_job, "urgent");
  EXPECT_NE(Entry(plan, "urgent")->reason.find("preempting other"), std::string::npos);
}

TEST(PreemptionTest, GpuQuotaCountsGpus) {
  const PriorityScheduler s;
  Queue q;
  v1::JobSpec gpu = Spec(1, 1);
  gpu.set_gpus_per_proc(2);
  q.Add("alice-gpu", gpu, "alice", kT0);
  ScheduleContext ctx;
  ctx.now_ms = kT0 + 10;
  Quota quota;
  quota.gpus = 3;
  quota.gpus_source = "--quota role:user";
  ctx.quotas["alice"] = quota;
  RunningJob r = Victim("r", 0, kT0, "a", 1, false);
  r.owner = "alice";
  r.slots[0].gpus = 2;
  ctx.running = {r};
  WorkerCapacity w{"b", 4, 4};
  SchedulePlan plan = s.Plan(q.jobs, {w}, ctx);
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_NE(Entry(plan, "alice-gpu"), nullptr);
  EXPECT_NE(Entry(plan, "alice-gpu")
                ->reason.find("hold 2 of 3 GPUs (--quota role:user) and "
                              "this one needs 2"),
            std::string::npos)
      << Entry(plan, "alice-gpu")->reason;
}

}  // namespace priority_scheduler_test
}  // namespace convoy
