// The CPU training step end to end: a tiny synthetic task is overfit (loss falls ≥ 100×), runs are
// reproducible from the seed, and a non-finite batch is skipped without touching the weights.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "data/synthetic.h"
#include "train/trainer_cpu.h"

namespace mlalpha {
namespace {

struct TrainSetup {
  ModelConfig mc;
  TrainConfig tc;
  Panel data;
};

// 4 noiseless series of exactly one window each: the model must memorise them.
TrainSetup overfit_setup() {
  TrainSetup s;
  s.data = make_synthetic({4, 32, 4, 1, 0.0f, 11});
  s.mc.F = 4;
  s.mc.K = 1;
  s.mc.D = 32;
  s.mc.NL = 2;
  s.mc.P = 16;
  s.mc.N = 16;
  s.mc.Q = 16;
  s.tc.B = 4;
  s.tc.L = 32;
  s.tc.steps = 400;
  s.tc.lr = 1e-2f;
  s.tc.warmup = 10;
  s.tc.min_lr_ratio = 0.05f;
  s.tc.weight_decay = 0.0f;
  s.tc.seed = 3;
  return s;
}

TEST(TrainCpu, OverfitsTinyTaskHundredfold) {
  TrainSetup s = overfit_setup();
  CpuTrainer tr(s.mc, s.tc, s.data);
  double first = 0, last = 0;
  for (int64_t i = 0; i < s.tc.steps; ++i) {
    const StepRecord st = tr.step();
    ASSERT_TRUE(std::isfinite(st.loss)) << "step " << st.step;
    if (i < 5) first += st.loss / 5;
    if (i >= s.tc.steps - 5) last += st.loss / 5;
  }
  std::printf("overfit: mean loss of the first 5 steps %.5f, of the last 5 %.3g (ratio %.0f)\n", first, last,
              first / last);
  EXPECT_GT(first / last, 100.0);
}

TEST(TrainCpu, SameSeedSameWeightsOtherSeedOther) {
  TrainSetup s = overfit_setup();
  s.tc.steps = 5;
  s.tc.warmup = 2;
  CpuTrainer a(s.mc, s.tc, s.data), b(s.mc, s.tc, s.data);
  for (int i = 0; i < 5; ++i) a.step(), b.step();
  EXPECT_EQ(a.params(), b.params());
  s.tc.seed = 4;
  CpuTrainer c(s.mc, s.tc, s.data);
  for (int i = 0; i < 5; ++i) c.step();
  EXPECT_NE(a.params(), c.params());
}

TEST(TrainCpu, NonFiniteBatchIsSkipped) {
  TrainSetup s = overfit_setup();
  s.data.x[5] = std::numeric_limits<float>::infinity();  // every window of instrument 0 is poisoned
  s.data.x[s.data.T * s.data.F * 1 + 5] = std::numeric_limits<float>::infinity();
  s.data.x[s.data.T * s.data.F * 2 + 5] = std::numeric_limits<float>::infinity();
  s.data.x[s.data.T * s.data.F * 3 + 5] = std::numeric_limits<float>::infinity();
  CpuTrainer tr(s.mc, s.tc, s.data);
  const auto before = tr.params();
  const StepRecord st = tr.step();
  EXPECT_EQ(st.skipped, 1);
  EXPECT_EQ(st.clip_scale, 0.0f);
  EXPECT_EQ(tr.params(), before);
  EXPECT_EQ(tr.skipped_total(), 1);
}

TEST(TrainCpu, RejectsMismatchedData) {
  TrainSetup s = overfit_setup();
  s.mc.F = 5;
  EXPECT_THROW(CpuTrainer(s.mc, s.tc, s.data), Error);
  s = overfit_setup();
  s.tc.L = 33;  // longer than the series
  EXPECT_THROW(CpuTrainer(s.mc, s.tc, s.data), Error);
}

}  // namespace
}  // namespace mlalpha
