// The worker's health checks (worker/host/health.h): free space, /dev/shm, the operator's
// program (exit status, first lines, timeout, what it leaves behind), and the monitor that
// runs them on a thread of its own and says when the verdict changes.
#include "worker/host/health.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace convoy {
namespace worker_health_test {

namespace fs = std::filesystem;

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/convoy-health-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
  SystemClock clock_;
};

// Gone, or a zombie waiting for a parent that is not this test (killed either way).
bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

template <typename F>
bool Eventually(F f) {
  for (int i = 0; i < 1000; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

TEST_F(HealthTest, FreeSpaceBelowTheMinimumFailsNamingThePathAndTheNeed) {
  const HealthCheckOutcome fine = CheckFreeSpace("disk:work-dir", dir_, 0);
  EXPECT_TRUE(fine.ok) << fine.detail;
  EXPECT_NE(fine.detail.find("free in " + dir_), std::string::npos) << fine.detail;
  const HealthCheckOutcome full = CheckFreeSpace("disk:work-dir", dir_, int64_t{1} << 60);
  EXPECT_FALSE(full.ok);
  EXPECT_NE(full.detail.find(dir_), std::string::npos) << full.detail;
  EXPECT_NE(full.detail.find("needs"), std::string::npos) << full.detail;
  // Not made yet (made on first use): measured on the file system it will be made on.
  const HealthCheckOutcome later = CheckFreeSpace("disk:snapshot-dir", dir_ + "/later/too", 0);
  EXPECT_TRUE(later.ok) << later.detail;
  const HealthCheckOutcome full_later =
      CheckFreeSpace("disk:snapshot-dir", dir_ + "/later", int64_t{1} << 60);
  EXPECT_FALSE(full_later.ok);
  EXPECT_NE(full_later.detail.find(dir_ + "/later"), std::string::npos) << full_later.detail;
}

TEST_F(HealthTest, ShmMustBeWritable) {
  EXPECT_TRUE(CheckShm(dir_, 0).ok);
  EXPECT_TRUE(fs::is_empty(dir_)) << "the probe file was left behind";
  if (geteuid() == 0) GTEST_SKIP() << "root writes into a read-only directory";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  const HealthCheckOutcome ro = CheckShm(dir_, 0);
  fs::permissions(dir_, fs::perms::owner_all);
  EXPECT_FALSE(ro.ok);
  EXPECT_NE(ro.detail.find("cannot make a file"), std::string::npos) << ro.detail;
}

TEST_F(HealthTest, TheProgramsExitStatusAndFirstLinesAreTheVerdict) {
  const HealthCheckOutcome ok = RunHealthProgram("echo all good", 10000);
  EXPECT_TRUE(ok.ok) << ok.detail;
  EXPECT_EQ(ok.detail, "all good");
  const HealthCheckOutcome bad = RunHealthProgram(
      "echo 'ib0: link down'; echo 'second line' >&2; echo third; echo fourth; exit 3", 10000);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.detail, "ib0: link down | second line | third (exited with code 3)");
  const HealthCheckOutcome silent = RunHealthProgram("exit 1", 10000);
  EXPECT_FALSE(silent.ok);
  EXPECT_EQ(silent.detail, "'exit 1' exited with code 1");
}

TEST_F(HealthTest, AProgramThatOverrunsFailsAndNothingOfItIsLeft) {
  const std::string pidfile = dir_ + "/pid";
  const HealthCheckOutcome slow =
      RunHealthProgram("echo $$ > " + pidfile + "; echo checking; sleep 60", 300);
  EXPECT_FALSE(slow.ok);
  EXPECT_NE(slow.detail.find("did not finish within 0.3 s: checking"), std::string::npos)
      << slow.detail;
  pid_t pid = 0;
  std::ifstream(pidfile) >> pid;
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(Eventually([&] { return Gone(pid); })) << "the program still runs";
}

TEST_F(HealthTest, AChildLeftBehindHoldingTheOutputDoesNotHoldTheVerdict) {
  const std::string pidfile = dir_ + "/child";
  // The shell exits 0 at once; its background child keeps stdout open for a minute.
  const HealthCheckOutcome out =
      RunHealthProgram("sleep 60 & echo $! > " + pidfile + "; echo done", 30000);
  EXPECT_TRUE(out.ok) << out.detail;
  pid_t child = 0;
  std::ifstream(pidfile) >> child;
  ASSERT_GT(child, 0);
  EXPECT_TRUE(Eventually([&] { return Gone(child); })) << "its group was not killed";
}

TEST_F(HealthTest, TheReportNamesEveryFailedCheck) {
  HealthOptions o;
  o.disks = {{"disk:work-dir", dir_}, {"disk:job-root", dir_ + "/missing"}};
  o.min_free_bytes = int64_t{1} << 60;
  o.shm_dir = dir_;
  o.shm_min_free_bytes = 0;
  o.program = "echo 'fan 3 failed'; exit 1";
  const HealthReport r = RunHealthChecks(o, nullptr, clock_);
  EXPECT_EQ(r.state, HealthReport::State::kFailing);
  ASSERT_EQ(r.checks.size(), 4u);
  EXPECT_EQ(r.reason.find("disk:work-dir: "), 0u) << r.reason;
  EXPECT_NE(r.reason.find("; disk:job-root: "), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("; program: fan 3 failed (exited with code 1)"), std::string::npos)
      << r.reason;
  EXPECT_GT(r.checked_unix_ms, 0);
  o.program = "true";
  o.min_free_bytes = 0;
  EXPECT_EQ(RunHealthChecks(o, nullptr, clock_).state, HealthReport::State::kOk);
}

// The GPU kernel check (convoy-trainer --check-devices on a worker with GPUs) is a check of
// its own, "gpu:kernel", whose output names the device that failed.
TEST_F(HealthTest, TheGpuKernelCheckNamesTheDeviceThatFailed) {
  HealthOptions o;
  o.shm_dir.clear();
  o.device_program =
      "echo 'gpu 0: ok (0.3 ms)'; echo 'gpu 1: not visible to CUDA (it sees 1)'; "
      "exit 1";
  HealthReport r = RunHealthChecks(o, nullptr, clock_);
  EXPECT_EQ(r.state, HealthReport::State::kFailing);
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.checks[0].name, "gpu:kernel");
  EXPECT_NE(r.reason.find("gpu:kernel: gpu 0: ok (0.3 ms)"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("gpu 1: not visible to CUDA"), std::string::npos) << r.reason;
  o.device_program = "echo 'gpu 0: ok (0.3 ms)'";
  r = RunHealthChecks(o, nullptr, clock_);
  EXPECT_EQ(r.state, HealthReport::State::kOk);
  EXPECT_EQ(r.checks[0].detail, "gpu 0: ok (0.3 ms)");
}

// The monitor's first verdict, a change when the operator's condition clears, and a change
// back: each reported once through on_change.
TEST_F(HealthTest, TheMonitorReportsEachChangeOnce) {
  const std::string flag = dir_ + "/sick";
  std::ofstream(flag) << "x";
  HealthOptions o;
  o.shm_dir = "";
  o.program = "if [ -e " + flag + " ]; then echo 'marked sick'; exit 1; fi";
  o.interval_ms = 3600 * 1000;  // only CheckNow runs it again
  std::atomic<int> changes{0};
  HealthMonitor m(o, nullptr, clock_, [&](const HealthReport&) { changes.fetch_add(1); });
  ASSERT_TRUE(Eventually([&] { return m.Latest().state != HealthReport::State::kChecking; }));
  EXPECT_EQ(m.Latest().state, HealthReport::State::kFailing);
  EXPECT_EQ(m.Latest().reason, "program: marked sick (exited with code 1)");
  EXPECT_TRUE(Eventually([&] { return changes.load() == 1; })) << changes.load();
  m.CheckNow();  // the same verdict: no change reported
  fs::remove(flag);
  m.CheckNow();
  ASSERT_TRUE(Eventually([&] { return m.Latest().state == HealthReport::State::kOk; }));
  EXPECT_EQ(m.Latest().reason, "");
  EXPECT_TRUE(Eventually([&] { return changes.load() == 2; })) << changes.load();
}

TEST_F(HealthTest, StoppingDoesNotWaitForARunningProgram) {
  HealthOptions o;
  o.shm_dir = "";
  o.program_timeout_ms = 600 * 1000;
  const std::string pidfile = dir_ + "/pid";
  o.program = "echo $$ > " + pidfile + "; sleep 600";
  pid_t pid = 0;
  {
    HealthMonitor m(o, nullptr, clock_, nullptr);
    ASSERT_TRUE(Eventually([&] {
      std::ifstream(pidfile) >> pid;
      return pid > 0;
    }));
  }  // would block for ten minutes if it waited
  EXPECT_TRUE(Eventually([&] { return Gone(pid); })) << "the program outlived its monitor";
}

}  // namespace worker_health_test
}  // namespace convoy
