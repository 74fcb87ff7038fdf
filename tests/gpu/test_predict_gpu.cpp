// GPU prediction by a window plan (predict/predict.h): it equals the CPU's (same windows, the model-parity
// tolerance) for the evaluation plan and for a plan of one window per date; the trainer's prediction (the
// panel already on the device, lane 0's model, no rebuild, one wait) equals a lone prediction with the same
// weights bitwise, for its live weights and given ones, fp32 and bf16; and a trainer that samples a range of
// the whole panel trains to the bits of one given that range alone.
#include <gtest/gtest.h>

#include <cmath>

#include "compute_util.h"
#include "data/synthetic.h"
#include "gpu_util.h"
#include "predict/predict.h"
#include "predict/predict_gpu.h"
#include "predict/predict_session.h"
#include "test_util.h"
#include "tolerances.h"
#include "train/population_trainer.h"

namespace mlalpha::test {
namespace {

ModelConfig model() {
  ModelConfig mc;
  mc.F = 3; mc.D = 32; mc.NL = 2; mc.P = 16; mc.N = 16; mc.Q = 16;
  return mc;
}

// NaN exactly where the plan keeps no row: (N, T, K) flags and the count of kept values.
std::vector<bool> nan_outside(const Panel& p, const WindowPlan& plan, size_t& kept) {
  std::vector<bool> nan(size_t(p.N) * p.T * p.K, true);
  kept = 0;
  for (const PlanWindow& w : plan.windows)
    for (int t = w.keep_from; t < w.keep_to; ++t)
      for (int k = 0; k < p.K; ++k) nan[(size_t(w.instrument) * p.T + t) * p.K + k] = false, ++kept;
  return nan;
}

TEST(PredictGpu, MatchesCpu) {
  const ModelLayout lay(model());
  const auto params = init_params(lay, 8);
  const Panel p = make_synthetic({5, 120, 3, 1, 0.1f, 4});
  const WindowPlan plan = tiled_windows(p.N, p.T, 32, 8, 10, 120);
  const auto cpu = predict_cpu(lay, params, p, plan, 3, test::on_cpu_reference());  // the oracle
  Context ctx;
  const auto gpu = predict_gpu(ctx, lay, params, p, plan, 3, Precision::FP32);
  ASSERT_EQ(cpu.size(), gpu.size());
  size_t kept = 0;
  const std::vector<bool> nan_expected = nan_outside(p, plan, kept);
  ASSERT_EQ(kept, size_t(p.N) * (120 - 10) * p.K);
  EXPECT_TRUE(rel_l2_close_where_finite(gpu, cpu, nan_expected, kept, tol::kModelParityRelL2, "predictions"));
  // bf16 (its own bf16 copy of the weights, made once): the same NaN pattern, values within the bf16 bound.
  const auto gpu16 = predict_gpu(ctx, lay, params, p, plan, 3, Precision::BF16);
  ASSERT_EQ(cpu.size(), gpu16.size());
  EXPECT_TRUE(rel_l2_close_where_finite(gpu16, cpu, nan_expected, kept, tol::kModelParityBf16RelL2, "bf16 predictions"));
  EXPECT_FALSE(same_bits(gpu16, gpu)) << "bf16 predictions equal fp32's bitwise: the bf16 path did not run";
}

// One window per date, keeping its last row: the scatter of single rows, tiles of 7 with a short last one.
TEST(PredictGpu, APlanOfOneWindowPerDateMatchesCpu) {
  const ModelLayout lay(model());
  const auto params = init_params(lay, 3);
  const Panel p = make_synthetic({4, 90, 3, 1, 0.1f, 6});
  const int C = 24;
  WindowPlan plan;
  plan.N = p.N, plan.T = p.T, plan.L = C, plan.t0 = 40, plan.t1 = 90;
  for (int i = 0; i < p.N; ++i)
    for (int t = plan.t0; t < plan.t1; ++t) plan.windows.push_back({i, t - C + 1, t, t + 1});
  const auto cpu = predict_cpu(lay, params, p, plan, 7, test::on_cpu_reference());
  Context ctx;
  const auto gpu = predict_gpu(ctx, lay, params, p, plan, 7, Precision::FP32);
  size_t kept = 0;
  const std::vector<bool> nan_expected = nan_outside(p, plan, kept);
  EXPECT_TRUE(rel_l2_close_where_finite(gpu, cpu, nan_expected, kept, tol::kModelParityRelL2, "per-date predictions"));
}

// An ensemble's session (predict_session.h): one device model and one upload of the panel serve every weight set,
// and each set's predictions are bitwise those of a lone prediction with those weights (window and carry, fp32 and
// bf16).
TEST(PredictGpu, ASessionSharesOneModelAndOneUploadAndKeepsEachSetsBits) {
  const ModelLayout lay(model());
  const Panel p = make_synthetic({5, 120, 3, 1, 0.1f, 4});
  TrainConfig tc;
  tc.L = 32, tc.B = 4;
  const TimeRange range{40, 120};
  for (const Precision precision : {Precision::FP32, Precision::BF16}) {
    const Compute compute = test::on_gpu(precision);
    for (const PredictMode mode : {PredictMode::window, PredictMode::carry}) {
      PredictStats stats;
      PredictSession session(compute, lay.cfg, tc, &stats);
      session.load(p, range, mode);
      for (const uint64_t seed : {3, 5, 9}) {
        const auto params = init_params(lay, seed);
        const std::vector<float> got = session.predict(params);
        const WindowPlan plan = date_windows(p.N, p.T, tc.L, range.t0, range.t1);
        const std::vector<float> alone =
            mode == PredictMode::window
                ? predict_with(compute, lay, params, p, plan, prediction_tile(tc, p.N, plan.L))
                : predict_carry(compute, lay, params, p, range.t0, range.t1, tc);
        EXPECT_TRUE(same_bits(got, alone)) << to_string(precision) << " " << to_string(mode) << " seed " << seed;
      }
      EXPECT_EQ(stats.models_built, 1) << to_string(precision) << " " << to_string(mode);
      EXPECT_EQ(stats.panels_loaded, 1) << to_string(precision) << " " << to_string(mode);
    }
  }
}

// The trainer predicts from the panel on the device with its own model: bitwise a lone prediction's numbers.
TEST(PredictGpu, TheTrainersPredictionEqualsALonePredictionBitwise) {
  const ModelConfig mc = model();
  const Panel p = make_synthetic({6, 200, 3, 1, 0.1f, 2});
  for (const Precision precision : {Precision::FP32, Precision::BF16}) {
    TrainConfig tc;
    tc.B = 4, tc.L = 32, tc.steps = 30, tc.warmup = 2, tc.burn_in = 4, tc.log_every = 10, tc.precision = precision;
    std::vector<PopulationMember> members{{tc, &p, {0, 140}}, {tc, &p, {0, 140}}};
    members[1].train.seed = 11;
    Context ctx;
    PopulationTrainer tr(ctx, mc, members);
    for (int s = 0; s < 12; ++s) tr.step();
    const WindowPlan valid = tiled_windows(p.N, p.T, tc.L, tc.burn_in, 140, 170), test = tiled_windows(p.N, p.T, tc.L, tc.burn_in, 170, 200);
    for (int m = 0; m < 2; ++m) {
      const std::vector<float> live = tr.params(m);
      const auto a = tr.predict(m, valid, nullptr);
      const auto b = predict_gpu(ctx, tr.layout(), live, p, valid, tc.B, precision);
      EXPECT_TRUE(same_bits(a, b)) << "member " << m << ": live weights";
      const std::vector<float> other = tr.params(1 - m);  // given weights (a best checkpoint)
      const auto c = tr.predict(m, test, &other);
      const auto d = predict_gpu(ctx, tr.layout(), other, p, test, tc.B, precision);
      EXPECT_TRUE(same_bits(c, d)) << "member " << m << ": given weights";
    }
    // Predicting between steps leaves the training as it was: the next steps equal an undisturbed trainer's.
    PopulationTrainer quiet(ctx, mc, members);
    for (int s = 0; s < 12; ++s) quiet.step();
    for (int s = 0; s < 6; ++s) tr.step(), quiet.step();
    for (int m = 0; m < 2; ++m) EXPECT_TRUE(same_bits(tr.params(m), quiet.params(m))) << "member " << m;
  }
}

// The sampler reads the training range of the whole panel in place: the same windows, so the same weights, as
// a trainer given a copy of that range alone.
TEST(PredictGpu, TrainingOnARangeOfThePanelEqualsTrainingOnItsSlice) {
  const ModelConfig mc = model();
  const Panel p = make_synthetic({5, 180, 3, 1, 0.1f, 8});
  const Panel slice = slice_panel(p, 30, 130);
  for (const BatchMode mode : {BatchMode::Windows, BatchMode::Time}) {
    TrainConfig tc;
    tc.B = 4, tc.L = 24, tc.steps = 20, tc.warmup = 2, tc.log_every = 5, tc.batch_mode = mode, tc.dates = 2;
    Context ctx;
    PopulationTrainer whole(ctx, mc, {{tc, &p, {30, 130}}});
    PopulationTrainer alone(ctx, mc, {{tc, &slice}});
    for (int s = 0; s < 20; ++s) whole.step(), alone.step();
    EXPECT_TRUE(same_bits(whole.params(0), alone.params(0))) << to_string(mode);
    for (int64_t s = 11; s <= 20; ++s) EXPECT_EQ(whole.record(0, s).loss, alone.record(0, s).loss) << "step " << s;
  }
}

}  // namespace
}  // namespace mlalpha::test
