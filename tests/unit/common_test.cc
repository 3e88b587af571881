#include <gtest/gtest.h>

#include <csignal>

#include "common/trainer_argv.h"
#include "common/util.h"

namespace convoy {
namespace {

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

}  // namespace
}  // namespace convoy
