// The CPU training step end to end: a tiny synthetic task is overfit (loss falls ≥ 100×), runs are
// reproducible from the seed, and a non-finite batch is skipped without touching the weights.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/error.h"
#include "data/synthetic.h"
#include "model/layout.h"
#include "train/schedule.h"
#include "train/train_plan.h"
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

// Cross-sectional training: batch = "time", loss = "ic" on the synthetic panel, whose targets depend on each
// instrument's own features, so the ranking across instruments is learnable: the loss (minus the mean IC)
// of the first step is far from −1 and the last steps' is close to it. Also: a cap below N, and reproducibility.
TrainSetup ic_setup(int instruments) {
  TrainSetup s;
  s.data = make_synthetic({12, 300, 4, 1, 0.1f, 5});
  s.mc.F = 4, s.mc.K = 1, s.mc.D = 32, s.mc.NL = 1, s.mc.P = 16, s.mc.N = 16, s.mc.Q = 16;
  s.tc.batch_mode = BatchMode::Time, s.tc.dates = 4, s.tc.instruments = instruments, s.tc.loss = LossKind::IC;
  s.tc.L = 32, s.tc.burn_in = 8, s.tc.steps = 80, s.tc.lr = 3e-3f, s.tc.warmup = 5, s.tc.seed = 4;
  return s;
}

TEST(TrainCpu, IcLossOnTimeBatchesLearnsTheCrossSection) {
  for (int cap : {0, 7}) {
    TrainSetup s = ic_setup(cap);
    CpuTrainer tr(s.mc, s.tc, s.data);
    double first = 0, last = 0;
    for (int64_t i = 0; i < s.tc.steps; ++i) {
      const StepRecord st = tr.step();
      ASSERT_TRUE(std::isfinite(st.loss)) << "step " << st.step;
      ASSERT_GE(st.loss, -1.0f - 1e-5f);  // a mean of correlations
      ASSERT_LE(st.loss, 1.0f + 1e-5f);
      if (i == 0) first = st.loss;
      if (i >= s.tc.steps - 10) last += st.loss / 10;
    }
    std::printf("ic (cap %d): loss of the first step %.4f, mean of the last 10 %.4f\n", cap, first, last);
    EXPECT_GT(first, -0.5) << "an untrained model should not rank well already";
    EXPECT_LT(last, -0.8) << "cap " << cap;
    EXPECT_LT(last, first - 0.4) << "cap " << cap;
  }
  TrainSetup s = ic_setup(7);
  s.tc.steps = 6;
  CpuTrainer a(s.mc, s.tc, s.data), b(s.mc, s.tc, s.data);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.step().loss, b.step().loss);
  EXPECT_EQ(a.params(), b.params());
}

TEST(TrainCpu, IcLossNeedsTimeBatches) {
  TrainSetup s = ic_setup(0);
  s.tc.batch_mode = BatchMode::Windows;
  try {
    CpuTrainer tr(s.mc, s.tc, s.data);
    FAIL() << "loss = ic with windows batches accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs train.batch = \"time\""), std::string::npos) << e.what();
  }
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

// The trainer samples a range of the whole panel in place: the same weights as a trainer given that range alone.
TEST(TrainCpu, ARangeOfThePanelTrainsAsItsSlice) {
  TrainSetup s = overfit_setup();
  const Panel whole = make_synthetic({4, 90, 4, 1, 0.1f, 12});
  const Panel slice = slice_panel(whole, 25, 70);
  s.tc.L = 16;
  CpuTrainer a(s.mc, s.tc, whole, {25, 70}), b(s.mc, s.tc, slice);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(a.step().loss, b.step().loss) << "step " << i + 1;
  EXPECT_EQ(a.params(), b.params());
  EXPECT_THROW(CpuTrainer(s.mc, s.tc, whole, {80, 90}), Error);  // 10 steps for a window of 16
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

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainCpu, RejectsMismatchedDataNamingTheSetting) {
  TrainSetup s = overfit_setup();
  s.tc.L = 33;
  EXPECT_NE(error_of([&] { CpuTrainer(s.mc, s.tc, s.data); }).find("train.seq_len = 33 exceeds the series length T = 32"),
            std::string::npos);
}

// Both trainers take the schedule from schedule_params(): the config's fields, cosine or constant.
TEST(TrainCpu, ScheduleParamsFromTheConfig) {
  TrainConfig tc;
  tc.lr = 2e-3f, tc.min_lr_ratio = 0.25f, tc.warmup = 7, tc.steps = 90, tc.schedule = Schedule::Constant;
  const ScheduleParams p = schedule_params(tc);
  EXPECT_EQ(p.lr, 2e-3f);
  EXPECT_EQ(p.min_lr_ratio, 0.25f);
  EXPECT_EQ(p.warmup, 7);
  EXPECT_EQ(p.total, 90);
  EXPECT_FALSE(p.cosine);
  tc.schedule = Schedule::Cosine;
  EXPECT_TRUE(schedule_params(tc).cosine);
}

// On this machine: a config far beyond any host's memory is refused before allocating, with the figures;
// a small one trains.
TEST(TrainMemory, CpuTrainerRefusesBeforeAllocating) {
  TrainSetup s = overfit_setup();
  s.data = make_synthetic({1, 2048, 4, 1, 0.1f, 3});
  s.mc.D = 1024, s.mc.P = 64, s.mc.N = 128;
  s.tc.B = 4096, s.tc.L = 2048;
  const std::string msg = error_of([&] { CpuTrainer(s.mc, s.tc, s.data); });
  EXPECT_EQ(msg.rfind("the CPU training step needs ", 0), 0u) << msg;
  EXPECT_NE(msg.find("this machine has "), std::string::npos) << msg;
  EXPECT_NE(msg.find("reduce train.batch or train.seq_len"), std::string::npos) << msg;
  EXPECT_NO_THROW(CpuTrainer(overfit_setup().mc, overfit_setup().tc, overfit_setup().data));
}

// Products that overflow a 32-bit dimension are refused naming the settings, not as a negative size.
TEST(TrainMemory, OverflowingSizesNameTheSettings) {
  TrainConfig tc;
  tc.B = 1 << 20, tc.L = 1 << 12;
  EXPECT_NE(error_of([&] { tc.validate(); }).find("train.batch × train.seq_len = 1048576 × 4096"), std::string::npos)
      << error_of([&] { tc.validate(); });
  ModelConfig mc;
  mc.D = 1 << 30, mc.P = 1 << 20;
  const std::string m = error_of([&] { mc.validate(); });
  EXPECT_NE(m.find("d_inner = model.expand × model.d_model = 2 × 1073741824"), std::string::npos) << m;
  EXPECT_EQ(m.find("zero or negative"), std::string::npos) << m;
  mc = ModelConfig{};
  mc.N = 1 << 29, mc.G = 2;
  EXPECT_NE(error_of([&] { mc.validate(); }).find("in_proj width"), std::string::npos) << error_of([&] { mc.validate(); });
}

}  // namespace
}  // namespace mlalpha
