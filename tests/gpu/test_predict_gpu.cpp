// GPU prediction equals CPU prediction (same windows, fp32 both; model-parity tolerance).
#include <gtest/gtest.h>

#include <cmath>

#include "data/synthetic.h"
#include "gpu_util.h"
#include "test_util.h"
#include "tolerances.h"
#include "predict/predict.h"

namespace mlalpha::test {
namespace {

TEST(PredictGpu, MatchesCpu) {
  ModelConfig mc;
  mc.F = 3; mc.D = 32; mc.NL = 2; mc.P = 16; mc.N = 16; mc.Q = 16;
  const ModelLayout lay(mc);
  const auto params = init_params(lay, 8);
  const Panel p = make_synthetic({5, 120, 3, 1, 0.1f, 4});
  const PredictSpec s{32, 8, 3, 10, 120};
  const auto cpu = predict_cpu(lay, params, p, s);
  Context ctx;
  const auto dp = to_device(params);
  const auto gpu = predict_gpu(ctx, lay, dp.data(), p, s, Precision::FP32);
  ASSERT_EQ(cpu.size(), gpu.size());
  // NaN exactly outside [t0, t1) (predict.h): every (instrument, time) in range gets one prediction.
  std::vector<bool> nan_expected(cpu.size());
  size_t in_range = 0;
  for (int n = 0; n < p.N; ++n)
    for (int t = 0; t < p.T; ++t)
      for (int k = 0; k < p.K; ++k) {
        const bool out = t < s.t0 || t >= s.t1;
        nan_expected[(size_t(n) * p.T + t) * p.K + k] = out;
        in_range += !out;
      }
  ASSERT_EQ(in_range, size_t(p.N) * (s.t1 - s.t0) * p.K);
  EXPECT_TRUE(rel_l2_close_where_finite(gpu, cpu, nan_expected, in_range, tol::kModelParityRelL2, "predictions"));
  // bf16 (its own bf16 copy of the weights, made once): the same NaN pattern, values within the bf16 bound.
  const auto gpu16 = predict_gpu(ctx, lay, dp.data(), p, s, Precision::BF16);
  ASSERT_EQ(cpu.size(), gpu16.size());
  EXPECT_TRUE(rel_l2_close_where_finite(gpu16, cpu, nan_expected, in_range, tol::kModelParityBf16RelL2,
                                        "bf16 predictions"));
  EXPECT_FALSE(same_bits(gpu16, gpu)) << "bf16 predictions equal fp32's bitwise: the bf16 path did not run";
}

}  // namespace
}  // namespace mlalpha::test
