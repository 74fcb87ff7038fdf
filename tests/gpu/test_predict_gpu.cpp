// GPU prediction equals CPU prediction (same windows, fp32 both; model-parity tolerance).
#include <gtest/gtest.h>

#include <cmath>

#include "data/synthetic.h"
#include "gpu_util.h"
#include "test_util.h"
#include "tolerances.h"
#include "train/predict.h"

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
  const auto gpu = predict_gpu(ctx, lay, dp.data(), p, s, false);
  ASSERT_EQ(cpu.size(), gpu.size());
  std::vector<float> a, b;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(std::isnan(cpu[i]), std::isnan(gpu[i])) << "prediction present in one backend only at " << i;
    if (!std::isnan(cpu[i])) a.push_back(gpu[i]), b.push_back(cpu[i]);
  }
  EXPECT_TRUE(rel_l2_close(a, b, tol::kModelParityRelL2, "predictions"));
}

}  // namespace
}  // namespace mlalpha::test
