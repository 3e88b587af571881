#include <gtest/gtest.h>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "common/coordinator_list.h"
#include "common/proc_stat.h"
#include "common/util.h"
#include "spec/trainer_argv.h"
#include "spec/trainer_spec_env.h"

namespace convoy {
namespace common_test {

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

// --coordinator A:7070,B:7070 (coordinators on one etcd, one of them leader): every part is
// checked, and plain text is judged by a host that is not loopback if any.
TEST(CoordinatorListTest, EveryPartIsChecked) {
  auto one = CheckCoordinators("127.0.0.1:7070", "--coordinator");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, "127.0.0.1");
  auto mixed = CheckCoordinators("127.0.0.1:7070,10.0.0.2:7070", "--coordinator");
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(*mixed, "10.0.0.2");  // not all on loopback: plain text is refused for it
  for (const char* bad : {"a:1,", ",a:1", "a:1,b", "a:1,,b:2"}) {
    auto st = CheckCoordinators(bad, "--coordinator");
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.status().message().find("--coordinator"), std::string::npos) << bad;
  }
}

// Each coordinator is dialled by its own name (TLS checks it against that name): after a
// failure the next one at once, and the caller's backoff only once every one has failed in a
// row since the last that answered.
TEST(CoordinatorListTest, TriesEachInTurnAndBacksOffOnlyAfterAFullRound) {
  CoordinatorList one("coord.example:7070");
  EXPECT_EQ(one.size(), 1u);
  EXPECT_EQ(one.current(), "coord.example:7070");  // as it is (DNS: all of its addresses)
  EXPECT_TRUE(one.Next());                         // nothing else to try: back off
  EXPECT_EQ(one.current(), "coord.example:7070");

  CoordinatorList three("a:1,b:2,c:3");
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three.current(), "a:1");
  EXPECT_FALSE(three.Next());
  EXPECT_EQ(three.current(), "b:2");
  EXPECT_FALSE(three.Next());
  EXPECT_EQ(three.current(), "c:3");
  three.MarkGood();  // c answered, then went away: a new round from c
  EXPECT_FALSE(three.Next());
  EXPECT_EQ(three.current(), "a:1");
  EXPECT_FALSE(three.Next());
  EXPECT_TRUE(three.Next());  // a, b and c failed in a row
  EXPECT_EQ(three.current(), "c:3");
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

// The trainer's fields travel as its TrainerSpec (CONVOY_TRAINER_SPEC), not as flags: argv
// has the job's backend and the user's extra_args, last so that they can set any flag.
TEST(BuildArgvTest, TrainerGetsTheBackendAndExtraArgsOnly) {
  v1::JobSpec spec;
  spec.set_backend("nccl");
  auto* t = spec.mutable_trainer();
  t->set_model("fmnist-cnn");
  t->set_epochs(2);
  t->add_extra_args("--threads");
  t->add_extra_args("1");
  EXPECT_EQ(
      BuildArgv(spec, "/opt/convoy-trainer"),
      (std::vector<std::string>{"/opt/convoy-trainer", "--backend", "nccl", "--threads", "1"}));
  spec.clear_backend();
  t->clear_extra_args();
  EXPECT_EQ(BuildArgv(spec, "/opt/convoy-trainer"),
            (std::vector<std::string>{"/opt/convoy-trainer", "--backend", "gloo"}));
}

// Every field comes back as it was sent; momentum 0 (plain SGD) and seed 0 are values, not
// "the default", and stay written.
TEST(TrainerSpecEnvTest, RoundTripKeepsEveryFieldAndWrittenZeros) {
  v1::TrainerSpec t;
  t.set_model("resnet");
  t.set_epochs(3);
  t.set_max_steps(int64_t{1} << 40);
  t.set_batch_size(64);
  t.set_lr(0.1);
  t.set_momentum(0);
  t.set_optimizer("adam");
  t.set_lr_schedule("cosine");
  t.set_clip_grad_norm(1e9);
  t.set_accumulate(4);
  t.set_bucket_mb(0.001);
  t.set_checkpoint_every(100);
  t.set_snapshot_every(0);
  t.set_data_dir("/data/fmnist");
  t.set_seed(0);
  t.set_ddp("hooks");
  t.set_allreduce("gloo");
  t.set_amp("off");
  t.set_compression("powersgd");
  t.set_powersgd_rank(4);
  t.set_powersgd_start_step(10);
  t.set_max_bad_steps(5);
  const std::string text = EncodeTrainerSpec(t);
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  auto back = DecodeTrainerSpec(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->SerializeAsString(), t.SerializeAsString()) << text;
  EXPECT_TRUE(back->has_momentum());
  EXPECT_TRUE(back->has_seed());
  EXPECT_TRUE(back->has_snapshot_every());

  v1::TrainerSpec empty;
  auto none = DecodeTrainerSpec(EncodeTrainerSpec(empty));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_momentum());
  EXPECT_FALSE(none->has_seed());
}

// What the trainer is given is checked with the submit-time validator, and every refusal
// names the variable and the field.
TEST(TrainerSpecEnvTest, RefusesWhatTheValidatorRefusesNamingTheField) {
  v1::TrainerSpec t;
  t.set_momentum(0.9999999);
  auto refused = DecodeTrainerSpec(EncodeTrainerSpec(t));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("CONVOY_TRAINER_SPEC: trainer.momentum: ", 0), 0u)
      << refused.status().message();
  for (const char* bad :
       {"", "{", "[1]", R"({"lr": "fast"})", R"({"batch_size": 1, "future": 2})"}) {
    auto r = DecodeTrainerSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("CONVOY_TRAINER_SPEC: not a TrainerSpec", 0), 0u)
        << r.status().message();
  }
}

}  // namespace common_test
}  // namespace convoy
