// Whole-model gradients (double) against central finite differences of the loss, for every parameter
// tensor of the table and for the input, on ragged shapes: B = 1, L = 1, L not a multiple of Q, G > 1,
// with burn-in and a NaN target in the mask, for MSE and Huber.
#include <gtest/gtest.h>

#include <limits>

#include "fd_util.h"
#include "model_fd_util.h"
#include "model/layer_shapes.h"
#include "model/model_ref.h"

namespace mlalpha::test {
namespace {

struct Case {
  int B, L;
  LossKind loss;
  bool chunked;
};

class ModelFd : public ::testing::TestWithParam<Case> {};

TEST_P(ModelFd, EveryTensorAndInput) {
  const Case cs = GetParam();
  const ModelLayout lay(small_fd_config());
  const ModelConfig& c = lay.cfg;
  auto rng = make_rng(cs.B * 100 + cs.L);
  std::vector<double> params = fd_params(lay, rng);
  std::vector<double> x = random_vec<double>(size_t(cs.B) * cs.L * c.F, rng, -1.5, 1.5);
  std::vector<double> y = random_vec<double>(size_t(cs.B) * cs.L * c.K, rng);
  y[0] = std::numeric_limits<double>::quiet_NaN();
  const LossParams lp{cs.B, cs.L, c.K, cs.loss, 0.5f, cs.L > 2 ? 1 : 0};

  RefModel<double> model(lay, cs.chunked);
  auto f = [&] {
    model.forward(params.data(), x.data(), cs.B, cs.L);
    return model.loss(y.data(), lp).loss;
  };
  f();
  std::vector<double> grads(params.size(), 0.0), dx(x.size());
  model.backward(params.data(), grads.data(), dx.data());

  fd_check_every_tensor(lay, params, grads, f);
  EXPECT_TRUE(fd_check({"input x", &x, dx}, f, 24));
  // Padding between tensors never receives gradient.
  for (size_t i = 0; i < grads.size(); ++i) {
    bool inside = false;
    for (const auto& t : lay.table.tensors()) inside |= i >= t.offset && i < t.offset + t.numel;
    if (!inside) ASSERT_EQ(grads[i], 0.0) << "padding element " << i << " got a gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ModelFd,
                         ::testing::Values(Case{1, 1, LossKind::MSE, false}, Case{2, 7, LossKind::MSE, false},
                                           Case{1, 9, LossKind::Huber, false}, Case{2, 6, LossKind::MSE, true}),
                         [](const auto& info) {
                           return "B" + std::to_string(info.param.B) + "_L" + std::to_string(info.param.L) + "_" +
                                  to_string(info.param.loss) + (info.param.chunked ? "_chunked" : "");
                         });

// The chunked SSD inside the model gives the same output as the recurrence.
TEST(ModelRef, ChunkedEqualsRecurrent) {
  const ModelLayout lay(small_fd_config());
  auto rng = make_rng(5);
  const auto pf = init_params(lay, 3);
  std::vector<double> params(pf.begin(), pf.end());
  auto x = random_vec<double>(size_t(2) * 11 * lay.cfg.F, rng);
  RefModel<double> a(lay, false), b(lay, true);
  const auto ya = a.forward(params.data(), x.data(), 2, 11);
  const auto yb = b.forward(params.data(), x.data(), 2, 11);
  EXPECT_TRUE(all_close(yb, ya, 1e-12, 1e-12, "model output chunked vs recurrent"));
}

// The named column views tile their rows in DESIGN section 1's order, z | xBC | dt and x | B | C, with the
// row strides the ops' parameters use.
TEST(LayerShapes, ColumnViewsTileTheRows) {
  const LayerShapes s(small_fd_config(), 2, 5);  // d_inner 16, G·N 6: conv_dim 28, in_proj 48
  std::vector<float> zx(size_t(s.M) * s.proj), xbc(size_t(s.M) * s.cd);
  const ZxCols<float> z = zx_cols(s, zx.data());
  EXPECT_EQ(z.z - zx.data(), 0);
  EXPECT_EQ(z.xBC - zx.data(), 16);
  EXPECT_EQ(z.dt - zx.data(), 16 + 28);
  EXPECT_EQ(z.dt + s.H - zx.data(), 48);  // dt is the last H columns
  EXPECT_EQ(z.ld, 48);
  EXPECT_EQ(s.conv.ld_x, z.ld);
  EXPECT_EQ(s.dt.ld_dt, z.ld);
  EXPECT_EQ(s.gnorm.ld_z, z.ld);
  EXPECT_EQ(s.conv.C, int(z.dt - z.xBC));
  const XbcCols<const float> x = xbc_cols<const float>(s, xbc.data());
  EXPECT_EQ(x.x - xbc.data(), 0);
  EXPECT_EQ(x.B - xbc.data(), 16);
  EXPECT_EQ(x.C - xbc.data(), 16 + 6);
  EXPECT_EQ(x.C + s.GN - xbc.data(), 28);  // C is the last G·N columns
  EXPECT_EQ(x.ld, 28);
  EXPECT_EQ(s.ssd.ld, x.ld);
  EXPECT_EQ(s.ssd.H * s.ssd.P, int(x.B - x.x));
}

}  // namespace
}  // namespace mlalpha::test
