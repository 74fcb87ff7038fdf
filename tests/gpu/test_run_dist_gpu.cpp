// A data-parallel run through the whole run layer (RunOptions::data_parallel, what `ml-alpha train --gpus 1`
// does) with a world of one: the NCCL communicator is made once for the run, the step all-reduces inside the
// captured graph, and the run's last and best checkpoints and its best step equal the plain run's bitwise
// (docs/decisions.md "Several GPUs") — one model, a population with a swept rate (every member's
// gradients all-reduced member by member), and a data-parallel resume. Skips without a GPU or without
// libnccl.so.2.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "dist/nccl.h"
#include "mlalpha/run.h"
#include "population_fixture.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

using RunDistGpu = test::GpuRunFixture;

using test::checkpoint_params;

TEST_F(RunDistGpu, AWorldOfOneEqualsThePlainRunBitwise) {
  try {
    dist::NcclLib lib;
  } catch (const Error& e) {
    GTEST_SKIP() << "no usable NCCL: " << e.what();
  }
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const std::string p = std::string("train.precision=\"") + precision + "\"";
    const RunResult plain = run_training(config(std::string("plain-") + precision, {p}));
    RunOptions o;
    o.data_parallel = true;
    const RunResult dp = run_training(config(std::string("dp-") + precision, {p}), o);
    ASSERT_EQ(plain.folds.size(), 1u);
    ASSERT_EQ(dp.folds.size(), 1u);
    EXPECT_EQ(plain.folds[0].best_step, dp.folds[0].best_step);
    EXPECT_EQ(plain.folds[0].steps, 60);
    EXPECT_EQ(dp.folds[0].steps, 60);
    const fs::path a = dir_ / (std::string("plain-") + precision), b = dir_ / (std::string("dp-") + precision);
    EXPECT_EQ(checkpoint_params(a / "last.safetensors"), checkpoint_params(b / "last.safetensors"));
    EXPECT_EQ(checkpoint_params(a / "best.safetensors"), checkpoint_params(b / "best.safetensors"));
    ASSERT_EQ(plain.folds[0].history.size(), dp.folds[0].history.size());
    for (size_t i = 0; i < plain.folds[0].history.size(); ++i)
      EXPECT_EQ(plain.folds[0].history[i].loss, dp.folds[0].history[i].loss) << "step " << plain.folds[0].history[i].step;
  }
}

bool have_nccl() {
  try {
    dist::NcclLib lib;
    return true;
  } catch (const Error&) {
    return false;
  }
}

TEST_F(RunDistGpu, AWorldOfOnePopulationEqualsThePlainPopulationBitwise) {
  if (!have_nccl()) GTEST_SKIP() << "no usable NCCL";
  const std::vector<std::string> pop = {"train.models=2", "sweep.lr=[1e-3, 3e-3]", "run.patience=2"};
  const RunResult plain = run_training(config("plain-pop", pop));
  RunOptions o;
  o.data_parallel = true;
  const RunResult dp = run_training(config("dp-pop", pop), o);
  ASSERT_EQ(plain.members.size(), 4u);
  ASSERT_EQ(dp.members.size(), 4u);
  for (size_t m = 0; m < plain.members.size(); ++m) {
    const MemberResult &a = plain.members[m], &b = dp.members[m];
    EXPECT_EQ(a.steps, b.steps) << a.name;
    EXPECT_EQ(a.best_step, b.best_step) << a.name;
    EXPECT_EQ(checkpoint_params(fs::path(a.dir) / "last.safetensors"), checkpoint_params(fs::path(b.dir) / "last.safetensors"))
        << a.name;
  }
  EXPECT_EQ(plain.ensemble.mean.ic, dp.ensemble.mean.ic);
}

TEST_F(RunDistGpu, AWorldOfOneResumesAsThePlainRun) {
  if (!have_nccl()) GTEST_SKIP() << "no usable NCCL";
  const RunResult plain = run_training(config("plain-r"));
  RunOptions o;
  o.data_parallel = true;
  run_training(config("dp-r", {"run.stop_after=25"}), o);
  o.resume = (dir_ / "dp-r").string();
  const RunResult dp = run_training(config("dp-r"), o);
  ASSERT_EQ(dp.folds.size(), 1u);
  EXPECT_EQ(dp.folds[0].steps, 60);
  EXPECT_EQ(checkpoint_params(dir_ / "plain-r/last.safetensors"), checkpoint_params(dir_ / "dp-r/last.safetensors"));
  EXPECT_EQ(checkpoint_params(dir_ / "plain-r/best.safetensors"), checkpoint_params(dir_ / "dp-r/best.safetensors"));
}

}  // namespace
}  // namespace mlalpha
