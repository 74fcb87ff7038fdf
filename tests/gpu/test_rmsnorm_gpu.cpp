// gpu::rmsnorm_fwd / rmsnorm_bwd against the CPU reference in double, on random shapes (M = 1, odd D,
// D = 1, many dw partial blocks), both dx modes, dw accumulated onto random values; every team size of
// ops/common/row_team.cuh on both its float4 path (D % 4 == 0) and its scalar path, M not a multiple of the 16
// rows of a backward block; plus bitwise determinism, and the same bits from the float4 path and from the
// scalar path (misaligned pointers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
#include "ops/rmsnorm/rmsnorm.h"

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
using test::to_device_at;
using test::from_device_at;

void check_shape(int M, int D, bool accumulate, uint64_t salt) {
  SCOPED_TRACE("M=" + std::to_string(M) + " D=" + std::to_string(D) + " accumulate=" + std::to_string(accumulate));
  const RmsNormParams p{M, D, 1e-5f};
  const size_t n = size_t(M) * D;
  auto rng = test::make_rng(salt);
  const auto x = random_vec<float>(n, rng);
  const auto w = random_vec<float>(D, rng, 0.5, 1.5);
  const auto dy = random_vec<float>(n, rng);
  const auto dx0 = random_vec<float>(n, rng);  // the residual gradient dx is added to when accumulate
  const auto dw0 = random_vec<float>(D, rng);

  // forward
  const auto xd = cast_vec<double>(x), wd = cast_vec<double>(w), dyd = cast_vec<double>(dy);
  std::vector<double> y_ref(n), rstd_ref(M);
  ref::rmsnorm_fwd<double>(p, {.x = xd.data(), .w = wd.data()}, y_ref.data(), rstd_ref.data());
  auto x_g = to_device(x), w_g = to_device(w), dy_g = to_device(dy);
  auto y_g = poisoned(n), rstd_g = poisoned(M);
  gpu::rmsnorm_fwd(p, {.x = x_g.data(), .w = w_g.data()}, y_g.data(), rstd_g.data(), nullptr);
  EXPECT_TRUE(all_close(from_device(y_g), y_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "y"));
  EXPECT_TRUE(all_close(from_device(rstd_g), rstd_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "rstd"));

  // backward, both sides on the same fp32 rstd
  const auto rstd = cast_vec<float>(rstd_ref);
  const auto rstdd = cast_vec<double>(rstd);
  std::vector<double> dx_ref = cast_vec<double>(dx0), dw_ref = cast_vec<double>(dw0);
  ref::rmsnorm_bwd<double>(p, {.x = xd.data(), .w = wd.data()}, rstdd.data(), dyd.data(),
                           {.dx = dx_ref.data(), .dw = dw_ref.data()}, accumulate);
  // dx_i = r·w_i·dy_i − x_i·c is a difference that can cancel far below its terms (D = 1 gives
  // dx ∝ eps / (x² + eps)), so dx and dw are checked against the size of their terms (close_to_terms).
  std::vector<double> mag(n);  // |r·w·dy| + |x·c| (+ |dx0| when accumulating)
  std::vector<double> dw_mag(D);  // |dw0| + Σ_m |dy·x·r|
  for (int i = 0; i < D; ++i) dw_mag[i] = std::abs(double(dw0[i]));
  for (int m = 0; m < M; ++m) {
    double dot = 0;
    for (int i = 0; i < D; ++i) dot += dyd[size_t(m) * D + i] * wd[i] * xd[size_t(m) * D + i];
    const double r = rstdd[m], c = r * r * r * dot / D;
    for (int i = 0; i < D; ++i) {
      const size_t k = size_t(m) * D + i;
      mag[k] = std::abs(r * wd[i] * dyd[k]) + std::abs(xd[k] * c) + (accumulate ? std::abs(double(dx0[k])) : 0.0);
      dw_mag[i] += std::abs(dyd[k] * xd[k] * r);
    }
  }
  auto rstd_in = to_device(rstd), dw_g = to_device(dw0);
  auto dx_g = accumulate ? to_device(dx0) : poisoned(n);
  auto ws = poisoned(gpu::rmsnorm_bwd_workspace_floats(p));  // must not rely on zeroed scratch
  gpu::rmsnorm_bwd(p, {.x = x_g.data(), .w = w_g.data()}, rstd_in.data(), dy_g.data(),
                   {.dx = dx_g.data(), .dw = dw_g.data()}, accumulate, ws.data(), nullptr);
  EXPECT_TRUE(close_to_terms(from_device(dx_g), dx_ref, mag, tol::kGpuElemAbs, tol::kGpuElemRel, "dx"));
  // dw: per element against its terms (a short dw can cancel: dw0 ≈ −Σ), and as a whole vector where D is
  // long enough for the norm to be meaningful (there a single lost row would stand out).
  const auto dw = from_device(dw_g);
  EXPECT_TRUE(close_to_terms(dw, dw_ref, dw_mag, tol::kGpuElemAbs, tol::kGpuElemRel, "dw"));
  if (D >= 32) {
    EXPECT_TRUE(rel_l2_close(dw, dw_ref, tol::kGpuReduceRelL2, "dw"));
  }
}

TEST(RmsNormGpu, MatchesReference) {
  struct Shape {
    int M, D;
  };
  // team (row_team.cuh) by D: <= 256 Team<64, 1>, <= 512 Team<128, 1>, <= 1024 Team<256, 1>, <= 2048
  // Team<256, 2>, <= 4096 Team<256, 4>, <= 8192 Team<512, 4>; float4 path where D % 4 == 0, scalar otherwise
  const Shape shapes[] = {{1, 1},     {1, 7},      {1, 1024},  {3, 33},    {7, 1},     {33, 128},  {100, 7},
                          {1000, 33}, {4099, 1024}, {32768, 64}, {50, 512}, {45, 509},  {37, 1021}, {1031, 2048},
                          {21, 2047}, {9, 4096},   {6, 4093},  {5, 8192},  {3, 6001}};
  uint64_t salt = 1;
  for (const Shape& s : shapes)
    for (bool acc : {false, true}) check_shape(s.M, s.D, acc, salt++);
}

TEST(RmsNormGpu, Deterministic) {
  const RmsNormParams p{4099, 1024, 1e-5f};
  const size_t n = size_t(p.M) * p.D;
  auto rng = test::make_rng(1000);
  const auto x = random_vec<float>(n, rng), w = random_vec<float>(p.D, rng), dy = random_vec<float>(n, rng);
  const auto dx0 = random_vec<float>(n, rng), dw0 = random_vec<float>(p.D, rng);
  auto run = [&](bool accumulate) {
    auto x_g = to_device(x), w_g = to_device(w), dy_g = to_device(dy), dx_g = to_device(dx0), dw_g = to_device(dw0);
    auto y_g = poisoned(n), rstd_g = poisoned(p.M), ws = poisoned(gpu::rmsnorm_bwd_workspace_floats(p));
    gpu::rmsnorm_fwd(p, {.x = x_g.data(), .w = w_g.data()}, y_g.data(), rstd_g.data(), nullptr);
    gpu::rmsnorm_bwd(p, {.x = x_g.data(), .w = w_g.data()}, rstd_g.data(), dy_g.data(),
                     {.dx = dx_g.data(), .dw = dw_g.data()}, accumulate, ws.data(), nullptr);
    return std::vector<std::vector<float>>{from_device(y_g), from_device(rstd_g), from_device(dx_g),
                                           from_device(dw_g)};
  };
  for (bool acc : {false, true}) {
    const auto a = run(acc), b = run(acc);
    const char* names[] = {"y", "rstd", "dx", "dw"};
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_EQ(0, std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)))
          << names[k] << " differs between two identical runs (accumulate=" << acc << ")";
  }
}

// The float4 path and the scalar fallback use the same column → thread map and sum orders, so they must give
// the same bits: run each shape once on 16-byte aligned buffers and once with every buffer one float off.
TEST(RmsNormGpu, VectorAndScalarPathsAgreeBitwise) {
  struct Shape {
    int M, D;
  };
  const Shape shapes[] = {{1031, 1024}, {100, 512}, {33, 128}, {19, 2048}};
  uint64_t salt = 2000;
  for (const Shape& sh : shapes)
    for (bool acc : {false, true}) {
      SCOPED_TRACE("M=" + std::to_string(sh.M) + " D=" + std::to_string(sh.D) + " accumulate=" + std::to_string(acc));
      const RmsNormParams p{sh.M, sh.D, 1e-5f};
      const size_t n = size_t(p.M) * p.D;
      auto rng = test::make_rng(salt++);
      const auto x = random_vec<float>(n, rng), w = random_vec<float>(p.D, rng), dy = random_vec<float>(n, rng);
      const auto dx0 = random_vec<float>(n, rng), dw0 = random_vec<float>(p.D, rng);
      auto run = [&](size_t off) {  // every buffer starts `off` floats into its allocation
        auto put = [&](const std::vector<float>& h) { return to_device_at(h, off); };
        auto x_g = put(x), w_g = put(w), dy_g = put(dy), dx_g = put(dx0), dw_g = put(dw0);
        auto y_g = put(std::vector<float>(n)), rstd_g = put(std::vector<float>(p.M));
        auto ws = put(std::vector<float>(gpu::rmsnorm_bwd_workspace_floats(p)));
        gpu::rmsnorm_fwd(p, {.x = x_g.data() + off, .w = w_g.data() + off}, y_g.data() + off, rstd_g.data() + off,
                         nullptr);
        gpu::rmsnorm_bwd(p, {.x = x_g.data() + off, .w = w_g.data() + off}, rstd_g.data() + off, dy_g.data() + off,
                         {.dx = dx_g.data() + off, .dw = dw_g.data() + off}, acc, ws.data() + off, nullptr);
        auto get = [&](const DeviceBuffer<float>& d) { return from_device_at(d, off); };
        return std::vector<std::vector<float>>{get(y_g), get(rstd_g), get(dx_g), get(dw_g)};
      };
      test::expect_paths_bitwise_equal(run(0), run(1), {"y", "rstd", "dx", "dw"});
    }
}

TEST(RmsNormGpu, RejectsBadShapes) {
  EXPECT_THROW(gpu::rmsnorm_fwd(RmsNormParams{4, 0, 1e-5f}, {}, static_cast<float*>(nullptr), nullptr, nullptr), Error);
  EXPECT_THROW(gpu::rmsnorm_fwd(RmsNormParams{4, 8193, 1e-5f}, {}, static_cast<float*>(nullptr), nullptr, nullptr), Error);
  EXPECT_THROW(gpu::rmsnorm_bwd(RmsNormParams{4, 8193, 1e-5f}, {}, nullptr, nullptr, {}, false, nullptr, nullptr),
               Error);
}

}  // namespace
}  // namespace mlalpha
