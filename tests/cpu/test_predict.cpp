// Window planning and CPU prediction: every time step of the range is predicted exactly once, from a
// window of the training length with at least burn_in steps of context where history allows.
#include <gtest/gtest.h>

#include <cmath>

#include "data/synthetic.h"
#include "model/model_ref.h"
#include "predict/predict.h"

namespace mlalpha {
namespace {

TEST(Predict, WindowsCoverTheRangeOnce) {
  const Panel p = make_synthetic({3, 50, 2, 1, 0.1f, 1});
  for (auto [L, burn, t0, t1] : {std::tuple{10, 3, 0, 50}, {10, 0, 7, 31}, {50, 5, 0, 50}, {7, 6, 40, 50}, {1, 0, 0, 5}}) {
    const PredictSpec s{L, burn, 4, t0, t1};
    std::vector<int> hits(size_t(p.N) * p.T, 0);
    for (const PredictWindow& w : plan_windows(p, s)) {
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
  const auto pred = predict_cpu(lay, params, p, {24, 0, 3, 4, 24});
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

TEST(Predict, RejectsBadRanges) {
  ModelConfig mc;
  mc.F = 2;
  const ModelLayout lay(mc);
  const auto params = init_params(lay, 5);
  const Panel p = make_synthetic({2, 24, 2, 1, 0.1f, 3});
  EXPECT_THROW(predict_cpu(lay, params, p, {30, 0, 4, 0, 24}), Error);  // L > T
  EXPECT_THROW(predict_cpu(lay, params, p, {8, 8, 4, 0, 24}), Error);   // burn_in >= L
  EXPECT_THROW(predict_cpu(lay, params, p, {8, 0, 4, 10, 30}), Error);  // past the end
  const Panel wrong = make_synthetic({2, 24, 3, 1, 0.1f, 3});
  EXPECT_THROW(predict_cpu(lay, params, wrong, {8, 0, 4, 0, 24}), Error);  // F differs
}

}  // namespace
}  // namespace mlalpha
