// gpu::gated_rmsnorm_fwd / _bwd against the CPU reference in double, on random shapes (M = 1, odd group
// sizes, G > 1, ld_z > Dn, Dn = 2048, many dw partial blocks), dw accumulated onto random values, dz written
// in its Dn columns only; every team size of ops/common/row_team.cuh on both its float4 path (group size and
// ld_z multiples of 4) and its scalar path (odd ones), M not a multiple of the 16 rows of a backward block;
// plus bitwise determinism, and the same bits from the float4 path and from the scalar path (misaligned
// pointers).
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
#include "ops/gated_rmsnorm/gated_rmsnorm.h"

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

struct Inputs {
  GatedNormParams p;
  std::vector<float> y, z, w, dout, dw0;
};

Inputs make_inputs(int M, int Dn, int G, int ld_z, uint64_t salt) {
  Inputs in;
  in.p = GatedNormParams{M, Dn, G, ld_z, 1e-5f};
  auto rng = test::make_rng(salt);
  in.y = random_vec<float>(size_t(M) * Dn, rng);
  in.z = random_vec<float>(size_t(M) * ld_z, rng, -4.0, 4.0);  // both tails of SiLU
  in.w = random_vec<float>(Dn, rng, 0.5, 1.5);
  in.dout = random_vec<float>(size_t(M) * Dn, rng);
  in.dw0 = random_vec<float>(Dn, rng);
  return in;
}

void check_shape(int M, int Dn, int G, int ld_z, uint64_t salt) {
  SCOPED_TRACE("M=" + std::to_string(M) + " Dn=" + std::to_string(Dn) + " G=" + std::to_string(G) +
               " ld_z=" + std::to_string(ld_z));
  const Inputs in = make_inputs(M, Dn, G, ld_z, salt);
  const GatedNormParams& p = in.p;
  const size_t n = size_t(M) * Dn, nz = size_t(M) * ld_z;
  const int gs = Dn / G;

  // forward
  const auto yd = cast_vec<double>(in.y), zd = cast_vec<double>(in.z), wd = cast_vec<double>(in.w);
  const auto doutd = cast_vec<double>(in.dout);
  std::vector<double> out_ref(n), rstd_ref(size_t(M) * G);
  ref::gated_rmsnorm_fwd<double>(p, {.y = yd.data(), .z = zd.data(), .w = wd.data()}, out_ref.data(), rstd_ref.data());
  auto y_g = to_device(in.y), z_g = to_device(in.z), w_g = to_device(in.w), dout_g = to_device(in.dout);
  auto out_g = poisoned(n), rstd_g = poisoned(size_t(M) * G);
  gpu::gated_rmsnorm_fwd(p, {.y = y_g.data(), .z = z_g.data(), .w = w_g.data()}, out_g.data(), rstd_g.data(), nullptr);
  EXPECT_TRUE(all_close(from_device(out_g), out_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "out"));
  EXPECT_TRUE(all_close(from_device(rstd_g), rstd_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "rstd"));

  // backward, both sides on the same fp32 rstd. dz: NaN in the Dn columns the kernel must write, random values
  // in the columns it must leave alone.
  const auto rstd = cast_vec<float>(rstd_ref);
  const auto rstdd = cast_vec<double>(rstd);
  auto rng = test::make_rng(salt + 7777);
  std::vector<float> dz0 = random_vec<float>(nz, rng);
  for (int m = 0; m < M; ++m)
    for (int i = 0; i < Dn; ++i) dz0[size_t(m) * ld_z + i] = std::numeric_limits<float>::quiet_NaN();
  std::vector<double> dy_ref(n), dz_ref = cast_vec<double>(dz0), dw_ref = cast_vec<double>(in.dw0);
  ref::gated_rmsnorm_bwd<double>(p, {.y = yd.data(), .z = zd.data(), .w = wd.data()}, rstdd.data(), doutd.data(),
                                 {.dy = dy_ref.data(), .dz = dz_ref.data(), .dw = dw_ref.data()});
  // du = r·w·dout − u·c is a difference that can cancel far below its terms, so dy, dz and dw are checked
  // against the size of their terms (close_to_terms): |r·w·dout| + |u·c| for du, times the factor that
  // multiplies du, |SiLU(z)| (dy) or |y·SiLU'(z)| (dz)
  std::vector<double> dy_mag(n), dz_mag(n), dz_ref_cols(n), dw_mag(Dn);
  for (int i = 0; i < Dn; ++i) dw_mag[i] = std::abs(double(in.dw0[i]));
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < G; ++g) {
      const double r = rstdd[size_t(m) * G + g];
      double dot = 0;
      for (int i = g * gs; i < (g + 1) * gs; ++i)
        dot += doutd[size_t(m) * Dn + i] * wd[i] * yd[size_t(m) * Dn + i] * silu(zd[size_t(m) * ld_z + i]);
      const double c = r * r * r * dot / gs;
      for (int i = g * gs; i < (g + 1) * gs; ++i) {
        const size_t k = size_t(m) * Dn + i, kz = size_t(m) * ld_z + i;
        const double u = yd[k] * silu(zd[kz]);
        const double du_mag = std::abs(r * wd[i] * doutd[k]) + std::abs(u * c);
        dy_mag[k] = du_mag * std::abs(silu(zd[kz]));
        dz_mag[k] = du_mag * std::abs(yd[k] * silu_grad(zd[kz]));
        dz_ref_cols[k] = dz_ref[kz];
        dw_mag[i] += std::abs(doutd[k] * u * r);
      }
    }
  auto rstd_in = to_device(rstd), dw_g = to_device(in.dw0), dz_g = to_device(dz0);
  auto dy_g = poisoned(n), ws = poisoned(gpu::gated_rmsnorm_bwd_workspace_floats(p));
  gpu::gated_rmsnorm_bwd(p, {.y = y_g.data(), .z = z_g.data(), .w = w_g.data()}, rstd_in.data(), dout_g.data(),
                         {.dy = dy_g.data(), .dz = dz_g.data(), .dw = dw_g.data()}, ws.data(), nullptr);
  EXPECT_TRUE(close_to_terms(from_device(dy_g), dy_ref, dy_mag, tol::kGpuElemAbs, tol::kGpuElemRel, "dy"));
  const auto dz = from_device(dz_g);
  std::vector<float> dz_cols(n);
  size_t touched = 0;
  for (int m = 0; m < M; ++m) {
    for (int i = 0; i < Dn; ++i) dz_cols[size_t(m) * Dn + i] = dz[size_t(m) * ld_z + i];
    for (int i = Dn; i < ld_z; ++i)
      touched += std::memcmp(&dz[size_t(m) * ld_z + i], &dz0[size_t(m) * ld_z + i], sizeof(float)) != 0;
  }
  EXPECT_TRUE(close_to_terms(dz_cols, dz_ref_cols, dz_mag, tol::kGpuElemAbs, tol::kGpuElemRel, "dz"));
  EXPECT_EQ(touched, 0u) << "dz columns >= Dn were overwritten";
  // dw: per element against its terms (a short dw can cancel: dw0 ≈ −Σ), and as a whole vector where Dn is
  // long enough for the norm to be meaningful (there a single lost row would stand out).
  const auto dw = from_device(dw_g);
  EXPECT_TRUE(close_to_terms(dw, dw_ref, dw_mag, tol::kGpuElemAbs, tol::kGpuElemRel, "dw"));
  if (Dn >= 32) {
    EXPECT_TRUE(rel_l2_close(dw, dw_ref, tol::kGpuReduceRelL2, "dw"));
  }
}

TEST(GatedRmsNormGpu, MatchesReference) {
  struct Shape {
    int M, Dn, G, ld_z;
  };
  // team (row_team.cuh) by group size gs = Dn / G: <= 256 Team<64, 1>, <= 512 Team<128, 1>, <= 1024
  // Team<256, 1>, <= 2048 Team<256, 2>, <= 4096 Team<256, 4>, <= 8192 Team<512, 4>; float4 path where gs and
  // ld_z are multiples of 4, scalar otherwise
  const Shape shapes[] = {{1, 1, 1, 1},        {1, 7, 1, 7},       {1, 64, 8, 100},     {3, 33, 3, 40},
                          {7, 24, 8, 30},      {33, 256, 1, 600},  {100, 96, 2, 96},    {1000, 2048, 8, 4200},
                          {257, 2048, 1, 4111}, {4099, 512, 4, 1100}, {32768, 64, 1, 137},
                          {100, 512, 1, 1160},  {65, 1000, 2, 1003},  {37, 1020, 1, 1020}, {19, 1021, 1, 1021},
                          {1031, 2048, 1, 4384}, {17, 4096, 1, 4100}, {40, 8192, 2, 8200}, {5, 4098, 2, 4098},
                          {3, 8192, 1, 8192},   {2, 6001, 1, 6001}};
  uint64_t salt = 1;
  for (const Shape& s : shapes) check_shape(s.M, s.Dn, s.G, s.ld_z, salt++);
}

TEST(GatedRmsNormGpu, Deterministic) {
  const Inputs in = make_inputs(4099, 2048, 4, 4200, 1000);
  const GatedNormParams& p = in.p;
  const size_t n = size_t(p.M) * p.Dn, nz = size_t(p.M) * p.ld_z;
  auto run = [&] {
    auto y_g = to_device(in.y), z_g = to_device(in.z), w_g = to_device(in.w), dout_g = to_device(in.dout);
    auto dw_g = to_device(in.dw0), out_g = poisoned(n), rstd_g = poisoned(size_t(p.M) * p.G);
    auto dy_g = poisoned(n), dz_g = poisoned(nz), ws = poisoned(gpu::gated_rmsnorm_bwd_workspace_floats(p));
    gpu::gated_rmsnorm_fwd(p, {.y = y_g.data(), .z = z_g.data(), .w = w_g.data()}, out_g.data(), rstd_g.data(),
                           nullptr);
    gpu::gated_rmsnorm_bwd(p, {.y = y_g.data(), .z = z_g.data(), .w = w_g.data()}, rstd_g.data(), dout_g.data(),
                           {.dy = dy_g.data(), .dz = dz_g.data(), .dw = dw_g.data()}, ws.data(), nullptr);
    return std::vector<std::vector<float>>{from_device(out_g), from_device(rstd_g), from_device(dy_g),
                                           from_device(dz_g), from_device(dw_g)};
  };
  const auto a = run(), b = run();
  const char* names[] = {"out", "rstd", "dy", "dz", "dw"};
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(0, std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)))
        << names[k] << " differs between two identical runs";
}

// The float4 path and the scalar fallback use the same column → thread map and sum orders, so they must give
// the same bits: run each shape once on 16-byte aligned buffers and once with every buffer one float off.
TEST(GatedRmsNormGpu, VectorAndScalarPathsAgreeBitwise) {
  struct Shape {
    int M, Dn, G, ld_z;
  };
  const Shape shapes[] = {{1031, 2048, 1, 4384}, {100, 512, 1, 1160}, {33, 256, 4, 260}, {17, 4096, 1, 4100}};
  uint64_t salt = 2000;
  for (const Shape& sh : shapes) {
    SCOPED_TRACE("M=" + std::to_string(sh.M) + " Dn=" + std::to_string(sh.Dn) + " G=" + std::to_string(sh.G));
    const Inputs in = make_inputs(sh.M, sh.Dn, sh.G, sh.ld_z, salt++);
    const GatedNormParams& p = in.p;
    const size_t n = size_t(p.M) * p.Dn;
    const size_t nws = gpu::gated_rmsnorm_bwd_workspace_floats(p);
    auto run = [&](size_t off) {  // every buffer starts `off` floats into its allocation
      auto put = [&](const std::vector<float>& h) { return to_device_at(h, off); };
      auto y_g = put(in.y), z_g = put(in.z), w_g = put(in.w), dout_g = put(in.dout), dw_g = put(in.dw0);
      auto out_g = put(std::vector<float>(n)), rstd_g = put(std::vector<float>(size_t(p.M) * p.G));
      auto dy_g = put(std::vector<float>(n)), dz_g = put(in.z), ws = put(std::vector<float>(nws));
      gpu::gated_rmsnorm_fwd(p, {.y = y_g.data() + off, .z = z_g.data() + off, .w = w_g.data() + off},
                             out_g.data() + off, rstd_g.data() + off, nullptr);
      gpu::gated_rmsnorm_bwd(p, {.y = y_g.data() + off, .z = z_g.data() + off, .w = w_g.data() + off},
                             rstd_g.data() + off, dout_g.data() + off,
                             {.dy = dy_g.data() + off, .dz = dz_g.data() + off, .dw = dw_g.data() + off},
                             ws.data() + off, nullptr);
      auto get = [&](const DeviceBuffer<float>& d) { return from_device_at(d, off); };
      return std::vector<std::vector<float>>{get(out_g), get(rstd_g), get(dy_g), get(dz_g), get(dw_g)};
    };
    test::expect_paths_bitwise_equal(run(0), run(1), {"out", "rstd", "dy", "dz", "dw"});
  }
}

TEST(GatedRmsNormGpu, RejectsBadShapes) {
  auto fwd = [](GatedNormParams p) { gpu::gated_rmsnorm_fwd(p, {}, static_cast<float*>(nullptr), nullptr, nullptr); };
  EXPECT_THROW(fwd(GatedNormParams{4, 10, 3, 10, 1e-5f}), Error);  // Dn % G != 0
  EXPECT_THROW(fwd(GatedNormParams{4, 10, 1, 8, 1e-5f}), Error);   // ld_z < Dn
  EXPECT_THROW(fwd(GatedNormParams{4, 8196, 1, 8196, 1e-5f}), Error);  // group of 8196 > 8192 channels
  EXPECT_THROW(
      gpu::gated_rmsnorm_bwd(GatedNormParams{4, 16392, 2, 16392, 1e-5f}, {}, nullptr, nullptr, {}, nullptr, nullptr),
      Error);  // group of 8196 > 8192 channels
}

}  // namespace
}  // namespace mlalpha
