// Sweeps in the CLI (client/sweep.h): `submit --sweep` fills the spec's sweep, a sweep is one
// row of `convoy list`, and `convoy status SWEEP` shows each trial, the best and what ASHA
// stopped.
#include <gtest/gtest.h>

#include <sstream>

#include "client/commands.h"
#include "client/format.h"
#include "client/sweep.h"

namespace convoy {
namespace client_sweep_test {

v1::Job Sweep() {
  v1::Job job;
  job.set_id("j-000001");
  job.set_state(v1::RUNNING);
  job.mutable_spec()->set_name("lr");
  v1::SweepSpec* spec = job.mutable_spec()->mutable_sweep();
  spec->set_metric("test_accuracy");
  spec->set_goal("max");
  spec->set_max_parallel(2);
  spec->set_early_stop("asha");
  v1::SweepStatus* s = job.mutable_sweep();
  const char* lrs[] = {"0.1", "0.01", "50", "0.001"};
  for (int i = 0; i < 4; ++i) {
    v1::TrialSummary* t = s->add_trials();
    v1::TrialParameter* p = t->add_parameters();
    p->set_path("trainer.lr");
    p->set_value(lrs[i]);
    if (i < 3) t->set_job_id("j-00000" + std::to_string(i + 2));
  }
  s->mutable_trials(0)->set_state(v1::SUCCEEDED);
  s->mutable_trials(0)->set_best_metric(0.8412);
  s->mutable_trials(0)->set_best_step(600);
  s->mutable_trials(1)->set_state(v1::RUNNING);
  s->mutable_trials(1)->set_best_metric(0.75);
  s->mutable_trials(1)->set_best_step(200);
  s->mutable_trials(2)->set_state(v1::CANCELLED);
  s->mutable_trials(2)->set_best_metric(0.1);
  s->mutable_trials(2)->set_stopped_reason(
      "stopped early (ASHA): test_accuracy 0.1 at step 200 is not in the top 1/3 of 3 trials "
      "at that rung (best 0.84)");
  s->set_best_trial("j-000002");
  s->set_succeeded(1);
  s->set_running(1);
  s->set_stopped(1);
  s->set_waiting(1);
  return job;
}

TEST(ClientSweep, ASweepIsOneRowWithItsProgressAndBest) {
  EXPECT_EQ(ListMessage(Sweep()),
            "sweep 2/4 done, 1 running, 1 stopped early; best j-000002 test_accuracy 0.8412");
  v1::Job trial;
  trial.set_sweep_id("j-000001");
  *trial.add_trial_parameters() = Sweep().sweep().trials(1).parameters(0);
  trial.set_message("running");
  EXPECT_EQ(ListMessage(trial), "trial of j-000001: trainer.lr=0.01; running");
  v1::ListJobsResponse list;
  *list.add_jobs() = Sweep();
  EXPECT_NE(FormatJobTable(list, 0).find("sweep 2/4 done"), std::string::npos);
}

TEST(ClientSweep, StatusShowsEachTrialTheBestAndWhatAshaStopped) {
  const std::string text = FormatSweepStatus(Sweep());
  EXPECT_NE(text.find("4 trials (grid), at most 2 at once; test_accuracy, more is better; "
                      "ASHA from step 100, factor 3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 succeeded, 1 stopped early, 0 failed, 1 running, 1 not made yet"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("trainer.lr=0.1"), std::string::npos) << text;
  EXPECT_NE(text.find("STOPPED (ASHA)"), std::string::npos) << text;
  EXPECT_NE(text.find("waiting"), std::string::npos) << text;
  EXPECT_NE(text.find("best trial: j-000002 (trainer.lr=0.1): test_accuracy 0.8412 at step 600"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  j-000004: stopped early (ASHA): test_accuracy 0.1 at step 200"),
            std::string::npos)
      << text;
  EXPECT_EQ(FormatSweepStatus(v1::Job()), "");
}

TEST(ClientSweep, SubmitSweepFlagsFillTheSpecAndBadOnesAreRefused) {
  SubmitArgs args;
  args.command = {"python3", "train.py"};
  args.sweep.params = {"env.LR=0.1,0.01,0.001"};
  args.sweep.max_parallel = 2;
  args.sweep.metric = "test_accuracy:max";
  std::istringstream in;
  auto spec = BuildSubmitSpec(args, in);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->sweep().parameters_size(), 1);
  EXPECT_EQ(spec->sweep().parameters(0).values_size(), 3);
  EXPECT_EQ(spec->sweep().max_parallel(), 2);
  EXPECT_EQ(spec->sweep().metric(), "test_accuracy");
  EXPECT_EQ(spec->sweep().goal(), "max");

  args.sweep.metric = "test_accuracy:up";
  EXPECT_NE(BuildSubmitSpec(args, in).status().message().find("--sweep-metric"), std::string::npos);
  args.sweep.metric = "";
  args.sweep.params = {"nodes=1,x"};  // a value --set refuses, named before any upload
  const std::string error = BuildSubmitSpec(args, in).status().message();
  EXPECT_NE(error.find("sweep.parameters[0].values[1]: nodes: expected an integer"),
            std::string::npos)
      << error;
}

}  // namespace client_sweep_test
}  // namespace convoy
