// Finite-difference checks (double) of every op's CPU backward: each op's output is reduced to a scalar
// f = Σ r·out with random r, so ∂f/∂out = r is fed to the backward and the returned gradients are
// compared with central differences of f for every input and parameter tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "fd_util.h"
#include "ops/conv1d/conv1d.h"
#include "ops/dt_softplus/dt_softplus.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/linear/linear.h"
#include "ops/loss/loss.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "ops/ssd/ssd.h"

namespace mlalpha::test {
namespace {

using V = std::vector<double>;

TEST(OpsFd, Linear) {
  for (auto [M, IN, OUT] : {std::tuple{1, 1, 1}, {5, 7, 3}, {4, 16, 9}}) {
    auto rng = make_rng(M * 100 + IN);
    V x = random_vec<double>(size_t(M) * IN, rng), w = random_vec<double>(size_t(OUT) * IN, rng),
      b = random_vec<double>(OUT, rng), r = random_vec<double>(size_t(M) * OUT, rng), y(size_t(M) * OUT);
    const LinearParams p{M, IN, OUT};
    auto f = [&] {
      ref::linear_fwd(p, {.x = x.data(), .w = w.data(), .b = b.data()}, y.data());
      return dot(y, r);
    };
    V dx(x.size()), dw(w.size(), 0.0), db(b.size(), 0.0);
    ref::linear_bwd(p, {.x = x.data(), .w = w.data()}, r.data(), {.dx = dx.data(), .dw = dw.data(), .db = db.data()});
    EXPECT_TRUE(fd_check({"linear.x", &x, dx}, f));
    EXPECT_TRUE(fd_check({"linear.w", &w, dw}, f));
    EXPECT_TRUE(fd_check({"linear.b", &b, db}, f));
  }
}

// The residual form y = r + x·Wᵀ + b: its backward is linear_bwd's plus ∂f/∂r = ∂f/∂y, and in place
// (r == y) it gives the same values as out of place.
TEST(OpsFd, LinearAdd) {
  for (auto [M, IN, OUT] : {std::tuple{1, 1, 1}, {5, 7, 3}}) {
    auto rng = make_rng(M * 100 + IN + 7);
    V x = random_vec<double>(size_t(M) * IN, rng), w = random_vec<double>(size_t(OUT) * IN, rng),
      b = random_vec<double>(OUT, rng), res = random_vec<double>(size_t(M) * OUT, rng),
      r = random_vec<double>(size_t(M) * OUT, rng), y(size_t(M) * OUT);
    const LinearParams p{M, IN, OUT};
    auto f = [&] {
      ref::linear_fwd_add(p, {.x = x.data(), .w = w.data(), .b = b.data()}, res.data(), y.data());
      return dot(y, r);
    };
    V dx(x.size()), dw(w.size(), 0.0), db(b.size(), 0.0);
    ref::linear_bwd(p, {.x = x.data(), .w = w.data()}, r.data(), {.dx = dx.data(), .dw = dw.data(), .db = db.data()});
    EXPECT_TRUE(fd_check({"linear_add.x", &x, dx}, f));
    EXPECT_TRUE(fd_check({"linear_add.w", &w, dw}, f));
    EXPECT_TRUE(fd_check({"linear_add.b", &b, db}, f));
    EXPECT_TRUE(fd_check({"linear_add.r", &res, r}, f));
    f();
    V inplace = res;
    ref::linear_fwd_add(p, {.x = x.data(), .w = w.data(), .b = b.data()}, inplace.data(), inplace.data());
    EXPECT_EQ(inplace, y);
  }
}

TEST(OpsFd, RmsNorm) {
  for (auto [M, D] : {std::pair{1, 1}, {3, 7}, {4, 32}}) {
    auto rng = make_rng(M * 31 + D);
    V x = random_vec<double>(size_t(M) * D, rng), w = random_vec<double>(D, rng, 0.5, 1.5),
      r = random_vec<double>(x.size(), rng), y(x.size()), rstd(M);
    const RmsNormParams p{M, D};
    const RmsNormInputs<double> in{.x = x.data(), .w = w.data()};
    auto f = [&] { ref::rmsnorm_fwd(p, in, y.data(), rstd.data()); return dot(y, r); };
    f();
    V dx = random_vec<double>(x.size(), rng), dx0 = dx, dw(D, 0.0);
    ref::rmsnorm_bwd(p, in, rstd.data(), r.data(), {.dx = dx.data(), .dw = dw.data()}, true);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dx0[i];  // accumulate mode added exactly the gradient
    EXPECT_TRUE(fd_check({"rmsnorm.x", &x, dx}, f));
    EXPECT_TRUE(fd_check({"rmsnorm.w", &w, dw}, f));
  }
}

TEST(OpsFd, Conv1dSilu) {
  // ld > C: x is a column slice of a wider row, like the in_proj output; L < W and L = 1 included.
  for (auto [B, L, C, W, ld] : {std::tuple{1, 1, 3, 4, 5}, {2, 3, 4, 4, 4}, {2, 9, 5, 3, 8}}) {
    auto rng = make_rng(B * 1000 + L * 10 + C);
    V x = random_vec<double>(size_t(B) * L * ld, rng), w = random_vec<double>(size_t(C) * W, rng),
      bias = random_vec<double>(C, rng), r = random_vec<double>(size_t(B) * L * C, rng), y(r.size());
    const Conv1dParams p{B, L, C, W, ld};
    const Conv1dInputs<double> in{.x = x.data(), .w = w.data(), .bias = bias.data()};
    auto f = [&] { ref::conv1d_silu_fwd(p, in, y.data()); return dot(y, r); };
    V dx(x.size(), 0.0), dw(w.size(), 0.0), db(C, 0.0);
    ref::conv1d_silu_bwd(p, in, r.data(), {.dx = dx.data(), .dw = dw.data(), .dbias = db.data()});
    EXPECT_TRUE(fd_check({"conv1d.x", &x, dx}, f));
    EXPECT_TRUE(fd_check({"conv1d.w", &w, dw}, f));
    EXPECT_TRUE(fd_check({"conv1d.bias", &bias, db}, f));
  }
}

TEST(OpsFd, DtSoftplus) {
  const double inf = std::numeric_limits<double>::infinity();
  for (auto [lo, hi] : {std::pair{0.0, inf}, {0.3, 0.9}}) {
    const int M = 6, H = 3, ld = 5;
    auto rng = make_rng(int(lo * 10) + 3);
    V dt = random_vec<double>(size_t(M) * ld, rng, -2, 2), bias = random_vec<double>(H, rng),
      r = random_vec<double>(size_t(M) * H, rng), delta(r.size());
    const DtParams p{M, H, ld, float(lo), float(hi)};
    const DtInputs<double> in{.dt = dt.data(), .dt_bias = bias.data()};
    auto f = [&] { ref::dt_softplus_fwd(p, in, delta.data()); return dot(delta, r); };
    V ddt(dt.size(), 0.0), dbias(H, 0.0);
    ref::dt_softplus_bwd(p, in, r.data(), {.ddt = ddt.data(), .ddt_bias = dbias.data()});
    EXPECT_TRUE(fd_check({"dt.dt", &dt, ddt}, f));
    EXPECT_TRUE(fd_check({"dt.bias", &bias, dbias}, f));
  }
}

TEST(OpsFd, GatedRmsNorm) {
  for (auto [M, Dn, G, ld] : {std::tuple{1, 4, 1, 4}, {3, 8, 2, 11}, {2, 12, 3, 12}}) {
    auto rng = make_rng(M * 7 + Dn);
    V y = random_vec<double>(size_t(M) * Dn, rng), z = random_vec<double>(size_t(M) * ld, rng, -2, 2),
      w = random_vec<double>(Dn, rng, 0.5, 1.5), r = random_vec<double>(y.size(), rng), out(y.size()),
      rstd(size_t(M) * G);
    const GatedNormParams p{M, Dn, G, ld};
    const GatedNormInputs<double> in{.y = y.data(), .z = z.data(), .w = w.data()};
    auto f = [&] { ref::gated_rmsnorm_fwd(p, in, out.data(), rstd.data()); return dot(out, r); };
    f();
    V dy(y.size()), dz(z.size(), 0.0), dw(Dn, 0.0);
    ref::gated_rmsnorm_bwd(p, in, rstd.data(), r.data(), {.dy = dy.data(), .dz = dz.data(), .dw = dw.data()});
    EXPECT_TRUE(fd_check({"gated.y", &y, dy}, f));
    EXPECT_TRUE(fd_check({"gated.z", &z, dz}, f));
    EXPECT_TRUE(fd_check({"gated.w", &w, dw}, f));
  }
}

TEST(OpsFd, Loss) {
  for (LossKind kind : {LossKind::MSE, LossKind::Huber}) {
    const int B = 2, L = 5, K = 2;
    auto rng = make_rng(int(kind) + 11);
    V out = random_vec<double>(size_t(B) * L * K, rng, -2, 2), y = random_vec<double>(out.size(), rng, -2, 2);
    y[3] = std::numeric_limits<double>::quiet_NaN();  // masked target
    const LossParams p{B, L, K, kind, 0.7f, 1};
    const LossInputs<double> in{.out = out.data(), .y = y.data()};
    auto f = [&] { return ref::loss_fwd_bwd<double>(p, in, nullptr).loss; };
    V dout(out.size());
    const auto res = ref::loss_fwd_bwd<double>(p, in, dout.data());
    EXPECT_EQ(res.count, B * (L - 1) * K - 1);  // burn-in drops t = 0; one NaN target
    EXPECT_EQ(dout[3], 0.0);
    EXPECT_TRUE(fd_check({kind == LossKind::MSE ? "loss.mse" : "loss.huber", &out, dout}, f));
  }
}

TEST(OpsFd, LossAllMaskedIsZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  V out{1.0, 2.0}, y{nan, nan}, dout(2, 5.0);
  const auto res =
      ref::loss_fwd_bwd<double>({1, 2, 1, LossKind::MSE, 1.0f, 0}, {.out = out.data(), .y = y.data()}, dout.data());
  EXPECT_EQ(res.count, 0);
  EXPECT_EQ(res.loss, 0.0);  // max(1, Σm) keeps it finite
  EXPECT_EQ(dout[0], 0.0);
  EXPECT_EQ(dout[1], 0.0);
}

// The IC loss (loss.h): 3 cross-sections of G = 6, L = 4 (burn-in 1), K = 2, with NaN targets, a group left with
// 2 valid members (not counted). (A constant prediction, where the ε floor acts, is IcLossIsMinusPearson's.)
TEST(OpsFd, IcLoss) {
  const int G = 6, B = 3 * G, L = 4, K = 2;
  auto rng = make_rng(91);
  V y = random_vec<double>(size_t(B) * L * K, rng, -2, 2), out = random_vec<double>(y.size(), rng, -1, 1);
  for (size_t i = 0; i < out.size(); ++i) out[i] += y[i];  // ρ ≈ 0.9 in every group: the loss is far from 0
  auto at = [&](int g, int i, int l, int k) { return ((size_t(g) * G + i) * L + l) * K + k; };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  y[at(0, 2, 1, 0)] = nan;                                            // one member masked
  for (int i = 0; i < 4; ++i) y[at(1, i, 2, 1)] = nan;                // 2 valid: not counted
  const LossParams p{B, L, K, LossKind::IC, 1.0f, 1, G};
  const LossInputs<double> in{.out = out.data(), .y = y.data()};
  auto f = [&] { return ref::loss_fwd_bwd<double>(p, in, nullptr).loss; };
  V dout(out.size());
  const auto res = ref::loss_fwd_bwd<double>(p, in, dout.data());
  EXPECT_EQ(res.count, 3 * (L - 1) * K - 1);  // burn-in drops l = 0; one group has 2 valid members
  EXPECT_LT(res.loss, -0.5);  // −mean ρ over the 17 counted groups
  EXPECT_EQ(dout[at(0, 2, 1, 0)], 0.0);
  EXPECT_EQ(dout[at(1, 5, 2, 1)], 0.0);  // a valid member of the uncounted group
  EXPECT_EQ(dout[at(0, 0, 0, 0)], 0.0);  // burn-in
  EXPECT_TRUE(fd_check({"loss.ic", &out, dout}, f));
}

// The IC loss against Pearson's correlation computed directly, for one group each: perfectly aligned,
// reversed, and an affine map of the target (ρ is scale- and shift-free), up to the ε floor.
TEST(OpsFd, IcLossIsMinusPearson) {
  const LossParams p{5, 1, 1, LossKind::IC, 1.0f, 0, 5};  // one cross-section of 5 windows of length 1
  const V y{0.3, -1.2, 2.0, 0.7, -0.4};
  auto loss_of = [&](const V& out) { return ref::loss_fwd_bwd<double>(p, {.out = out.data(), .y = y.data()}, nullptr); };
  V same = y, reversed(5), affine(5), noisy{1.0, -0.5, 1.5, 0.2, 0.9};
  for (int i = 0; i < 5; ++i) reversed[i] = -y[i], affine[i] = 3.0 * y[i] + 7.0;
  EXPECT_NEAR(loss_of(same).loss, -1.0, 1e-7);
  EXPECT_NEAR(loss_of(reversed).loss, 1.0, 1e-7);
  EXPECT_NEAR(loss_of(affine).loss, -1.0, 1e-7);
  double pm = 0, ym = 0;
  for (int i = 0; i < 5; ++i) pm += noisy[i] / 5, ym += y[i] / 5;
  double spp = 0, syy = 0, spy = 0;
  for (int i = 0; i < 5; ++i) spp += (noisy[i] - pm) * (noisy[i] - pm), syy += (y[i] - ym) * (y[i] - ym), spy += (noisy[i] - pm) * (y[i] - ym);
  const auto r = loss_of(noisy);
  EXPECT_EQ(r.count, 1);
  EXPECT_NEAR(r.loss, -spy / std::sqrt(spp * syy), 1e-7);
  // A constant target: ρ = 0 and the gradient 0, not NaN.
  const V flat(5, 1.5);
  V dout(5, 9.0);
  const auto c = ref::loss_fwd_bwd<double>(p, {.out = noisy.data(), .y = flat.data()}, dout.data());
  EXPECT_EQ(c.loss, 0.0);
  for (double d : dout) EXPECT_EQ(d, 0.0);
  // A constant prediction: ρ = 0 and ∂loss/∂p_i = −c_i / √(A·C) with A = n·ε (S_pp = 0), finite.
  const V level(5, 0.25);
  const auto k = ref::loss_fwd_bwd<double>(p, {.out = level.data(), .y = y.data()}, dout.data());
  EXPECT_EQ(k.loss, 0.0);
  const double A = 5 * kIcEps, C = syy + 5 * kIcEps;
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(dout[i], -(y[i] - ym) / std::sqrt(A * C), 1e-9 / std::sqrt(A * C));
}

TEST(OpsFd, IcLossNeedsWholeCrossSections) {
  V out(12, 0.0), y(12, 1.0);
  EXPECT_THROW(ref::loss_fwd_bwd<double>({6, 2, 1, LossKind::IC, 1.0f, 0, 4}, {.out = out.data(), .y = y.data()}, nullptr),
               Error);
  EXPECT_THROW(ref::loss_fwd_bwd<double>({6, 2, 1, LossKind::IC, 1.0f, 0, 0}, {.out = out.data(), .y = y.data()}, nullptr),
               Error);
}

// SSD: x, B, C live in one (B, L, ld) activation; gradients of all six inputs.
TEST(OpsFd, Ssd) {
  struct Shape { int B, L, H, P, G, N, Q; };
  for (Shape s : {Shape{1, 1, 1, 2, 1, 3, 4}, Shape{2, 7, 2, 3, 1, 2, 3}, Shape{1, 10, 4, 2, 2, 3, 4}}) {
    const int ld = s.H * s.P + 2 * s.G * s.N + 1;  // one spare column: strides are honoured
    auto rng = make_rng(s.L * 13 + s.H);
    V xbc = random_vec<double>(size_t(s.B) * s.L * ld, rng), delta = random_vec<double>(size_t(s.B) * s.L * s.H, rng, 0.05, 0.8),
      A_log = random_vec<double>(s.H, rng, -0.5, 1.0), D = random_vec<double>(s.H, rng),
      r = random_vec<double>(size_t(s.B) * s.L * s.H * s.P, rng), y(r.size());
    const SsdParams p{s.B, s.L, s.H, s.P, s.G, s.N, s.Q, ld};
    const int bo = s.H * s.P, co = bo + s.G * s.N;
    const SsdInputs<double> in{.x = xbc.data(), .delta = delta.data(), .A_log = A_log.data(),
                               .Bm = xbc.data() + bo, .Cm = xbc.data() + co, .Dskip = D.data()};
    auto f = [&] {
      ref::ssd_fwd_recurrent(p, in, y.data());
      return dot(y, r);
    };
    V dxbc(xbc.size(), 0.0), ddelta(delta.size()), dA(s.H, 0.0), dD(s.H, 0.0);
    ref::ssd_bwd(p, in, r.data(),
                 {.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA.data(), .dB = dxbc.data() + bo,
                  .dC = dxbc.data() + co, .dD = dD.data()});
    EXPECT_TRUE(fd_check({"ssd.xBC", &xbc, dxbc}, f, 200));
    EXPECT_TRUE(fd_check({"ssd.delta", &delta, ddelta}, f));
    EXPECT_TRUE(fd_check({"ssd.A_log", &A_log, dA}, f));
    EXPECT_TRUE(fd_check({"ssd.D", &D, dD}, f));
  }
}

}  // namespace
}  // namespace mlalpha::test
