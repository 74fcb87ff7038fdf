// A data-parallel run through the whole run layer (RunOptions::data_parallel, what `ml-alpha train --gpus 1`
// does) with a world of one: the NCCL communicator is made once for the run, the step all-reduces inside the
// captured graph, and the run's last and best checkpoints and its best step equal the plain run's bitwise
// (docs/decisions.md "Several GPUs"). Skips without a GPU or without libnccl.so.2.
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

}  // namespace
}  // namespace mlalpha
