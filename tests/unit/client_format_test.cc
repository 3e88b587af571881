// The `convoy` CLI's pure pieces: exit codes, JSON shape, durations, tables and the text of
// `convoy status` (failure causes and events included).
#include "client/format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

namespace convoy {
namespace client_format_test {

class ClientFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TZ", "UTC", 1);  // FormatClock prints local time
    tzset();
  }
};

constexpr int64_t kT0 = 1'700'000'000'000;  // 2023-11-14 22:13:20 UTC

TEST_F(ClientFormatTest, ExitCodeForEachRpcStatus) {
  const std::pair<grpc::StatusCode, int> cases[] = {
      {grpc::StatusCode::OK, 0},
      {grpc::StatusCode::INVALID_ARGUMENT, 2},
      {grpc::StatusCode::UNAVAILABLE, 3},
      {grpc::StatusCode::DEADLINE_EXCEEDED, 3},
      {grpc::StatusCode::NOT_FOUND, 4},
      {grpc::StatusCode::FAILED_PRECONDITION, 5},
      {grpc::StatusCode::INTERNAL, 5},
      {grpc::StatusCode::UNAUTHENTICATED, 6},
      {grpc::StatusCode::PERMISSION_DENIED, 7},
      {grpc::StatusCode::CANCELLED, 5},
      {grpc::StatusCode::UNKNOWN, 5},
  };
  for (const auto& [code, exit] : cases) {
    EXPECT_EQ(ExitCodeFor(grpc::Status(code, "x")), exit) << code;
  }
  EXPECT_EQ(kExitJobNotSucceeded, 1);
  EXPECT_NE(std::string(kExitCodesHelp).find("3  the coordinator cannot be reached"),
            std::string::npos);
}

TEST_F(ClientFormatTest, Durations) {
  const std::pair<int64_t, const char*> cases[] = {
      {-5000, "0s"},         {0, "0s"},
      {850, "850ms"},        {3'000, "3s"},
      {59'999, "59s"},       {60'000, "1m00s"},
      {245'000, "4m05s"},    {3'599'000, "59m59s"},
      {3'600'000, "1h00m"},  {7'800'000, "2h10m"},
      {86'400'000, "1d00h"}, {3 * 86'400'000LL + 4 * 3'600'000LL, "3d04h"},
  };
  for (const auto& [ms, text] : cases) EXPECT_EQ(FormatDuration(ms), text) << ms;
  EXPECT_EQ(FormatAge(0, kT0), "-");
  EXPECT_EQ(FormatAge(kT0 - 3'000, kT0), "3s ago");
  EXPECT_EQ(FormatAge(kT0 + 3'000, kT0), "0s ago") << "clock skew is not negative age";
  EXPECT_EQ(FormatClock(kT0), "22:13:20");
  EXPECT_EQ(FormatPercent(0.8712), "87.12%");
}

TEST_F(ClientFormatTest, JsonUsesProtoNamesEnumNamesAndPrintsDefaults) {
  v1::Job job;
  job.set_id("j-000001");
  job.set_state(v1::SUCCEEDED);
  job.mutable_spec()->set_procs_per_node(2);
  const std::string json = ToJson(job);
  EXPECT_EQ(json.find('\n'), std::string::npos) << "one document on one line";
  EXPECT_NE(json.find(R"("state":"SUCCEEDED")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("procs_per_node":2)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("restarts":0)"), std::string::npos) << "defaults printed: " << json;
  EXPECT_NE(json.find(R"("created_unix_ms":"0")"), std::string::npos) << json;

  v1::ListJobsResponse list;
  *list.add_jobs() = job;
  EXPECT_EQ(ToJson(list).rfind(R"({"jobs":[{"id":"j-000001")", 0), 0u) << ToJson(list);
  EXPECT_EQ(ToJson(v1::ListJobsResponse()), R"({"jobs":[],"next_page_token":""})");
  v1::SubmitJobResponse submitted;
  submitted.set_job_id("j-000002");
  EXPECT_EQ(ToJson(submitted), R"({"job_id":"j-000002"})");

  // -o yaml: the same document in block style.
  EXPECT_EQ(ToYaml(submitted), "job_id: j-000002");
  const std::string yaml = ToYaml(list);
  EXPECT_EQ(yaml.rfind("jobs:\n  - id: j-000001\n", 0), 0u) << yaml;
  EXPECT_NE(yaml.find("\n    state: SUCCEEDED\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\n      procs_per_node: 2\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("created_unix_ms: \"0\""), std::string::npos) << yaml;
  EXPECT_EQ(ToYaml(v1::ListJobsResponse()), "jobs: []\nnext_page_token: \"\"");
  EXPECT_EQ(JsonToYaml(R"({"a":[1,2],"b":{"c":"x y"}})"), "a:\n  - 1\n  - 2\nb:\n  c: x y");
  v1::WatchJobResponse update;
  update.mutable_event()->set_to(v1::RUNNING);
  EXPECT_EQ(ToJson(update).rfind(R"({"event":{)", 0), 0u) << ToJson(update);
}

TEST_F(ClientFormatTest, ExitText) {
  v1::ProcessExit e;
  EXPECT_EQ(ExitText(e), "");
  e.set_exit_code(7);
  EXPECT_EQ(ExitText(e), "exited with code 7");
  e.set_exit_code(0);
  e.set_signal(9);
  e.set_signal_name("SIGKILL");
  EXPECT_EQ(ExitText(e), "killed by SIGKILL");
  e.set_killed_by_worker(true);
  EXPECT_EQ(ExitText(e), "killed by SIGKILL (sent by the worker)");
  v1::ProcessExit unnamed;
  unnamed.set_signal(15);
  EXPECT_EQ(ExitText(unnamed), "killed by SIGTERM");
}

TEST_F(ClientFormatTest, TablesAlignOnCharactersNotBytes) {
  EXPECT_EQ(FormatTable({"A", "NODES×PROCS", "Z"}, {{"long-cell", "2×1", "end"}}),
            "A          NODES×PROCS  Z\n"
            "long-cell  2×1          end\n");
  EXPECT_EQ(FormatTable({"ONLY"}, {}), "ONLY\n");
}

TEST_F(ClientFormatTest, JobTable) {
  v1::ListJobsResponse list;
  v1::Job* j = list.add_jobs();
  j->set_id("j-000007");
  j->mutable_spec()->set_name("fmnist-cnn");
  j->mutable_spec()->set_nodes(2);
  j->mutable_spec()->set_procs_per_node(1);
  j->set_state(v1::RUNNING);
  j->set_attempt(1);
  j->set_created_unix_ms(kT0 - 245'000);
  j->set_message("all 2 ranks started");
  v1::Job* g = list.add_jobs();
  list.mutable_jobs(0)->set_owner("alice");
  g->set_id("j-000008");
  g->mutable_spec()->set_name("gpu");
  g->mutable_spec()->set_nodes(4);
  g->mutable_spec()->set_procs_per_node_gpu(true);
  g->set_state(v1::PENDING);
  EXPECT_EQ(
      FormatJobTable(list, kT0),
      "ID        NAME        OWNER  STATE    ATTEMPT  NODES×PROCS  AGE    MESSAGE\n"
      "j-000007  fmnist-cnn  alice  RUNNING  1        2×1          4m05s  all 2 ranks started\n"
      "j-000008  gpu         -      PENDING  0        4×gpu        -      \n");
}

TEST_F(ClientFormatTest, WorkerTable) {
  v1::ListWorkersResponse list;
  v1::WorkerInfo* w = list.add_workers();
  w->set_name("gpu-1");
  w->set_state(v1::WORKER_READY);
  w->set_address("10.0.0.1");
  w->set_cores(64);
  w->set_used_cpus(16);
  w->set_memory_bytes(int64_t{512} << 30);
  w->set_used_memory_bytes(int64_t{128} << 30);
  for (int i = 0; i < 4; ++i) {
    w->add_gpus(i);
    v1::GpuDevice* d = w->add_gpu_devices();
    d->set_index(i);
    d->set_model("NVIDIA H100 80GB HBM3");
    d->set_memory_bytes(int64_t{80} << 30);
  }
  w->add_used_gpus(0);
  w->add_used_gpus(1);
  w->set_slots(4);
  w->set_used_slots(2);
  (*w->mutable_labels())["zone"] = "a";
  (*w->mutable_labels())["gpu"] = "h100";
  w->add_jobs("j-000007");
  w->set_last_heartbeat_unix_ms(kT0 - 3'000);
  v1::WorkerInfo* cpu = list.add_workers();
  cpu->set_name("w2");
  cpu->set_state(v1::WORKER_READY);
  cpu->set_drained(true);
  cpu->set_cores(2);
  cpu->set_used_cpus(2);
  cpu->set_memory_bytes(int64_t{24523456} * 1024);  // 23.4 GiB
  cpu->set_used_memory_bytes(int64_t{3} << 29);     // 1.5 GiB
  cpu->set_slots(2);
  cpu->set_used_slots(2);
  for (const char* j : {"j-000008", "j-000009", "j-000010", "j-000011"}) cpu->add_jobs(j);
  (*cpu->mutable_labels())["example.com/rack"] = "r-0123456789";
  cpu->set_last_heartbeat_unix_ms(kT0 - 1'000);
  v1::WorkerInfo* lost = list.add_workers();
  lost->set_name("w3");
  lost->set_state(v1::WORKER_LOST);
  lost->set_cores(2);
  lost->set_slots(1);
  const std::string table = FormatWorkerTable(list, kT0);
  EXPECT_EQ(table,
            "NAME   STATE          SLOTS  CORES  MEMORY        GPUS      LABELS                    "
            "HEARTBEAT  JOBS\n"
            "gpu-1  READY          2/4    16/64  128/512 GiB   2/4 H100  gpu=h100,zone=a           "
            "3s ago     j-000007\n"
            "w2     READY,DRAINED  2/2    2/2    1.5/23.4 GiB  -         example.com/rack=r-0123…  "
            "1s ago     j-000008,j-000009 +2\n"
            "w3     LOST           0/1    0/2    -             -         -                         "
            "-          -\n");
  // Readable in 80-120 columns.
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    const size_t chars = std::count_if(line.begin(), line.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    });
    EXPECT_LE(chars, 120u) << line;
  }
}

TEST_F(ClientFormatTest, BytesAndGpuModels) {
  EXPECT_EQ(FormatBytes(int64_t{64} << 30), "64 GiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(FormatBytes(int64_t{512} << 20), "512 MiB");
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatBytes(int64_t{1000} << 30), "1000 GiB");
  EXPECT_EQ(FormatUsedOfBytes(int64_t{30} << 30, int64_t{64} << 30), "30/64 GiB");
  EXPECT_EQ(FormatUsedOfBytes(0, int64_t{64} << 30), "0/64 GiB");
  EXPECT_EQ(FormatUsedOfBytes(int64_t{512} << 30, int64_t{2} << 40), "0.5/2 TiB");
  EXPECT_EQ(FormatUsedOfBytes(int64_t{512} << 20, int64_t{2} << 40), "<0.1/2 TiB");
  EXPECT_EQ(FormatUsedOfBytes(0, 0), "-");
  EXPECT_EQ(GpuModelShort("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(GpuModelShort("NVIDIA A100-SXM4-40GB"), "A100-SXM4-40GB");
  EXPECT_EQ(GpuModelShort("NVIDIA RTX A6000"), "RTX A6000");
  EXPECT_EQ(GpuModelShort("Tesla V100-SXM2-16GB"), "V100-SXM2-16GB");
  EXPECT_EQ(GpuModelShort("NVIDIA GeForce RTX 4090"), "RTX 4090");
  EXPECT_EQ(GpuModelShort(""), "");
}

v1::JobEvent Event(int64_t t, v1::JobState from, v1::JobState to, int attempt,
                   const std::string& reason) {
  v1::JobEvent e;
  e.set_time_unix_ms(t);
  e.set_from(from);
  e.set_to(to);
  e.set_attempt(attempt);
  e.set_reason(reason);
  return e;
}

// A 2×1 trainer job whose attempt 0 failed (rank 1 killed) and whose attempt 1 runs.
v1::Job RestartedJob() {
  v1::Job job;
  job.set_id("j-000007");
  v1::JobSpec* spec = job.mutable_spec();
  spec->set_name("fmnist-cnn");
  spec->set_nodes(2);
  spec->set_procs_per_node(1);
  spec->set_backend("gloo");
  spec->mutable_trainer()->set_epochs(1);
  spec->mutable_trainer()->set_batch_size(32);
  spec->mutable_trainer()->set_lr(0.01);
  spec->set_max_restarts(2);
  job.set_state(v1::RUNNING);
  job.set_attempt(1);
  job.set_restarts(1);
  job.set_created_unix_ms(kT0 - 65'000);
  job.set_updated_unix_ms(kT0 - 5'000);
  job.set_message("all 2 ranks started");

  v1::Attempt* a0 = job.add_attempts();
  a0->set_attempt(0);
  v1::RankFailure* f = a0->mutable_failure();
  f->set_rank(1);
  f->set_local_rank(0);
  f->set_worker("w2");
  f->set_host("10.0.0.2");
  f->mutable_exit()->set_signal(9);
  f->mutable_exit()->set_signal_name("SIGKILL");
  f->mutable_exit()->add_stderr_tail("Traceback (most recent call last):");
  f->mutable_exit()->add_stderr_tail("  oom");
  f->set_reason("rank 1 on worker w2 (10.0.0.2) killed by SIGKILL");

  v1::Attempt* a1 = job.add_attempts();
  a1->set_attempt(1);
  a1->set_master_addr("10.0.0.1");
  a1->set_master_port(29500);
  for (int n = 0; n < 2; ++n) {
    v1::NodeAssignment* node = a1->add_nodes();
    node->set_group_rank(n);
    node->set_worker(n == 0 ? "w1" : "w3");
    node->set_address(n == 0 ? "10.0.0.1" : "10.0.0.3");
    node->add_ranks(n);
  }
  for (int r = 0; r < 2; ++r) {
    v1::MetricRecord* m = job.add_latest();
    m->set_rank(r);
    m->set_attempt(1);
    m->set_time_unix_ms(kT0 - 2'000);
    m->set_epoch(1);
    m->set_step(120);
    m->set_has_step(true);
    m->set_loss(0.4321);
    m->set_has_loss(true);
    (*m->mutable_values())["total_steps"] = 1875;
    (*m->mutable_values())["samples_per_s"] = 2100.4;
    (*m->mutable_values())["test_accuracy"] = 0.8712;
  }
  v1::MetricRecord* old = job.add_latest();  // a rank of the old attempt: not shown
  old->set_rank(5);
  old->set_attempt(0);

  *job.add_events() = Event(kT0 - 65'000, v1::JOB_STATE_UNSPECIFIED, v1::PENDING, 0, "submitted");
  *job.add_events() = Event(kT0 - 64'000, v1::PENDING, v1::SCHEDULED, 0, "placed on w1,w2");
  v1::JobEvent failed = Event(kT0 - 30'000, v1::RUNNING, v1::RESTARTING, 0, f->reason());
  *failed.mutable_failure() = *f;
  *job.add_events() = failed;
  *job.add_events() = Event(kT0 - 5'000, v1::RENDEZVOUS, v1::RUNNING, 1, "all 2 ranks started");
  return job;
}

TEST_F(ClientFormatTest, StatusShowsPlacementProgressRootCausesAndEvents) {
  v1::Job job = RestartedJob();
  job.set_owner("alice");
  job.set_uid("0123456789abcdef0123456789abcdef");
  EXPECT_EQ(FormatJobStatus(job, kT0),
            "job j-000007 (fmnist-cnn): RUNNING\n"
            "  message:  all 2 ranks started\n"
            "  shape:    2×1 (nodes×procs), backend gloo\n"
            "  runs:     trainer fmnist-cnn (epochs 1, batch 32, lr 0.01)\n"
            "  attempt:  1 (restarts used 1 of 2)\n"
            "  created:  1m05s ago by alice, updated 5s ago\n"
            "  uid:      0123456789abcdef0123456789abcdef\n"
            "  test accuracy: 87.12%\n"
            "placement (attempt 1): master 10.0.0.1:29500\n"
            "  NODE  WORKER  ADDRESS   RANKS\n"
            "  0     w1      10.0.0.1  0\n"
            "  1     w3      10.0.0.3  1\n"
            "progress (latest record of each rank):\n"
            "  rank 0  epoch 1  step 120/1875  loss 0.4321  2100 samples/s  test acc 87.12%  "
            "(2s ago)\n"
            "  rank 1  epoch 1  step 120/1875  loss 0.4321  2100 samples/s  test acc 87.12%  "
            "(2s ago)\n"
            "failures (the root cause of each failed attempt):\n"
            "  attempt 0:\n"
            "    rank 1 on worker w2 (10.0.0.2) killed by SIGKILL\n"
            "      rank 1 (local 0), worker w2, host 10.0.0.2: killed by SIGKILL\n"
            "      last lines of its stderr:\n"
            "        | Traceback (most recent call last):\n"
            "        |   oom\n"
            "events:\n"
            "  22:12:15  - -> PENDING  submitted\n"
            "  22:12:16  PENDING -> SCHEDULED  placed on w1,w2\n"
            "  22:12:50  RUNNING -> RESTARTING  rank 1 on worker w2 (10.0.0.2) killed "
            "by SIGKILL\n"
            "  22:13:15  RENDEZVOUS -> RUNNING  all 2 ranks started\n");
}

TEST_F(ClientFormatTest, StatusOfACommandJobThatNeverRan) {
  v1::Job job;
  job.set_id("j-000009");
  job.mutable_spec()->set_name("fails");
  job.mutable_spec()->set_nodes(1);
  job.mutable_spec()->set_procs_per_node(1);
  job.mutable_spec()->add_command("false");
  job.set_state(v1::PENDING);
  const std::string text = FormatJobStatus(job, kT0);
  EXPECT_NE(text.find("  runs:     command: false\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("placement"), std::string::npos) << text;
  EXPECT_EQ(text.find("progress"), std::string::npos) << text;
  EXPECT_EQ(text.find("failures"), std::string::npos) << text;
  EXPECT_NE(text.find("events:\n"), std::string::npos) << text;
}

TEST_F(ClientFormatTest, FailureWithoutAReasonOrAnExit) {
  v1::RankFailure f;  // e.g. what an older coordinator might send
  f.set_rank(3);
  f.set_local_rank(1);
  f.set_worker("w2");
  EXPECT_EQ(FormatFailure(f, "  "), "  rank 3 (local 1), worker w2\n");
  f.mutable_exit()->set_exit_code(1);
  EXPECT_EQ(FormatFailure(f, ""), "rank 3 (local 1), worker w2: exited with code 1\n");
}

TEST_F(ClientFormatTest, RankProgressLeavesOutWhatARecordLacks) {
  v1::MetricRecord m;
  m.set_rank(0);
  m.set_step(5);
  EXPECT_EQ(FormatRankProgress(m), "epoch 0  step 5");
  m.set_loss(1.5);
  m.set_has_loss(true);
  (*m.mutable_values())["samples_per_s"] = 99.6;
  EXPECT_EQ(FormatRankProgress(m), "epoch 0  step 5  loss 1.5000  100 samples/s");
}

TEST_F(ClientFormatTest, TestAccuracyIsTheMeanOverTheCurrentAttempt) {
  std::vector<v1::MetricRecord> records(3);
  records[0].set_attempt(1);
  (*records[0].mutable_values())["test_accuracy"] = 0.8;
  records[1].set_attempt(1);
  (*records[1].mutable_values())["test_accuracy"] = 0.9;
  records[2].set_attempt(0);
  (*records[2].mutable_values())["test_accuracy"] = 0.1;
  EXPECT_DOUBLE_EQ(TestAccuracy(records, 1), 0.85);
  EXPECT_DOUBLE_EQ(TestAccuracy(records, 0), 0.1);
  EXPECT_EQ(TestAccuracy(records, 2), -1);
  EXPECT_DOUBLE_EQ(TestAccuracy(RestartedJob()), 0.8712);
}

}  // namespace client_format_test
}  // namespace convoy
