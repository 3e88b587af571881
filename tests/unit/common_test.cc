#include <gtest/gtest.h>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "common/proc_stat.h"
#include "spec/trainer_argv.h"
#include "common/util.h"

namespace convoy {
namespace {

TEST(IsLoopbackHostTest, OnlyLoopback) {
  for (const char* yes : {"localhost", "127.0.0.1", "127.1.2.3", "::1"}) {
    EXPECT_TRUE(IsLoopbackHost(yes)) << yes;
  }
  for (const char* no : {"0.0.0.0", "10.0.0.1", "::", "example.com", "128.0.0.1", "", "127"}) {
    EXPECT_FALSE(IsLoopbackHost(no)) << no;
  }
}

TEST(ParseHostPortTest, GoodAndBad) {
  auto ok = ParseHostPort("127.0.0.1:7070", "--listen");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->first, "127.0.0.1");
  EXPECT_EQ(ok->second, 7070);
  auto v6 = ParseHostPort("[::1]:80", "--listen");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->first, "::1");
  for (const char* bad : {"", "host", ":80", "host:", "host:8o", "host:70000", "h:99999999999"}) {
    auto st = ParseHostPort(bad, "--coordinator");
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.status().message().find("--coordinator"), std::string::npos) << bad;
  }
}

TEST(ProcStatTest, SelfIsRunning) {
  ProcStat self;
  ASSERT_TRUE(ReadProcStat(0, &self));
  EXPECT_EQ(self.state, 'R');
  EXPECT_GT(self.start_ticks, 0u);
}

// A stopped child whose command name holds ") " (the kernel does not escape it): fields are
// counted from the last ')', and the state and start time come out right.
TEST(ProcStatTest, StoppedChildWithParenthesesInItsName) {
  ProcStat self;
  ASSERT_TRUE(ReadProcStat(0, &self));
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    prctl(PR_SET_NAME, "a) S 1 (b");
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));

  ProcStat stat;
  ASSERT_TRUE(ReadProcStat(child, &stat));
  EXPECT_EQ(stat.state, 'T');
  EXPECT_GE(stat.start_ticks, self.start_ticks);  // started after this test's process

  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_FALSE(ReadProcStat(child, &stat));  // reaped: no such process
}

TEST(SignalNameTest, KnownAndUnknown) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(200), "signal 200");
}

TEST(IsValidNameTest, Table) {
  for (const char* good : {"w1", "fmnist-cnn", "a.b_c-d", "X"}) EXPECT_TRUE(IsValidName(good));
  for (const char* bad : {"", ".hidden", "-flag", "a/b", "../x", "a b", "ä", "a;rm"}) {
    EXPECT_FALSE(IsValidName(bad)) << bad;
  }
  EXPECT_FALSE(IsValidName(std::string(64, 'a')));
  EXPECT_TRUE(IsValidName(std::string(63, 'a')));
}

TEST(BuildArgvTest, CommandIsPassedLiterally) {
  v1::JobSpec spec;
  spec.add_command("python3");
  spec.add_command("train.py");
  spec.add_command("--name=$(rm -rf /); `x`");
  EXPECT_EQ(BuildArgv(spec, "/bin/convoy-trainer"),
            (std::vector<std::string>{"python3", "train.py", "--name=$(rm -rf /); `x`"}));
}

TEST(BuildArgvTest, TrainerFlagsForSetFieldsOnly) {
  v1::JobSpec spec;
  spec.set_backend("gloo");
  auto* t = spec.mutable_trainer();
  t->set_model("fmnist-cnn");
  t->set_epochs(2);
  t->set_batch_size(32);
  t->set_lr(0.01);
  t->set_max_steps(100);
  t->set_allreduce("gloo");
  t->add_extra_args("--threads");
  t->add_extra_args("1");
  EXPECT_EQ(
      BuildArgv(spec, "/opt/convoy-trainer"),
      (std::vector<std::string>{"/opt/convoy-trainer", "--model", "fmnist-cnn", "--epochs", "2",
                                "--max-steps", "100", "--batch-size", "32", "--lr", "0.01",
                                "--allreduce", "gloo", "--backend", "gloo", "--threads", "1"}));
}

TEST(BuildArgvTest, CompressionFields) {
  v1::JobSpec spec;
  auto* t = spec.mutable_trainer();
  t->set_compression("powersgd");
  t->set_powersgd_rank(4);
  t->set_powersgd_start_step(10);
  EXPECT_EQ(BuildArgv(spec, "/opt/convoy-trainer"),
            (std::vector<std::string>{"/opt/convoy-trainer", "--compression", "powersgd",
                                      "--powersgd-rank", "4", "--powersgd-start-step", "10",
                                      "--backend", "gloo"}));
}

// Momentum 0 (plain SGD) and seed 0 are values, not "the default": they reach the trainer.
TEST(BuildArgvTest, WrittenZerosThatAreValuesArePassed) {
  v1::JobSpec spec;
  auto* t = spec.mutable_trainer();
  t->set_momentum(0);
  t->set_seed(0);
  EXPECT_EQ(BuildArgv(spec, "/opt/convoy-trainer"),
            (std::vector<std::string>{"/opt/convoy-trainer", "--momentum", "0", "--seed", "0",
                                      "--backend", "gloo"}));
  t->clear_momentum();
  t->clear_seed();
  EXPECT_EQ(BuildArgv(spec, "/opt/convoy-trainer"),
            (std::vector<std::string>{"/opt/convoy-trainer", "--backend", "gloo"}));
}

}  // namespace
}  // namespace convoy
