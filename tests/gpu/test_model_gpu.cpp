// Model-level parity, CPU (double) vs GPU (fp32): the loss and every gradient tensor within
// kModelParityRelL2, on ragged shapes; the same inputs twice give bitwise identical gradients. A forward-only
// model (ModelUse::kForward) holds no backward partials and computes the training model's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "gpu_util.h"
#include "model/model_gpu.h"
#include "ops/cast/cast.h"
#include "model/model_ref.h"
#include "core/error.h"
#include "test_util.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

struct Case {
  const char* name;
  ModelConfig mc;
  int B, L;
  Precision precision;
};

ModelConfig make(int F, int K, int D, int NL, int P, int G, int N, int Q) {
  ModelConfig c;
  c.F = F; c.K = K; c.D = D; c.NL = NL; c.P = P; c.G = G; c.N = N; c.Q = Q;
  return c;
}

struct GpuRun {
  float loss;
  std::vector<float> grads, dx;
};

GpuRun run_gpu(Context& ctx, GpuModel& m, const DeviceBuffer<float>& p, const DeviceBuffer<float>& x,
            const DeviceBuffer<float>& y, const LossParams& lp, size_t total) {
  DeviceBuffer<float> g(total), dx(x.size());
  g.fill_bytes(0, ctx.stream());
  dx.fill_bytes(0xFF, ctx.stream());
  // bf16: the weights' bf16 copy, as the trainer's optimizer would keep it
  DeviceBuffer<__nv_bfloat16> p16(m.precision() == Precision::BF16 ? total : 0);
  if (p16.size()) gpu::cast_bf16(p.data(), p16.data(), total, ctx.stream());
  const __nv_bfloat16* P16 = p16.size() ? p16.data() : nullptr;
  m.forward(p.data(), x.data(), P16);
  m.loss(y.data(), lp);
  m.backward(p.data(), g.data(), dx.data(), P16);
  ctx.synchronize();
  GpuRun r;
  MLALPHA_CUDA_CHECK(cudaMemcpy(&r.loss, m.loss_value(), sizeof(float), cudaMemcpyDeviceToHost));
  r.grads = g.download();
  r.dx = dx.download();
  return r;
}

class ModelGpu : public ::testing::TestWithParam<Case> {};

TEST_P(ModelGpu, ParityWithCpuAndDeterminism) {
  const Case cs = GetParam();
  const ModelLayout lay(cs.mc);
  const ModelConfig& c = lay.cfg;
  if (std::string(cs.name).find("split") != std::string::npos) {  // the case exists to take the split: check it does
    const LayerShapes sh(c, cs.B, cs.L);
    ASSERT_GT(gpu::linear_dw_splits(sh.in_proj), 1);
    ASSERT_GT(gpu::linear_dw_splits(sh.out_proj), 1);
  }
  auto rng = make_rng(cs.B * 1000 + cs.L);
  std::vector<float> params = init_params(lay, test_seed());
  const auto noise = random_vec<float>(params.size(), rng, -0.2, 0.2);
  for (const auto& t : lay.table.tensors())
    for (size_t i = t.offset; i < t.offset + t.numel; ++i) params[i] += noise[i];
  const auto x = random_vec<float>(size_t(cs.B) * cs.L * c.F, rng, -2, 2);
  // Targets away from the predictions (which stay within about ±1): the sum of the residuals, head.bias's
  // gradient, is then of the size of its terms. With targets centred on the predictions it cancels to a small
  // fraction of them, and tf32's error, relative to the terms, made its rel-L2 check fail for 1 seed in 5 while
  // measuring the data's conditioning rather than the code.
  auto y = random_vec<float>(size_t(cs.B) * cs.L * c.K, rng, 1.0, 3.0);
  y[1] = std::numeric_limits<float>::quiet_NaN();
  const LossParams lp{cs.B, cs.L, c.K, LossKind::MSE, 1.0f, cs.L > 4 ? 3 : 0};

  // CPU reference in double on the same fp32 values.
  RefModel<double> ref(lay);
  const auto pd = cast_vec<double>(params), xd = cast_vec<double>(x), yd = cast_vec<double>(y);
  ref.forward(pd.data(), xd.data(), cs.B, cs.L);
  const double ref_loss = ref.loss(yd.data(), lp).loss;
  std::vector<double> ref_g(params.size(), 0.0), ref_dx(x.size());
  ref.backward(pd.data(), ref_g.data(), ref_dx.data());

  Context ctx;
  GpuModel model(ctx, lay, cs.B, cs.L, cs.precision);
  const auto dp = to_device(params), dxb = to_device(x), dyb = to_device(y);
  const GpuRun a = run_gpu(ctx, model, dp, dxb, dyb, lp, params.size());
  const double tol = cs.precision == Precision::BF16   ? tol::kModelParityBf16RelL2
                     : cs.precision == Precision::TF32 ? tol::kModelParityTf32RelL2
                                                       : tol::kModelParityRelL2;
  const bool evidence = cs.precision != Precision::FP32;
  EXPECT_NEAR(a.loss, ref_loss, tol * std::abs(ref_loss)) << "loss";
  // bf16: an element is measured against at least the RMS of the whole gradient. A tensor whose gradient
  // cancels far below the model's gradient scale (ragged_G2_bf16's layers.1 A_log summed to ~1e-4 on one
  // seed, against 1e-3 to 1e-1 on six others, and failed at rel-L2 0.23) carries bf16 errors of the size of
  // the terms it sums, not of their small sum; a wrong term still shows at the tensor's usual size.
  double sq = 0;
  for (double g : ref_g) sq += g * g;
  const double rms = std::sqrt(sq / double(std::max<size_t>(ref_g.size(), 1)));
  for (const auto& t : lay.table.tensors()) {
    const std::vector<float> got(a.grads.begin() + t.offset, a.grads.begin() + t.offset + t.numel);
    const std::vector<double> want(ref_g.begin() + t.offset, ref_g.begin() + t.offset + t.numel);
    std::vector<double> scale(want.size());
    for (size_t i = 0; i < want.size(); ++i) scale[i] = std::max(std::abs(want[i]), rms);
    const auto r = cs.precision == Precision::BF16 ? test::rel_l2_close_to_terms(got, want, scale, tol, t.name)
                                                   : rel_l2_close(got, want, tol, t.name);
    if (evidence) std::printf("  %s %s\n", to_string(cs.precision).c_str(), r.message());  // the tolerance's evidence
    EXPECT_TRUE(r);
  }
  EXPECT_TRUE(rel_l2_close(a.dx, ref_dx, tol, "input x"));

  const GpuRun b = run_gpu(ctx, model, dp, dxb, dyb, lp, params.size());
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << "loss differs between identical runs";
  EXPECT_EQ(std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)), 0)
      << "gradients differ bitwise between identical runs";
}

// A model built for forward passes (ModelUse::kForward: predict, stream, evaluation) holds none of the backward's
// parameter partials (in bf16 mostly the weight gradients' K-split partials), exactly GradPartials' bytes fewer
// than a training model of the shape; its forward output and loss are bitwise the training model's; backward()
// is refused before anything runs. An S-like bf16 shape of 16,384 rows (B 64, L 256: the weight gradients split).
TEST(ModelGpuForwardOnly, HoldsNoBackwardPartials) {
  const ModelConfig mc = make(32, 1, 128, 4, 32, 1, 64, 64);
  const ModelLayout lay(mc);
  const int B = 64, L = 256;
  auto rng = make_rng(77);
  std::vector<float> params = init_params(lay, test_seed());
  const auto x = random_vec<float>(size_t(B) * L * mc.F, rng, -2, 2), y = random_vec<float>(size_t(B) * L, rng);
  Context ctx;
  GpuModel train(ctx, lay, B, L, Precision::BF16), fwd(ctx, lay, B, L, Precision::BF16, ModelUse::kForward);
  const size_t want = GradPartials(LayerShapes(lay.cfg, B, L), mc.NL, Precision::BF16).total * sizeof(float);
  EXPECT_GT(want, size_t(4) << 20) << "the split dW's partials are megabytes";
  EXPECT_EQ(train.partials_bytes(), want);
  EXPECT_EQ(fwd.partials_bytes(), 0u);
  EXPECT_EQ(train.activation_bytes() - fwd.activation_bytes(), want);
  const auto dp = to_device(params), dx = to_device(x), dy = to_device(y);
  DeviceBuffer<__nv_bfloat16> p16(params.size());
  gpu::cast_bf16(dp.data(), p16.data(), params.size(), ctx.stream());
  const LossParams lp{B, L, 1, LossKind::MSE, 1.0f, 3};
  std::vector<float> out[2], loss[2];
  GpuModel* models[2] = {&train, &fwd};
  for (int i = 0; i < 2; ++i) {
    models[i]->forward(dp.data(), dx.data(), p16.data());
    models[i]->loss(dy.data(), lp);
    ctx.synchronize();
    out[i].resize(size_t(B) * L);
    loss[i].resize(1);
    MLALPHA_CUDA_CHECK(
        cudaMemcpy(out[i].data(), models[i]->out(), out[i].size() * sizeof(float), cudaMemcpyDeviceToHost));
    MLALPHA_CUDA_CHECK(cudaMemcpy(loss[i].data(), models[i]->loss_value(), sizeof(float), cudaMemcpyDeviceToHost));
  }
  EXPECT_TRUE(same_bits(out[1], out[0])) << "forward output";
  EXPECT_TRUE(same_bits(loss[1], loss[0])) << "loss";
  EXPECT_TRUE(std::isfinite(loss[0][0]));
  DeviceBuffer<float> g(params.size());
  EXPECT_THROW(fwd.backward(dp.data(), g.data(), nullptr, p16.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ModelGpu,
    ::testing::Values(Case{"tiny_L1", make(3, 1, 16, 1, 8, 1, 4, 4), 1, 1, Precision::FP32},
                      Case{"ragged_G2", make(5, 2, 32, 2, 16, 2, 16, 16), 3, 37, Precision::FP32},
                      Case{"S_like", make(32, 1, 128, 2, 32, 1, 64, 64), 2, 200, Precision::FP32},
                      Case{"S_like_tf32", make(32, 1, 128, 2, 32, 1, 64, 64), 2, 200, Precision::TF32},
                      Case{"ragged_G2_bf16", make(5, 2, 32, 2, 16, 2, 16, 16), 3, 37, Precision::BF16},
                      Case{"S_like_bf16", make(32, 1, 128, 2, 32, 1, 64, 64), 2, 200, Precision::BF16},
                      // M = 2048 rows: the weight gradients on our K split (4 slices, linear_dw_splits)
                      Case{"S_like_bf16_split", make(32, 1, 128, 2, 32, 1, 64, 64), 8, 256, Precision::BF16}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mlalpha::test
