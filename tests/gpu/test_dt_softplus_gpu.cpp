// gpu::dt_softplus_fwd / _bwd against the CPU reference in double: strided dt (ld_dt > H), M = 1, H > 32,
// u > 20 (identity branch), no clamp (hi = +inf) and an active clamp on both sides; ddt written in its H
// columns only, ddt_bias accumulated onto random values; plus bitwise determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
#include "ops/activations.h"
#include "ops/dt_softplus/dt_softplus.h"

namespace mlalpha {
namespace {

using test::all_close;
using test::cast_vec;
using test::close_to_terms;
using test::from_device;
using test::poisoned;
using test::random_vec;
using test::rel_l2_close;
using test::to_device;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Inputs {
  DtParams p;
  std::vector<float> dt, bias, ddelta, ddt0, bias_grad0;
};

Inputs make_inputs(int M, int H, int ld, float lo, float hi, uint64_t salt) {
  Inputs in;
  in.p = DtParams{M, H, ld, lo, hi};
  auto rng = test::make_rng(salt);
  in.dt = random_vec<float>(size_t(M) * ld, rng, -6.0, 6.0);
  for (size_t i = 0; i < in.dt.size(); i += 13) in.dt[i] = 21.0f + float(i % 7);  // softplus(u) = u branch
  in.bias = random_vec<float>(H, rng);
  // Keep u off the clamp edges: there fp32 and double may disagree on which side softplus(u) falls,
  // which flips the gradient between g and 0 (a rounding question, not a bug).
  for (int m = 0; m < M; ++m)
    for (int h = 0; h < H; ++h) {
      float& d = in.dt[size_t(m) * ld + h];
      for (int tries = 0; tries < 100; ++tries) {
        const double v = softplus(double(d) + double(in.bias[h]));
        if (std::abs(v - lo) > 1e-4 && (std::isinf(hi) || std::abs(v - hi) > 1e-4)) break;
        d += 0.01f;
      }
    }
  in.ddelta = random_vec<float>(size_t(M) * H, rng);
  in.ddt0 = random_vec<float>(size_t(M) * ld, rng);  // columns >= H must survive the backward
  for (int m = 0; m < M; ++m)
    for (int h = 0; h < H; ++h) in.ddt0[size_t(m) * ld + h] = std::numeric_limits<float>::quiet_NaN();
  in.bias_grad0 = random_vec<float>(H, rng);
  return in;
}

void check_shape(int M, int H, int ld, float lo, float hi, uint64_t salt) {
  SCOPED_TRACE("M=" + std::to_string(M) + " H=" + std::to_string(H) + " ld_dt=" + std::to_string(ld) +
               " lo=" + std::to_string(lo) + " hi=" + std::to_string(hi));
  const Inputs in = make_inputs(M, H, ld, lo, hi, salt);
  const DtParams& p = in.p;
  const size_t n = size_t(M) * H;

  const auto dtd = cast_vec<double>(in.dt), biasd = cast_vec<double>(in.bias), ddeltad = cast_vec<double>(in.ddelta);
  std::vector<double> delta_ref(n), ddt_ref = cast_vec<double>(in.ddt0), bg_ref = cast_vec<double>(in.bias_grad0);
  ref::dt_softplus_fwd<double>(p, {.dt = dtd.data(), .dt_bias = biasd.data()}, delta_ref.data());
  ref::dt_softplus_bwd<double>(p, {.dt = dtd.data(), .dt_bias = biasd.data()}, ddeltad.data(),
                               {.ddt = ddt_ref.data(), .ddt_bias = bg_ref.data()});

  auto dt_g = to_device(in.dt), bias_g = to_device(in.bias), ddelta_g = to_device(in.ddelta);
  auto delta_g = poisoned(n), ddt_g = to_device(in.ddt0), bg_g = to_device(in.bias_grad0);
  auto ws = poisoned(gpu::dt_softplus_bwd_workspace_floats(p));
  gpu::dt_softplus_fwd(p, {.dt = dt_g.data(), .dt_bias = bias_g.data()}, delta_g.data(), nullptr);
  gpu::dt_softplus_bwd(p, {.dt = dt_g.data(), .dt_bias = bias_g.data()}, ddelta_g.data(),
                       {.ddt = ddt_g.data(), .ddt_bias = bg_g.data()}, ws.data(), nullptr);

  EXPECT_TRUE(all_close(from_device(delta_g), delta_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "delta"));
  const auto ddt = from_device(ddt_g);
  std::vector<float> ddt_cols(n);
  std::vector<double> ddt_ref_cols(n);
  size_t touched = 0, clamped = 0;
  for (int m = 0; m < M; ++m) {
    for (int h = 0; h < H; ++h) {
      ddt_cols[size_t(m) * H + h] = ddt[size_t(m) * ld + h];
      ddt_ref_cols[size_t(m) * H + h] = ddt_ref[size_t(m) * ld + h];
      clamped += ddt_ref[size_t(m) * ld + h] == 0.0;
    }
    for (int i = H; i < ld; ++i)
      touched += std::memcmp(&ddt[size_t(m) * ld + i], &in.ddt0[size_t(m) * ld + i], sizeof(float)) != 0;
  }
  EXPECT_TRUE(all_close(ddt_cols, ddt_ref_cols, tol::kGpuElemAbs, tol::kGpuElemRel, "ddt"));
  EXPECT_EQ(touched, 0u) << "ddt columns >= H were overwritten";
  // ddt_bias: per element against its terms, |init| + Σ|g| (a short one can cancel: init ≈ −Σ), and as a whole
  // vector where H is long enough for the norm to be meaningful.
  std::vector<double> bg_mag(H);
  for (int h = 0; h < H; ++h) {
    bg_mag[h] = std::abs(double(in.bias_grad0[h]));
    for (int m = 0; m < M; ++m) bg_mag[h] += std::abs(ddt_ref[size_t(m) * ld + h]);
  }
  const auto bg = from_device(bg_g);
  EXPECT_TRUE(close_to_terms(bg, bg_ref, bg_mag, tol::kGpuElemAbs, tol::kGpuElemRel, "ddt_bias"));
  if (H >= 8) {
    EXPECT_TRUE(rel_l2_close(bg, bg_ref, tol::kGpuReduceRelL2, "ddt_bias"));
  }
  if (!std::isinf(hi) && n >= 1000) {
    EXPECT_GT(clamped, 0u) << "the clamp case clamped nothing";
  }
}

TEST(DtSoftplusGpu, MatchesReference) {
  struct Shape {
    int M, H, ld;
  };
  const Shape shapes[] = {{1, 1, 1}, {1, 8, 20}, {7, 3, 3}, {33, 24, 100}, {1000, 40, 77}, {32768, 8, 300}};
  uint64_t salt = 1;
  for (const Shape& s : shapes) {
    check_shape(s.M, s.H, s.ld, 0.0f, kInf, salt++);  // the default: no clamp
    check_shape(s.M, s.H, s.ld, 0.05f, 2.0f, salt++);  // dt_limit active on both sides
  }
}

TEST(DtSoftplusGpu, Deterministic) {
  const Inputs in = make_inputs(32768, 40, 300, 0.0f, kInf, 1000);
  const DtParams& p = in.p;
  auto run = [&] {
    auto dt_g = to_device(in.dt), bias_g = to_device(in.bias), ddelta_g = to_device(in.ddelta);
    auto delta_g = poisoned(size_t(p.M) * p.H), ddt_g = to_device(in.ddt0), bg_g = to_device(in.bias_grad0);
    auto ws = poisoned(gpu::dt_softplus_bwd_workspace_floats(p));
    gpu::dt_softplus_fwd(p, {.dt = dt_g.data(), .dt_bias = bias_g.data()}, delta_g.data(), nullptr);
    gpu::dt_softplus_bwd(p, {.dt = dt_g.data(), .dt_bias = bias_g.data()}, ddelta_g.data(),
                         {.ddt = ddt_g.data(), .ddt_bias = bg_g.data()}, ws.data(), nullptr);
    return std::vector<std::vector<float>>{from_device(delta_g), from_device(ddt_g), from_device(bg_g)};
  };
  const auto a = run(), b = run();
  const char* names[] = {"delta", "ddt", "ddt_bias"};
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(0, std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)))
        << names[k] << " differs between two identical runs";
}

TEST(DtSoftplusGpu, RejectsBadParams) {
  EXPECT_THROW(gpu::dt_softplus_fwd(DtParams{4, 8, 7, 0.0f, kInf}, DtInputs<float>{}, nullptr, nullptr), Error);
  EXPECT_THROW(gpu::dt_softplus_fwd(DtParams{4, 8, 8, 1.0f, 0.5f}, DtInputs<float>{}, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace mlalpha
