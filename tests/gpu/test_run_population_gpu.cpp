// Populations through the whole run on the GPU (run_training → the GPU population backend): a sweep of
// learning rates × seeds, and walk-forward folds trained together with an early stop, each member's last
// and best checkpoints bitwise those of the same model's solo GPU run, and the ensemble scored.
#include <gtest/gtest.h>

#include <filesystem>

#include "mlalpha/run.h"
#include "population_fixture.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

using RunPopulationGpu = test::GpuRunFixture;

using test::checkpoint_params;

TEST_F(RunPopulationGpu, SweptMembersEqualTheirSoloRuns) {
  const RunResult r = run_training(config("pop", {"train.models=2", "sweep.lr=[1e-3, 4e-3]", "sweep.weight_decay=[0.0, 0.1]"}));
  ASSERT_EQ(r.members.size(), 8u);
  EXPECT_TRUE(r.has_ensemble);
  EXPECT_GT(r.ensemble.mean.ic, 0.1);
  int m = 0;
  for (const char* lr : {"1e-3", "4e-3"})
    for (const char* wd : {"0.0", "0.1"})
      for (int seed : {1, 2}) {
        const std::string solo = "solo" + std::to_string(m);
        const RunResult s = run_training(config(solo, {std::string("train.lr=") + lr, std::string("train.weight_decay=") + wd,
                                                       "train.seed=" + std::to_string(seed)}));
        const fs::path member = dir_ / "pop" / r.members[size_t(m)].name;
        EXPECT_EQ(checkpoint_params(dir_ / solo / "last.safetensors"), checkpoint_params(member / "last.safetensors")) << member;
        EXPECT_EQ(checkpoint_params(dir_ / solo / "best.safetensors"), checkpoint_params(member / "best.safetensors")) << member;
        EXPECT_EQ(s.folds[0].best_step, r.members[size_t(m)].best_step) << member;
        ++m;
      }
}

// Three walk-forward folds as members of one population, with patience: each fold's member ends where the
// solo walk-forward run's fold ends, early stop included.
TEST_F(RunPopulationGpu, ParallelFoldsWithPatienceEqualTheSoloWalkForward) {
  const std::vector<std::string> wf = {"split.walk_forward_folds=3", "run.patience=2", "run.metric=\"mse\"", "train.lr=3e-2"};
  std::vector<std::string> pop = wf;
  pop.push_back("run.parallel_folds=true");
  const RunResult r = run_training(config("pop", pop));
  const RunResult s = run_training(config("solo", wf));
  ASSERT_EQ(r.members.size(), 3u);
  ASSERT_EQ(s.folds.size(), 3u);
  for (int f = 0; f < 3; ++f) {
    const fs::path fold = "fold-" + std::to_string(f);
    EXPECT_EQ(checkpoint_params(dir_ / "solo" / fold / "last.safetensors"), checkpoint_params(dir_ / "pop" / fold / "member-00" / "last.safetensors"))
        << fold;
    EXPECT_EQ(s.folds[size_t(f)].steps, r.members[size_t(f)].steps) << fold;
    EXPECT_EQ(s.folds[size_t(f)].early_stopped, r.members[size_t(f)].early_stopped) << fold;
  }
}

// A population stopped by run.stop_after and resumed from its folder (every member from its last checkpoint,
// the frozen ones staying frozen) ends where the uninterrupted population ends, checkpoint for checkpoint.
TEST_F(RunPopulationGpu, StoppedAndResumedEqualsUninterrupted) {
  const std::vector<std::string> base = {"train.models=3", "sweep.lr=[1e-3, 2e-2]", "run.patience=2",
                                         "run.metric=\"mse\""};
  const RunResult whole = run_training(config("whole", base));
  std::vector<std::string> cut = base;
  cut.push_back("run.stop_after=25");
  run_training(config("cut", cut));
  RunOptions o;
  o.resume = (dir_ / "cut").string();
  const RunResult resumed = run_training(config("cut", base), o);
  ASSERT_EQ(whole.members.size(), 6u);
  for (const MemberResult& m : whole.members) {
    EXPECT_EQ(checkpoint_params(dir_ / "whole" / m.name / "last.safetensors"), checkpoint_params(dir_ / "cut" / m.name / "last.safetensors"))
        << m.name;
    EXPECT_EQ(checkpoint_params(dir_ / "whole" / m.name / "best.safetensors"), checkpoint_params(dir_ / "cut" / m.name / "best.safetensors"))
        << m.name;
  }
  EXPECT_EQ(whole.ensemble.mean.ic, resumed.ensemble.mean.ic);
}

}  // namespace
}  // namespace mlalpha
