// Prediction plans and CPU prediction: the evaluation plan predicts every time step of the range exactly
// once, from a window of the training length with at least burn_in steps of context where history allows;
// any plan (here one window per date keeping its last row) runs through the same predictor. The plan tests
// run the reference model (run.cpu_kernels = "reference") and compare with its forward bit for bit; the fast
// model's predictions are its own inference's bits and the reference's to the fp32 tolerance.
#include <gtest/gtest.h>

#include <cmath>

#include "compute_util.h"
#include "model/model_cpu.h"
#include "data/synthetic.h"
#include "model/model_ref.h"
#include "predict/predict.h"
#include "test_util.h"
#include "tolerances.h"

namespace mlalpha {
namespace {

TEST(Predict, WindowsCoverTheRangeOnce) {
  const Panel p = make_synthetic({3, 50, 2, 1, 0.1f, 1});
  for (auto [L, burn, t0, t1] : {std::tuple{10, 3, 0, 50}, {10, 0, 7, 31}, {50, 5, 0, 50}, {7, 6, 40, 50}, {1, 0, 0, 5}}) {
    const WindowPlan plan = tiled_windows(p.N, p.T, L, burn, t0, t1);
    EXPECT_NO_THROW(check_plan(plan));
    std::vector<int> hits(size_t(p.N) * p.T, 0);
    for (const PlanWindow& w : plan.windows) {
      ASSERT_GE(w.start, 0);
      ASSERT_LE(w.start + L, p.T);
      ASSERT_LE(w.start, w.keep_from);
      ASSERT_LE(w.keep_to, w.start + L);
      if (w.start > 0) EXPECT_GE(w.keep_from - w.start, burn) << "kept a position inside the burn-in";
      for (int t = w.keep_from; t < w.keep_to; ++t) ++hits[size_t(w.instrument) * p.T + t];
    }
    for (int i = 0; i < p.N; ++i)
      for (int t = 0; t < p.T; ++t)
        EXPECT_EQ(hits[size_t(i) * p.T + t], (t >= t0 && t < t1) ? 1 : 0) << "L=" << L << " i=" << i << " t=" << t;
  }
}

TEST(Predict, WholeSeriesWindowEqualsOneForwardPass) {
  ModelConfig mc;
  mc.F = 2; mc.D = 16; mc.NL = 1; mc.P = 8; mc.N = 4; mc.Q = 8;
  const ModelLayout lay(mc);
  const auto params = init_params(lay, 5);
  const Panel p = make_synthetic({2, 24, 2, 1, 0.1f, 3});
  const auto pred = predict_cpu(lay, params, p, tiled_windows(2, 24, 24, 0, 4, 24), 3, test::on_cpu_reference());
  RefModel<float> m(lay);
  const auto& out = m.forward(params.data(), p.x.data(), 2, 24);  // both instruments, full length
  for (int i = 0; i < 2; ++i)
    for (int t = 0; t < 24; ++t) {
      const float got = pred[size_t(i) * 24 + t];
      if (t < 4) {
        EXPECT_TRUE(std::isnan(got));
      } else {
        EXPECT_EQ(got, out[size_t(i) * 24 + t]) << "i=" << i << " t=" << t;
      }
    }
}

// For each date t in [t0, t1), the window of the C rows ending at t, keeping only its last row.
WindowPlan one_window_per_date(const Panel& p, int C, int t0, int t1) {
  WindowPlan plan;
  plan.N = p.N, plan.T = p.T, plan.L = C, plan.t0 = t0, plan.t1 = t1;
  for (int i = 0; i < p.N; ++i)
    for (int t = t0; t < t1; ++t) plan.windows.push_back({i, t - C + 1, t, t + 1});
  return plan;
}

// A plan of another shape: one window per date (each date's score depends on that instrument's last C rows
// alone). Every kept row equals the last output of a forward over exactly those rows.
TEST(Predict, AnyPlanRunsThroughTheSamePredictor) {
  ModelConfig mc;
  mc.F = 2; mc.D = 16; mc.NL = 1; mc.P = 8; mc.N = 4; mc.Q = 8;
  const ModelLayout lay(mc);
  const auto params = init_params(lay, 9);
  const Panel p = make_synthetic({3, 30, 2, 1, 0.1f, 4});
  const int C = 8, t0 = 12, t1 = 30;
  const WindowPlan plan = one_window_per_date(p, C, t0, t1);
  EXPECT_NO_THROW(check_plan(plan));
  const auto pred = predict_cpu(lay, params, p, plan, 5, test::on_cpu_reference());  // 54 windows in tiles of 5
  RefModel<float> m(lay);
  for (int i = 0; i < p.N; ++i)
    for (int t = 0; t < p.T; ++t) {
      const float got = pred[size_t(i) * p.T + t];
      if (t < t0) {
        EXPECT_TRUE(std::isnan(got)) << "i=" << i << " t=" << t;
        continue;
      }
      const auto& out = m.forward(params.data(), p.x.data() + (size_t(i) * p.T + t - C + 1) * p.F, 1, C);
      EXPECT_EQ(got, out[size_t(C - 1)]) << "i=" << i << " t=" << t;
    }
}

// The fast CPU model (the default): each kept row is the bits of that window's own inference, in a tile of
// other windows or alone, on any thread count; and the reference's value to the fp32 tolerance.
TEST(Predict, FastModelPredictsItsInferenceBits) {
  ModelConfig mc;
  mc.F = 3; mc.D = 16; mc.NL = 2; mc.P = 8; mc.N = 8; mc.Q = 8;
  const ModelLayout lay(mc);
  const auto params = init_params(lay, 12);
  const Panel p = make_synthetic({3, 40, 3, 1, 0.1f, 6});
  const int C = 10, t0 = 15, t1 = 40;
  const WindowPlan plan = one_window_per_date(p, C, t0, t1);
  const auto fast = predict_cpu(lay, params, p, plan, 7, test::on_cpu(2));  // 75 windows in tiles of 7
  const auto fast1 = predict_cpu(lay, params, p, plan, 4, test::on_cpu(1));
  const auto fast_big = predict_cpu(lay, params, p, plan, 40, test::on_cpu(3));  // 400 rows: windows across row blocks
  const auto ref = predict_cpu(lay, params, p, plan, 7, test::on_cpu_reference());
  cpu::CpuModel alone(lay, {.threads = 1});
  std::vector<float> got, want, out(static_cast<size_t>(C));
  for (int i = 0; i < p.N; ++i)
    for (int t = t0; t < t1; ++t) {
      const size_t at = size_t(i) * p.T + t;
      alone.infer(params.data(), p.x.data() + (size_t(i) * p.T + t - C + 1) * p.F, 1, C, out.data());
      ASSERT_EQ(fast[at], out[size_t(C - 1)]) << "i=" << i << " t=" << t << ": the tile changed the window's bits";
      ASSERT_EQ(fast1[at], fast[at]) << "i=" << i << " t=" << t << ": another thread count or tile size";
      ASSERT_EQ(fast_big[at], fast[at]) << "i=" << i << " t=" << t << ": a tile of 40 windows";
      got.push_back(fast[at]);
      want.push_back(ref[at]);
    }
  EXPECT_TRUE(test::rel_l2_close(got, want, tol::kCpuFastRelL2, "fast vs reference predictions"));
  for (int t = 0; t < t0; ++t) EXPECT_TRUE(std::isnan(fast[size_t(t)]));
}

TEST(Predict, RejectsBadPlans) {
  ModelConfig mc;
  mc.F = 2;
  const ModelLayout lay(mc);
  const auto params = init_params(lay, 5);
  const Panel p = make_synthetic({2, 24, 2, 1, 0.1f, 3});
  EXPECT_THROW(tiled_windows(2, 24, 30, 0, 0, 24), Error);  // L > T
  EXPECT_THROW(tiled_windows(2, 24, 8, 8, 0, 24), Error);   // burn_in >= L
  EXPECT_THROW(tiled_windows(2, 24, 8, 0, 10, 30), Error);  // past the end
  const Panel wrong = make_synthetic({2, 24, 3, 1, 0.1f, 3});
  EXPECT_THROW(predict_cpu(lay, params, wrong, tiled_windows(2, 24, 8, 0, 0, 24), 4), Error);  // F differs
  WindowPlan plan = tiled_windows(2, 24, 8, 0, 0, 24);
  plan.windows[0].keep_to = plan.windows[0].start + 9;  // a kept row outside its window
  EXPECT_THROW(predict_cpu(lay, params, p, plan, 4), Error);
  plan = tiled_windows(2, 24, 8, 0, 0, 24);
  plan.windows[1].instrument = 2;  // no such instrument
  EXPECT_THROW(check_plan(plan), Error);
  EXPECT_THROW(predict_cpu(lay, params, p, tiled_windows(2, 24, 8, 0, 0, 24), 0), Error);  // no batch
}

}  // namespace
}  // namespace mlalpha
