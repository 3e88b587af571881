// Nothing slow on the loop that sends heartbeats (issue 44): a real worker (built by its
// composition root, real threads, real files) copies a 1 GiB resume_from checkpoint for a job
// of another identity, then removes a deleted job's large tree, while a fake coordinator
// counts its heartbeats (every 100 ms). No two may be more than 2 s apart: a worker whose loop
// stalls for the copy would be declared lost by a coordinator with a short timeout.
//
// The checkpoint is made with fallocate (no 1 GiB write to set the test up); the copy reads
// and writes every byte, as it would for a real checkpoint. Needs root (--run-as pool: the
// copy exists because the two jobs have different identities); skipped otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/job_paths.h"
#include "tests/support/fake_worker_service.h"
#include "tests/support/temp_dir.h"
#include "worker/daemon/worker_daemon.h"

namespace convoy::testing {
namespace worker_heartbeat_gap_test {

using namespace std::chrono_literals;

constexpr int64_t kCheckpointBytes = int64_t{1} << 30;
constexpr int kDeletedFiles = 20000;
const char* const kSourceUid = "0123456789abcdef0123456789abcdef";
const char* const kJobUid = "fedcba9876543210fedcba9876543210";
const char* const kClusterId = "00112233445566778899aabbccddeeff";

// The longest time between two heartbeats received in [from, to], counting from `from` to
// the first and from the last to `to`.
std::chrono::milliseconds LongestGap(const std::vector<std::chrono::steady_clock::time_point>& hbs,
                                     std::chrono::steady_clock::time_point from,
                                     std::chrono::steady_clock::time_point to) {
  auto last = from;
  std::chrono::steady_clock::duration longest{0};
  for (const auto& t : hbs) {
    if (t < from || t > to) continue;
    longest = std::max(longest, t - last);
    last = t;
  }
  longest = std::max(longest, to - last);
  return std::chrono::duration_cast<std::chrono::milliseconds>(longest);
}

v1::CoordinatorMessage LaunchResuming() {
  v1::CoordinatorMessage m;
  v1::Launch* l = m.mutable_launch();
  l->set_job_id("j-000002");
  l->set_job_uid(kJobUid);
  l->set_cluster_id(kClusterId);
  l->set_identity(2);
  l->set_attempt(0);
  l->set_num_nodes(1);
  l->set_local_world_size(1);
  l->set_world_size(1);
  l->add_ranks(0);
  l->set_master_addr("127.0.0.1");
  l->set_master_port(29500);
  l->mutable_spec()->add_command("/bin/true");
  l->mutable_resume_source()->set_job_id("j-000001");
  l->mutable_resume_source()->set_uid(kSourceUid);
  return m;
}

TEST(WorkerHeartbeatGap, ACheckpointCopyAndALargeDeletionNeverHoldUpHeartbeats) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (--run-as pool)";
  TempDir dir("convoy-hbgap");
  // The ranks (another uid of the pool) pass through it to their job directory.
  ASSERT_EQ(chmod(dir.str().c_str(), 0711), 0);
  FakeCoordinatorServer coordinator(100);
  ASSERT_TRUE(coordinator.ok());

  WorkerFlags flags;
  flags.coordinator = coordinator.address();
  flags.name = "w1";
  flags.advertise_address = "127.0.0.1";
  flags.work_dir = dir / "work";
  flags.cores = 1;
  flags.slots = 1;
  flags.gpus = "none";
  flags.kill_grace_ms = 1000;
  flags.cgroups = "off";
  flags.snapshot_dir = "none";
  flags.warm_trainers = 0;
  flags.prefill_data = {"none"};
  flags.attempt_dir_retention_s = 0;
  flags.insecure = true;
  flags.run_as = "pool";
  auto daemon = WorkerDaemon::Create(flags);
  ASSERT_TRUE(daemon.ok()) << daemon.status().message();
  (*daemon)->Start();
  FakeWorkerService& service = coordinator.service();
  ASSERT_TRUE(service.Next(v1::WorkerMessage::kRegister).has_value());

  // The job it resumes from left a 1 GiB checkpoint in its directory on this worker.
  const std::string job_root = dir / "work/job-root";
  const std::string source_dir = job_root + "/" + JobDirName("j-000001", kSourceUid);
  std::filesystem::create_directories(source_dir + "/checkpoints");
  const std::string checkpoint = source_dir + "/checkpoints/ckpt-000000000100.pt";
  {
    const int fd = open(checkpoint.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(posix_fallocate(fd, 0, kCheckpointBytes), 0);
    close(fd);
  }

  // The copy: from the Launch to the rank's start.
  const auto copy_began = std::chrono::steady_clock::now();
  ASSERT_TRUE(service.Send(LaunchResuming()));
  auto started = service.Next(v1::WorkerMessage::kProcessStarted, 120s);
  ASSERT_TRUE(started.has_value()) << "the rank did not start";
  const auto copy_ended = std::chrono::steady_clock::now();
  const std::string copy_dir = job_root + "/" + JobDirName("j-000002", kJobUid) + "/resume-from-" +
                               JobDirName("j-000001", kSourceUid);
  struct stat st {};
  ASSERT_EQ(stat((copy_dir + "/ckpt-000000000100.pt").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, kCheckpointBytes);
  ASSERT_TRUE(service.Next(v1::WorkerMessage::kProcessExited, 30s).has_value());

  // The deletion: the job's directory with its copy and many small files.
  const std::string job_dir = job_root + "/" + JobDirName("j-000002", kJobUid);
  for (int i = 0; i < kDeletedFiles; ++i) {
    const std::string sub = job_dir + "/outputs/" + std::to_string(i % 100);
    if (i < 100) std::filesystem::create_directories(sub);
    std::ofstream(sub + "/f" + std::to_string(i)) << i;
  }
  const auto delete_began = std::chrono::steady_clock::now();
  v1::CoordinatorMessage del;
  del.mutable_delete_job_files()->set_job_id("j-000002");
  del.mutable_delete_job_files()->set_job_uid(kJobUid);
  del.mutable_delete_job_files()->set_cluster_id(kClusterId);
  ASSERT_TRUE(service.Send(del));
  auto deleted = service.Next(v1::WorkerMessage::kJobFilesDeleted, 120s);
  ASSERT_TRUE(deleted.has_value());
  EXPECT_EQ(deleted->job_files_deleted().error(), "");
  const auto delete_ended = std::chrono::steady_clock::now();
  EXPECT_FALSE(std::filesystem::exists(job_dir));
  // One more heartbeat after the deletion, so that the window is closed by a real one.
  std::this_thread::sleep_for(300ms);

  const auto hbs = service.heartbeat_times();
  const auto copy_gap = LongestGap(hbs, copy_began, copy_ended);
  const auto delete_gap = LongestGap(hbs, delete_began, delete_ended);
  auto ms = [](auto d) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  std::printf(
      "copy of 1 GiB: %lld ms, longest heartbeat gap %lld ms; deletion of %d files and the "
      "copy: %lld ms, longest heartbeat gap %lld ms (interval 100 ms)\n",
      ms(copy_ended - copy_began), ms(copy_gap), kDeletedFiles, ms(delete_ended - delete_began),
      ms(delete_gap));
  EXPECT_LE(copy_gap.count(), 2000) << "heartbeats stalled during the copy";
  EXPECT_LE(delete_gap.count(), 2000) << "heartbeats stalled during the deletion";
  (*daemon)->Stop();
}

}  // namespace worker_heartbeat_gap_test
}  // namespace convoy::testing
