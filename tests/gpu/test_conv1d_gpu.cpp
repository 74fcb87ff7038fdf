// gpu::conv1d_silu_fwd / conv1d_silu_bwd against the CPU reference in double: B = L = 1, L < W, widths
// 1..8 on both the float4 path (C % 4 == 0, ld_x % 4 == 0, aligned) and the scalar fallback (C or ld_x not a
// multiple of 4), ld_x > C with NaN in the unused columns (must be neither read nor written), ragged C and L
// (not multiples of the 128-channel / 128-step blocks, the 32-step thread tiles or the load groups),
// Mamba2-sized C = 2304 and the M model's C = 640; dw and dbias accumulated onto random values. Plus bitwise
// determinism, and the same bits from the float4 path and the scalar path (every buffer one float off).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
#include "ops/conv1d/conv1d.h"

namespace mlalpha {
namespace {

using test::all_close;
using test::cast_vec;
using test::from_device;
using test::poisoned;
using test::random_vec;
using test::rel_l2_close;
using test::from_device_at;
using test::to_device;
using test::to_device_at;

// x (B, L, ld_x): random in the first C columns, NaN in the others (a kernel reading them poisons y).
std::vector<float> strided_input(const Conv1dParams& p, std::mt19937_64& rng) {
  std::vector<float> x(size_t(p.B) * p.L * p.ld_x, std::numeric_limits<float>::quiet_NaN());
  const auto v = random_vec<float>(size_t(p.B) * p.L * p.C, rng);
  for (size_t r = 0; r < size_t(p.B) * p.L; ++r)
    for (int c = 0; c < p.C; ++c) x[r * p.ld_x + c] = v[r * p.C + c];
  return x;
}

void check_shape(const Conv1dParams& p, uint64_t salt) {
  SCOPED_TRACE("B=" + std::to_string(p.B) + " L=" + std::to_string(p.L) + " C=" + std::to_string(p.C) +
               " W=" + std::to_string(p.W) + " ld_x=" + std::to_string(p.ld_x));
  const size_t nx = size_t(p.B) * p.L * p.ld_x, ny = size_t(p.B) * p.L * p.C, nw = size_t(p.C) * p.W;
  auto rng = test::make_rng(salt);
  const auto x = strided_input(p, rng);
  const auto w = random_vec<float>(nw, rng), bias = random_vec<float>(p.C, rng);
  const auto dy = random_vec<float>(ny, rng), dw0 = random_vec<float>(nw, rng), db0 = random_vec<float>(p.C, rng);

  const auto xd = cast_vec<double>(x), wd = cast_vec<double>(w), bd = cast_vec<double>(bias), dyd = cast_vec<double>(dy);
  std::vector<double> y_ref(ny), dx_ref(nx, 0.0), dw_ref = cast_vec<double>(dw0), db_ref = cast_vec<double>(db0);
  ref::conv1d_silu_fwd<double>(p, {.x = xd.data(), .w = wd.data(), .bias = bd.data()}, y_ref.data());
  ref::conv1d_silu_bwd<double>(p, {.x = xd.data(), .w = wd.data(), .bias = bd.data()}, dyd.data(),
                               {.dx = dx_ref.data(), .dw = dw_ref.data(), .dbias = db_ref.data()});

  auto x_g = to_device(x), w_g = to_device(w), b_g = to_device(bias), dy_g = to_device(dy);
  auto y_g = poisoned(ny), dx_g = poisoned(nx), dw_g = to_device(dw0), db_g = to_device(db0);
  auto ws = poisoned(gpu::conv1d_silu_bwd_workspace_floats(p));  // must not rely on zeroed scratch
  gpu::conv1d_silu_fwd(p, {.x = x_g.data(), .w = w_g.data(), .bias = b_g.data()}, y_g.data(), nullptr);
  gpu::conv1d_silu_bwd(p, {.x = x_g.data(), .w = w_g.data(), .bias = b_g.data()}, dy_g.data(),
                       {.dx = dx_g.data(), .dw = dw_g.data(), .dbias = db_g.data()}, ws.data(), nullptr);

  EXPECT_TRUE(all_close(from_device(y_g), y_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "y"));
  // dx: compare the C used columns; the others must still hold the poison (0xFFFFFFFF)
  const auto dx = from_device(dx_g);
  std::vector<float> dx_used;
  std::vector<double> dx_ref_used;
  size_t touched = 0;
  for (size_t r = 0; r < size_t(p.B) * p.L; ++r)
    for (int c = 0; c < p.ld_x; ++c) {
      const size_t i = r * p.ld_x + c;
      if (c < p.C) {
        dx_used.push_back(dx[i]);
        dx_ref_used.push_back(dx_ref[i]);
      } else {
        uint32_t bits;
        std::memcpy(&bits, &dx[i], sizeof bits);
        touched += bits != 0xFFFFFFFFu;
      }
    }
  EXPECT_TRUE(all_close(dx_used, dx_ref_used, tol::kGpuElemAbs, tol::kGpuElemRel, "dx"));
  EXPECT_EQ(0u, touched) << "dx columns >= C were written";
  EXPECT_TRUE(rel_l2_close(from_device(dw_g), dw_ref, tol::kGpuReduceRelL2, "dw"));
  EXPECT_TRUE(rel_l2_close(from_device(db_g), db_ref, tol::kGpuReduceRelL2, "dbias"));
}

TEST(Conv1dGpu, MatchesReference) {
  const Conv1dParams shapes[] = {
      // B, L, C, W, ld_x                 float4 path: C % 4 == 0 and ld_x % 4 == 0; else scalar
      {1, 1, 1, 4, 1},         // B = L = C = 1 (scalar)
      {1, 1, 5, 4, 9},         // one step, strided (scalar)
      {3, 1, 128, 4, 132},     // L = 1 (float4)
      {2, 3, 7, 4, 20},        // L < W, ld_x > C (scalar)
      {3, 2, 70, 8, 70},       // L < W = 8 (scalar)
      {3, 5, 132, 8, 136},     // L < W = 8 (float4), a block of one quad after the first 128 channels
      {2, 9, 33, 1, 40},       // W = 1 (scalar)
      {2, 45, 36, 1, 40},      // W = 1 (float4), L not a multiple of the 8-step load group
      {2, 17, 65, 2, 65},      // W = 2 (scalar)
      {2, 70, 68, 2, 72},      // W = 2 (float4)
      {2, 40, 31, 3, 50},      // W = 3 (scalar)
      {1, 300, 260, 3, 264},   // W = 3 (float4), B = 1, ragged L over 3 blocks
      {1, 33, 64, 5, 64},      // W = 5 (float4), L one past a 32-step tile
      {3, 61, 200, 5, 202},    // W = 5, ld_x not a multiple of 4 (scalar)
      {2, 50, 19, 6, 23},      // W = 6 (scalar)
      {2, 99, 96, 6, 100},     // W = 6 (float4)
      {1, 129, 10, 7, 12},     // W = 7, L one past a 128-step block (scalar)
      {2, 131, 388, 7, 392},   // W = 7 (float4)
      {2, 200, 132, 8, 136},   // W = 8 (float4), tiles whose halo crosses block boundaries
      {4, 129, 130, 4, 300},   // ragged L and C, strided (scalar: C % 4 == 2)
      {2, 100, 64, 4, 66},     // C % 4 == 0 but ld_x % 4 != 0 (scalar)
      {3, 300, 384, 4, 900},   // S-config-like channels, x a slice of in_proj (ld_x = 900)
      {2, 300, 640, 4, 1160},  // M-config channels and row stride
      {2, 257, 2304, 4, 4384}, // L-config channels (d_inner + 2GN = 2304)
      {64, 256, 96, 4, 200},   // many (b, tile) partial blocks
  };
  uint64_t salt = 1;
  for (const Conv1dParams& p : shapes) check_shape(p, salt++);
}

// The float4 path and the scalar fallback use the same channel → thread map and the same arithmetic, so they
// must give the same bits: run each shape once on 16-byte aligned buffers and once with every buffer one float
// off (which forces the scalar path).
TEST(Conv1dGpu, VectorAndScalarPathsAgreeBitwise) {
  const Conv1dParams shapes[] = {
      {2, 257, 2304, 4, 4384}, {3, 100, 132, 8, 136}, {4, 45, 36, 1, 40}, {1, 300, 260, 3, 264}};
  uint64_t salt = 3000;
  for (const Conv1dParams& p : shapes) {
    SCOPED_TRACE("B=" + std::to_string(p.B) + " L=" + std::to_string(p.L) + " C=" + std::to_string(p.C) +
                 " W=" + std::to_string(p.W) + " ld_x=" + std::to_string(p.ld_x));
    const size_t ny = size_t(p.B) * p.L * p.C, nw = size_t(p.C) * p.W;
    auto rng = test::make_rng(salt++);
    const auto x = strided_input(p, rng);
    const auto w = random_vec<float>(nw, rng), bias = random_vec<float>(p.C, rng);
    const auto dy = random_vec<float>(ny, rng), dw0 = random_vec<float>(nw, rng), db0 = random_vec<float>(p.C, rng);
    const size_t nws = gpu::conv1d_silu_bwd_workspace_floats(p);
    auto run = [&](size_t off) {  // every buffer starts `off` floats into its allocation
      auto put = [&](const std::vector<float>& h) { return to_device_at(h, off); };
      auto x_g = put(x), w_g = put(w), b_g = put(bias), dy_g = put(dy), dw_g = put(dw0), db_g = put(db0);
      auto y_g = put(std::vector<float>(ny)), dx_g = put(x), ws = put(std::vector<float>(nws));
      gpu::conv1d_silu_fwd(p, {.x = x_g.data() + off, .w = w_g.data() + off, .bias = b_g.data() + off},
                           y_g.data() + off, nullptr);
      gpu::conv1d_silu_bwd(
          p, {.x = x_g.data() + off, .w = w_g.data() + off, .bias = b_g.data() + off}, dy_g.data() + off,
          {.dx = dx_g.data() + off, .dw = dw_g.data() + off, .dbias = db_g.data() + off}, ws.data() + off, nullptr);
      auto get = [&](const DeviceBuffer<float>& d) { return from_device_at(d, off); };
      return std::vector<std::vector<float>>{get(y_g), get(dx_g), get(dw_g), get(db_g)};
    };
    test::expect_paths_bitwise_equal(run(0), run(1), {"y", "dx", "dw", "dbias"});
  }
}

TEST(Conv1dGpu, DegenerateAndInvalid) {
  const Conv1dParams empty{0, 5, 8, 4, 8};
  EXPECT_EQ(0u, gpu::conv1d_silu_bwd_workspace_floats(empty));
  EXPECT_NO_THROW(gpu::conv1d_silu_fwd(empty, {}, nullptr, nullptr));
  EXPECT_NO_THROW(gpu::conv1d_silu_bwd(empty, {}, nullptr, {}, nullptr, nullptr));
  EXPECT_THROW(gpu::conv1d_silu_bwd_workspace_floats(Conv1dParams{1, 4, 8, 9, 8}), Error);  // W > 8
  EXPECT_THROW(gpu::conv1d_silu_bwd_workspace_floats(Conv1dParams{1, 4, 8, 4, 7}), Error);  // ld_x < C
}

TEST(Conv1dGpu, Deterministic) {
  const Conv1dParams p{8, 1000, 2304, 4, 4384};
  const size_t ny = size_t(p.B) * p.L * p.C, nw = size_t(p.C) * p.W;
  auto rng = test::make_rng(1000);
  const auto x = strided_input(p, rng);
  const auto w = random_vec<float>(nw, rng), bias = random_vec<float>(p.C, rng);
  const auto dy = random_vec<float>(ny, rng), dw0 = random_vec<float>(nw, rng), db0 = random_vec<float>(p.C, rng);
  auto run = [&] {
    auto x_g = to_device(x), w_g = to_device(w), b_g = to_device(bias), dy_g = to_device(dy);
    auto y_g = poisoned(ny), dx_g = poisoned(x.size()), dw_g = to_device(dw0), db_g = to_device(db0);
    auto ws = poisoned(gpu::conv1d_silu_bwd_workspace_floats(p));
    gpu::conv1d_silu_fwd(p, {.x = x_g.data(), .w = w_g.data(), .bias = b_g.data()}, y_g.data(), nullptr);
    gpu::conv1d_silu_bwd(p, {.x = x_g.data(), .w = w_g.data(), .bias = b_g.data()}, dy_g.data(),
                         {.dx = dx_g.data(), .dw = dw_g.data(), .dbias = db_g.data()}, ws.data(), nullptr);
    return std::vector<std::vector<float>>{from_device(y_g), from_device(dx_g), from_device(dw_g), from_device(db_g)};
  };
  const auto a = run(), b = run();
  const char* names[] = {"y", "dx", "dw", "dbias"};
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float))) << names[i];
  }
}

}  // namespace
}  // namespace mlalpha
