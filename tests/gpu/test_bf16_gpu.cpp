// The bf16 mode's conversions: every place that writes a bf16 GEMM operand must store exactly
// bf16_round (core/bf16.h, round to nearest even) of the fp32 value the fp32 path computes, so each is
// checked bitwise against the fp32 kernel's output rounded on the host: the cast op (ties, subnormals,
// ±Inf, NaN, unaligned tails), RMSNorm's forward and its backward's dx copy, the gated norm's forward, and
// AdamW's weight copy (a skipped step leaves it alone). The bf16 activations: in_proj's zx and out_proj's dx
// written in bf16 by cuBLASLt against the rounding of the same GEMM's fp32 output, and the element-wise ops
// that read them (conv1d + SiLU, softplus, the gated norm, forward and backward) bitwise the fp32 ops given the
// same values as floats, and against the CPU reference in double.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "core/bf16.h"
#include "core/mapped_buffer.h"
#include "ops/cast/cast.h"
#include "ops/conv1d/conv1d.h"
#include "ops/dt_softplus/dt_softplus.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/linear/linear.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "../tolerances.h"
#include "core/context.h"
#include "train/optim.h"

namespace mlalpha {
namespace {

using test::from_device;
using test::poisoned;
using test::random_vec;
using test::to_device;

DeviceBuffer<__nv_bfloat16> poisoned16(size_t n) {
  DeviceBuffer<__nv_bfloat16> d(n);
  d.fill_bytes(0xFF);  // 0xFFFF is a bf16 NaN
  return d;
}
// The stored bf16 values as the floats they represent (a bf16 is a float's upper 16 bits).
std::vector<float> from_device16(const DeviceBuffer<__nv_bfloat16>& d, size_t off = 0) {
  std::vector<__nv_bfloat16> h(d.size());
  MLALPHA_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), d.bytes(), cudaMemcpyDeviceToHost));
  std::vector<float> out(h.size() - off);
  for (size_t i = off; i < h.size(); ++i) {
    uint16_t b;
    std::memcpy(&b, &h[i], 2);
    const uint32_t f = uint32_t(b) << 16;
    std::memcpy(&out[i - off], &f, 4);
  }
  return out;
}
// Bitwise: got[i] has the bits of bf16_round(want[i]) (NaN: any NaN).
::testing::AssertionResult rounded_bitwise(const std::vector<float>& got, const std::vector<float>& want,
                                           const char* what) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": size differs";
  for (size_t i = 0; i < got.size(); ++i) {
    const float r = bf16_round(want[i]);
    if (std::isnan(r) && std::isnan(got[i])) continue;
    if (std::memcmp(&r, &got[i], 4) != 0)
      return ::testing::AssertionFailure() << what << "[" << i << "] = " << got[i] << ", want bf16(" << want[i]
                                           << ") = " << r;
  }
  return ::testing::AssertionSuccess();
}

// Host floats rounded to bf16 (bf16_round), as the bf16 values themselves on the device.
std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = bf16_round(x);
  return v;
}
DeviceBuffer<__nv_bfloat16> to_device16(const std::vector<float>& v) {  // v's values rounded to bf16
  std::vector<__nv_bfloat16> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float r = bf16_round(v[i]);
    uint32_t b;
    std::memcpy(&b, &r, 4);
    const uint16_t u = uint16_t(b >> 16);
    std::memcpy(&h[i], &u, 2);
  }
  DeviceBuffer<__nv_bfloat16> d(h.size());
  d.upload(h);
  return d;
}
// Distance in bf16 ulps between two bf16 values held as floats (same sign assumed where both are nonzero).
int ulps16(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  const auto ord = [](uint32_t u) { return (u & 0x80000000u) ? -int64_t((u & 0x7fffffffu) >> 16) : int64_t(u >> 16); };
  return int(std::llabs(ord(x) - ord(y)));
}

TEST(Bf16Gpu, CastRoundsToNearestEven) {
  auto rng = test::make_rng(1);
  std::vector<float> x = random_vec<float>(4099, rng, -3, 3);
  // ties (the lower 16 bits exactly 0x8000, even and odd upper halves), subnormals, huge values and specials
  const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x00008000u, 0x00018000u, 0x7f7fffffu,
                               0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0x00000001u, 0x80000000u};
  for (size_t i = 0; i < std::size(specials); ++i) std::memcpy(&x[i * 7], &specials[i], 4);
  for (const size_t off : {size_t(0), size_t(1)}) {  // vector and scalar paths (off = 1: unaligned)
    SCOPED_TRACE("offset " + std::to_string(off));
    DeviceBuffer<float> xd(x.size() + off);
    xd.upload(x.data(), x.size(), off);
    auto y = poisoned16(x.size() + off);
    gpu::cast_bf16(xd.data() + off, y.data() + off, x.size() - off, nullptr);
    const std::vector<float> want(x.begin(), x.end() - off);
    auto got = from_device16(y, off);
    got.resize(want.size());
    EXPECT_TRUE(rounded_bitwise(got, want, "cast"));
  }
}

TEST(Bf16Gpu, RmsNormWritesRoundedOperands) {
  for (const auto& [M, D] : {std::pair{513, 128}, std::pair{64, 1024}, std::pair{7, 37}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " D=" + std::to_string(D));
    const RmsNormParams p{M, D, 1e-5f};
    const size_t n = size_t(M) * D;
    auto rng = test::make_rng(uint64_t(M) * 31 + D);
    const auto x = to_device(random_vec<float>(n, rng)), w = to_device(random_vec<float>(D, rng, 0.5, 1.5));
    const auto dy = to_device(random_vec<float>(n, rng));
    const auto dx0 = random_vec<float>(n, rng);
    auto y = poisoned(n), rstd = poisoned(M), rstd16 = poisoned(M);
    auto y16 = poisoned16(n);
    gpu::rmsnorm_fwd(p, {.x = x.data(), .w = w.data()}, y.data(), rstd.data(), nullptr);
    gpu::rmsnorm_fwd(p, {.x = x.data(), .w = w.data()}, y16.data(), rstd16.data(), nullptr);
    EXPECT_TRUE(rounded_bitwise(from_device16(y16), from_device(y), "y"));
    EXPECT_TRUE(test::same_bits(from_device(rstd16), from_device(rstd))) << "rstd differs between the two outputs";
    for (const bool accumulate : {false, true}) {
      auto dx = to_device(dx0), dxb = to_device(dx0), dw = to_device(std::vector<float>(D, 0.f)),
           dwb = to_device(std::vector<float>(D, 0.f)), ws = poisoned(gpu::rmsnorm_bwd_workspace_floats(p));
      auto dx16 = poisoned16(n);
      gpu::rmsnorm_bwd(p, {.x = x.data(), .w = w.data()}, rstd.data(), dy.data(), {.dx = dx.data(), .dw = dw.data()},
                       accumulate, ws.data(), nullptr);
      gpu::rmsnorm_bwd(p, {.x = x.data(), .w = w.data()}, rstd.data(), dy.data(), {.dx = dxb.data(), .dw = dwb.data()},
                       accumulate, ws.data(), nullptr, dx16.data());
      const auto dxv = from_device(dx);
      EXPECT_TRUE(test::same_bits(from_device(dxb), dxv)) << "the bf16 copy changed dx";
      EXPECT_TRUE(test::same_bits(from_device(dwb), from_device(dw))) << "the bf16 copy changed dw";
      EXPECT_TRUE(rounded_bitwise(from_device16(dx16), dxv, accumulate ? "dx16 (accumulated)" : "dx16"));
    }
  }
}

TEST(Bf16Gpu, GatedNormWritesRoundedOperand) {
  for (const auto& [M, Dn, G] : {std::tuple{300, 256, 1}, std::tuple{65, 512, 4}, std::tuple{9, 30, 3}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " Dn=" + std::to_string(Dn) + " G=" + std::to_string(G));
    const int ld_z = Dn + 8;
    const GatedNormParams p{M, Dn, G, ld_z, 1e-5f};
    auto rng = test::make_rng(uint64_t(M) * 7 + Dn);
    const auto y = to_device(random_vec<float>(size_t(M) * Dn, rng));
    const auto z = to_device(random_vec<float>(size_t(M) * ld_z, rng, -4, 4));
    const auto w = to_device(random_vec<float>(Dn, rng, 0.5, 1.5));
    auto out = poisoned(size_t(M) * Dn), rstd = poisoned(size_t(M) * G), rstd16 = poisoned(size_t(M) * G);
    auto out16 = poisoned16(size_t(M) * Dn);
    gpu::gated_rmsnorm_fwd(p, {.y = y.data(), .z = z.data(), .w = w.data()}, out.data(), rstd.data(), nullptr);
    gpu::gated_rmsnorm_fwd(p, {.y = y.data(), .z = z.data(), .w = w.data()}, out16.data(), rstd16.data(), nullptr);
    EXPECT_TRUE(rounded_bitwise(from_device16(out16), from_device(out), "out"));
    EXPECT_TRUE(test::same_bits(from_device(rstd16), from_device(rstd)));
  }
}

// The three producers of in_proj's dy in bf16 mode write their column slices of one (M, ld) buffer: each
// slice is the fp32 result rounded, every other column is left alone (still poison), and the parameter
// gradients they also produce are bitwise those of the fp32 call.
TEST(Bf16Gpu, InProjDyProducersWriteRoundedSlices) {
  const int B = 3, L = 70, H = 8, di = 64, C = 96, ld = di + C + H + 4;  // z | xBC | dt | spare columns
  const int M = B * L;
  auto rng = test::make_rng(21);
  const auto zx = to_device(random_vec<float>(size_t(M) * ld, rng, -3, 3));
  const auto dg = to_device(random_vec<float>(size_t(M) * di, rng)), y = to_device(random_vec<float>(size_t(M) * di, rng));
  const auto gw = to_device(random_vec<float>(di, rng, 0.5, 1.5)), grstd = to_device(random_vec<float>(M, rng, 0.5, 2));
  const auto ddelta = to_device(random_vec<float>(size_t(M) * H, rng)), dt_bias = to_device(random_vec<float>(H, rng));
  const auto dxbc = to_device(random_vec<float>(size_t(M) * C, rng)), cw = to_device(random_vec<float>(size_t(C) * 4, rng));
  const auto cb = to_device(random_vec<float>(C, rng));
  const GatedNormParams gp{M, di, 1, ld, 1e-5f};
  const DtParams dp{M, H, ld, 1e-3f, std::numeric_limits<float>::infinity()};
  const Conv1dParams cp{B, L, C, 4, ld};
  const size_t ws_n = std::max({gpu::gated_rmsnorm_bwd_workspace_floats(gp), gpu::dt_softplus_bwd_workspace_floats(dp),
                                gpu::conv1d_silu_bwd_workspace_floats(cp)});
  auto ws = poisoned(ws_n);
  auto dz32 = poisoned(size_t(M) * ld);
  auto d16 = poisoned16(size_t(M) * ld);
  auto dy_a = poisoned(size_t(M) * di), dy_b = poisoned(size_t(M) * di);
  std::vector<std::vector<float>> params(2);
  for (int pass = 0; pass < 2; ++pass) {
    const bool bf = pass == 1;
    auto gwd = to_device(std::vector<float>(di, 0.f)), dtb = to_device(std::vector<float>(H, 0.f));
    auto cdw = to_device(std::vector<float>(size_t(C) * 4, 0.f)), cdb = to_device(std::vector<float>(C, 0.f));
    gpu::gated_rmsnorm_bwd(gp, {.y = y.data(), .z = zx.data(), .w = gw.data()}, grstd.data(), dg.data(),
                           {.dy = (bf ? dy_b : dy_a).data(), .dz = bf ? nullptr : dz32.data(), .dw = gwd.data()},
                           ws.data(), nullptr, bf ? d16.data() : nullptr);
    gpu::dt_softplus_bwd(dp, {.dt = zx.data() + di + C, .dt_bias = dt_bias.data()}, ddelta.data(),
                         {.ddt = bf ? nullptr : dz32.data() + di + C, .ddt_bias = dtb.data()}, ws.data(), nullptr,
                         bf ? d16.data() + di + C : nullptr);
    gpu::conv1d_silu_bwd(cp, {.x = zx.data() + di, .w = cw.data(), .bias = cb.data()}, dxbc.data(),
                         {.dx = bf ? nullptr : dz32.data() + di, .dw = cdw.data(), .dbias = cdb.data()}, ws.data(),
                         nullptr, bf ? d16.data() + di : nullptr);
    for (auto* b : {&gwd, &dtb, &cdw, &cdb}) {
      const auto v = from_device(*b);
      params[size_t(pass)].insert(params[size_t(pass)].end(), v.begin(), v.end());
    }
  }
  EXPECT_TRUE(test::same_bits(params[1], params[0])) << "parameter gradients differ between fp32 and bf16 dy";
  EXPECT_TRUE(test::same_bits(from_device(dy_b), from_device(dy_a))) << "the gated norm's dy differs";
  const auto want = from_device(dz32), got = from_device16(d16);
  std::vector<float> w_used, g_used;
  for (int m = 0; m < M; ++m)
    for (int c = 0; c < ld; ++c) {
      const size_t i = size_t(m) * ld + c;
      if (c < di + C + H) {
        w_used.push_back(want[i]);
        g_used.push_back(got[i]);
      } else {
        ASSERT_TRUE(std::isnan(got[i])) << "spare column " << c << " of row " << m << " was written";
      }
    }
  EXPECT_TRUE(rounded_bitwise(g_used, w_used, "dzx16"));
}

// in_proj's zx and out_proj's dx in bf16 (cuBLASLt's D type bf16): each element is the round-to-nearest-even of the
// fp32 sum that the same GEMM writes with an fp32 output. The two outputs are separate plans (the heuristic may
// pick another kernel, another summation order), so the test measures how many elements differ and by how many
// bf16 ulps, prints it, and requires <= kMaxUlps. Shapes: S's and M's in_proj and out_proj, and ragged ones.
TEST(Bf16Gpu, GemmBf16OutputIsTheRoundedFp32Output) {
  constexpr int kMaxUlps = 1;
  Context ctx;
  gpu::Gemm g(ctx, Precision::BF16);
  struct Shape { const char* what; int M, IN, OUT; bool dx; };
  const Shape shapes[] = {{"S in_proj", 16384, 128, 648, false}, {"M in_proj", 16384, 256, 1160, false},
                          {"S out_proj dx", 16384, 256, 128, true}, {"M out_proj dx", 16384, 512, 256, true},
                          {"ragged in_proj", 333, 40, 88, false}, {"ragged dx", 77, 24, 16, true}};
  uint64_t salt = 100;
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(sh.what);
    auto rng = test::make_rng(salt++);
    const LinearParams p{sh.M, sh.IN, sh.OUT};
    // forward: y (M, OUT) = x (M, IN) · wᵀ; dx: dx (M, IN) = dy (M, OUT) · w
    const size_t nin = size_t(sh.M) * (sh.dx ? sh.OUT : sh.IN), nout = size_t(sh.M) * (sh.dx ? sh.IN : sh.OUT);
    const auto a = to_device16(random_vec<float>(nin, rng));
    const auto w = to_device16(random_vec<float>(size_t(sh.OUT) * sh.IN, rng, -0.2, 0.2));
    auto y32 = poisoned(nout);
    auto y16 = poisoned16(nout);
    if (sh.dx) {
      gpu::linear_bwd(g, p, gpu::LinearInputsBf16{nullptr, w.data(), nullptr}, gpu::LinearDyBf16{a.data(), nullptr},
                      {.dx = y32.data()}, nullptr,
                      ctx.stream());
      gpu::linear_bwd_dx(g, p, w.data(), a.data(), y16.data(), ctx.stream());
    } else {
      gpu::linear_fwd(g, p, gpu::LinearInputsBf16{a.data(), w.data(), nullptr}, y32.data(), ctx.stream());
      gpu::linear_fwd(g, p, gpu::LinearInputsBf16{a.data(), w.data(), nullptr}, y16.data(), ctx.stream());
    }
    ctx.synchronize();
    const auto want = from_device(y32), got = from_device16(y16);
    size_t differ = 0;
    int worst = 0;
    for (size_t i = 0; i < nout; ++i) {
      const int u = ulps16(got[i], bf16_round(want[i]));
      differ += u != 0;
      worst = std::max(worst, u);
    }
    std::printf("bf16-output GEMM, %s (M %d, IN %d, OUT %d): %zu of %zu elements differ from the rounded fp32 "
                "output, at most %d bf16 ulp\n", sh.what, sh.M, sh.IN, sh.OUT, differ, nout, worst);
    EXPECT_LE(worst, kMaxUlps);
  }
  for (const std::string& d : g.plan_descriptions()) std::printf("  plan: %s\n", d.c_str());
  // a bias has no place in the bf16 output (no epilogue for it is planned)
  DeviceBuffer<float> b(8);
  auto y = poisoned16(8 * 8);
  const auto x = to_device16(std::vector<float>(64, 1.f));
  EXPECT_THROW(gpu::linear_fwd(g, LinearParams{8, 8, 8}, gpu::LinearInputsBf16{x.data(), x.data(), b.data()}, y.data(),
                               ctx.stream()),
               Error);
}

// The element-wise ops reading bf16 activations (in_proj's zx: conv's xBC, softplus's dt, the gated norm's z; out_proj's
// bf16 dx: the gated norm's dout): given bf16 values, every output is bitwise the fp32 op's on the same values as
// floats (the bf16 outputs its rounding), the columns outside the slices untouched, and all against the CPU
// reference in double on those values (fresh random inputs, outputs poisoned). float4 / 8-byte and scalar paths.
std::vector<float> strided(size_t rows, int cols, int ld, const std::vector<float>& v) {  // NaN outside the slice
  std::vector<float> out(rows * ld, std::numeric_limits<float>::quiet_NaN());
  for (size_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[r * ld + c] = v[r * cols + c];
  return out;
}
// got (bf16 values as floats) against the double reference: each within a bf16 rounding (2^-8 relative) plus the
// fp32 elementwise tolerance.
::testing::AssertionResult close16(const std::vector<float>& got, const std::vector<double>& ref, const char* what) {
  return test::all_close(got, ref, tol::kGpuElemAbs, std::ldexp(1.0, -8) + tol::kGpuElemRel, what);
}

TEST(Bf16Gpu, ConvReadsBf16Input) {
  const Conv1dParams shapes[] = {{3, 300, 384, 4, 648},  // S: xBC of zx (float4 / 8-byte path)
                                 {2, 131, 640, 4, 1160},  // M's channels
                                 {2, 45, 37, 4, 50},      // scalar path
                                 {2, 70, 68, 8, 72}};     // W = 8
  uint64_t salt = 40;
  for (const Conv1dParams& p : shapes) {
    for (const bool with_window : {false, true}) {
      SCOPED_TRACE("B=" + std::to_string(p.B) + " L=" + std::to_string(p.L) + " C=" + std::to_string(p.C) +
                   " W=" + std::to_string(p.W) + (with_window ? " window0" : ""));
      auto rng = test::make_rng(salt++);
      const size_t rows = size_t(p.B) * p.L, nx = rows * p.ld_x, ny = rows * p.C, nw = size_t(p.C) * p.W;
      const size_t nwin = size_t(p.B) * (p.W - 1) * p.C;
      const auto xr = strided(rows, p.C, p.ld_x, rounded(random_vec<float>(ny, rng, -3, 3)));  // bf16 values
      const auto w = random_vec<float>(nw, rng), bias = random_vec<float>(p.C, rng), dy = random_vec<float>(ny, rng);
      const auto win = random_vec<float>(nwin, rng);
      const auto x32 = to_device(xr), w_g = to_device(w), b_g = to_device(bias), dy_g = to_device(dy),
                 win_g = to_device(win);
      const auto x16 = to_device16(xr);  // NaN stays NaN in the unused columns
      const Conv1dInputs<float> in32{.x = x32.data(), .w = w_g.data(), .bias = b_g.data(),
                                     .window0 = with_window ? win_g.data() : nullptr};
      Conv1dInputs<float> in16 = in32;
      in16.x = nullptr;
      auto y32 = poisoned(ny), y16 = poisoned(ny), wl32 = poisoned(nwin), wl16 = poisoned(nwin);
      in16.window_last = with_window ? wl16.data() : nullptr;
      Conv1dInputs<float> in32w = in32;
      in32w.window_last = with_window ? wl32.data() : nullptr;
      gpu::conv1d_silu_fwd(p, in32w, y32.data(), nullptr);
      gpu::conv1d_silu_fwd(p, x16.data(), in16, y16.data(), nullptr);
      const size_t nws = gpu::conv1d_silu_bwd_workspace_floats(p);
      auto ws = poisoned(nws);
      auto dw32 = to_device(std::vector<float>(nw, 0.f)), db32 = to_device(std::vector<float>(p.C, 0.f));
      auto dw16 = to_device(std::vector<float>(nw, 0.f)), db16 = to_device(std::vector<float>(p.C, 0.f));
      auto dx32 = poisoned(nx);
      auto dx16 = poisoned16(nx);
      gpu::conv1d_silu_bwd(p, in32, dy_g.data(), {.dx = dx32.data(), .dw = dw32.data(), .dbias = db32.data()}, ws.data(),
                           nullptr);
      gpu::conv1d_silu_bwd(p, x16.data(), in16, dy_g.data(), {.dw = dw16.data(), .dbias = db16.data()}, ws.data(),
                           nullptr, dx16.data());
      const auto y = from_device(y16);
      EXPECT_TRUE(test::same_bits(y, from_device(y32))) << "y";
      if (with_window) EXPECT_TRUE(test::same_bits(from_device(wl16), from_device(wl32))) << "window_last";
      EXPECT_TRUE(test::same_bits(from_device(dw16), from_device(dw32))) << "dw";
      EXPECT_TRUE(test::same_bits(from_device(db16), from_device(db32))) << "dbias";
      const auto dx = from_device16(dx16), dxw = from_device(dx32);
      std::vector<float> dx_used, dxw_used;
      std::vector<double> dx_ref_used;
      // the double reference on the same (bf16) values
      const auto xd = test::cast_vec<double>(xr), wd = test::cast_vec<double>(w), bd = test::cast_vec<double>(bias),
                 dyd = test::cast_vec<double>(dy), wind = test::cast_vec<double>(win);
      std::vector<double> y_ref(ny), dx_ref(nx, 0.0), dw_ref(nw, 0.0), db_ref(p.C, 0.0);
      const Conv1dInputs<double> ind{.x = xd.data(), .w = wd.data(), .bias = bd.data(),
                                     .window0 = with_window ? wind.data() : nullptr};
      ref::conv1d_silu_fwd<double>(p, ind, y_ref.data());
      ref::conv1d_silu_bwd<double>(p, ind, dyd.data(), {.dx = dx_ref.data(), .dw = dw_ref.data(), .dbias = db_ref.data()});
      for (size_t r = 0; r < rows; ++r)
        for (int c = 0; c < p.ld_x; ++c) {
          const size_t i = r * p.ld_x + c;
          if (c < p.C) {
            dx_used.push_back(dx[i]), dxw_used.push_back(dxw[i]), dx_ref_used.push_back(dx_ref[i]);
          } else {
            ASSERT_TRUE(std::isnan(dx[i])) << "dx column " << c << " (outside the slice) was written";
          }
        }
      EXPECT_TRUE(rounded_bitwise(dx_used, dxw_used, "dx16"));
      EXPECT_TRUE(test::all_close(y, y_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "y vs reference"));
      EXPECT_TRUE(close16(dx_used, dx_ref_used, "dx16 vs reference"));
      EXPECT_TRUE(test::rel_l2_close(from_device(dw16), dw_ref, tol::kGpuReduceRelL2, "dw vs reference"));
      EXPECT_TRUE(test::rel_l2_close(from_device(db16), db_ref, tol::kGpuReduceRelL2, "dbias vs reference"));
    }
  }
}

// conv1d + SiLU writing xbc in bf16 (conv1d_silu_fwd_bf16: the SSD walks' x, B, C): each element the round to
// nearest even of the fp32 output of the same call, on the 8-byte path (S's and M's channels) and the scalar path,
// W = 4 and 8, with and without a carried window (window_last the same fp32 bits).
TEST(Bf16Gpu, ConvWritesBf16Output) {
  const Conv1dParams shapes[] = {{3, 300, 384, 4, 648},  // S: xBC of zx, xbc (M, 384)
                                 {2, 131, 640, 4, 1160},  // M's channels
                                 {2, 45, 37, 4, 50},      // scalar path
                                 {2, 70, 68, 8, 72}};     // W = 8
  uint64_t salt = 60;
  for (const Conv1dParams& p : shapes) {
    for (const bool with_window : {false, true}) {
      SCOPED_TRACE("B=" + std::to_string(p.B) + " L=" + std::to_string(p.L) + " C=" + std::to_string(p.C) +
                   " W=" + std::to_string(p.W) + (with_window ? " window0" : ""));
      auto rng = test::make_rng(salt++);
      const size_t rows = size_t(p.B) * p.L, ny = rows * p.C, nw = size_t(p.C) * p.W;
      const size_t nwin = size_t(p.B) * (p.W - 1) * p.C;
      const auto xr = strided(rows, p.C, p.ld_x, rounded(random_vec<float>(ny, rng, -3, 3)));  // bf16 values
      const auto w = random_vec<float>(nw, rng), bias = random_vec<float>(p.C, rng);
      const auto win = random_vec<float>(nwin, rng);
      const auto w_g = to_device(w), b_g = to_device(bias), win_g = to_device(win);
      const auto x16 = to_device16(xr);
      auto y32 = poisoned(ny), wl32 = poisoned(nwin), wl16 = poisoned(nwin);
      auto y16 = poisoned16(ny);
      const Conv1dInputs<float> in{.w = w_g.data(), .bias = b_g.data(), .window0 = with_window ? win_g.data() : nullptr};
      Conv1dInputs<float> in32 = in, in16 = in;
      in32.window_last = with_window ? wl32.data() : nullptr;
      in16.window_last = with_window ? wl16.data() : nullptr;
      gpu::conv1d_silu_fwd(p, x16.data(), in32, y32.data(), nullptr);
      gpu::conv1d_silu_fwd_bf16(p, x16.data(), in16, y16.data(), nullptr);
      EXPECT_TRUE(rounded_bitwise(from_device16(y16), from_device(y32), "y16"));
      if (with_window) EXPECT_TRUE(test::same_bits(from_device(wl16), from_device(wl32))) << "window_last";
    }
  }
}

TEST(Bf16Gpu, SoftplusReadsBf16Input) {
  for (const auto& [M, H, ld] : {std::tuple{16384, 8, 648}, std::tuple{1000, 40, 45}, std::tuple{7, 3, 3}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " H=" + std::to_string(H) + " ld=" + std::to_string(ld));
    const DtParams p{M, H, ld, 1e-3f, 0.5f};  // both clamps active somewhere
    auto rng = test::make_rng(uint64_t(M) + H);
    const auto dtr = strided(M, H, ld, rounded(random_vec<float>(size_t(M) * H, rng, -8, 3)));
    const auto bias = random_vec<float>(H, rng, -2, 1), dd = random_vec<float>(size_t(M) * H, rng);
    const auto dt32 = to_device(dtr), b_g = to_device(bias), dd_g = to_device(dd);
    const auto dt16 = to_device16(dtr);
    auto d32 = poisoned(size_t(M) * H), d16 = poisoned(size_t(M) * H);
    gpu::dt_softplus_fwd(p, DtInputs<float>{.dt = dt32.data(), .dt_bias = b_g.data()}, d32.data(), nullptr);
    gpu::dt_softplus_fwd(p, gpu::DtInputsBf16{.dt = dt16.data(), .dt_bias = b_g.data()}, d16.data(), nullptr);
    auto ws = poisoned(gpu::dt_softplus_bwd_workspace_floats(p));
    auto db32 = to_device(std::vector<float>(H, 0.f)), db16 = to_device(std::vector<float>(H, 0.f));
    auto ddt32 = poisoned(size_t(M) * ld);
    auto ddt16 = poisoned16(size_t(M) * ld);
    gpu::dt_softplus_bwd(p, DtInputs<float>{.dt = dt32.data(), .dt_bias = b_g.data()}, dd_g.data(),
                         {.ddt = ddt32.data(), .ddt_bias = db32.data()}, ws.data(), nullptr);
    gpu::dt_softplus_bwd(p, gpu::DtInputsBf16{.dt = dt16.data(), .dt_bias = b_g.data()}, dd_g.data(),
                         {.ddt_bias = db16.data()}, ws.data(), nullptr, ddt16.data());
    const auto delta = from_device(d16);
    EXPECT_TRUE(test::same_bits(delta, from_device(d32))) << "delta";
    EXPECT_TRUE(test::same_bits(from_device(db16), from_device(db32))) << "ddt_bias";
    const auto dtd = test::cast_vec<double>(dtr), bd = test::cast_vec<double>(bias), ddd = test::cast_vec<double>(dd);
    std::vector<double> delta_ref(size_t(M) * H), ddt_ref(size_t(M) * ld, 0.0), db_ref(H, 0.0);
    ref::dt_softplus_fwd<double>({M, H, ld, 1e-3, 0.5}, {dtd.data(), bd.data()}, delta_ref.data());
    ref::dt_softplus_bwd<double>({M, H, ld, 1e-3, 0.5}, {dtd.data(), bd.data()}, ddd.data(),
                                 {ddt_ref.data(), db_ref.data()});
    const auto g16 = from_device16(ddt16), g32 = from_device(ddt32);
    std::vector<float> got, want;
    std::vector<double> ref_used;
    for (int m = 0; m < M; ++m)
      for (int c = 0; c < ld; ++c) {
        const size_t i = size_t(m) * ld + c;
        if (c < H) got.push_back(g16[i]), want.push_back(g32[i]), ref_used.push_back(ddt_ref[i]);
        else ASSERT_TRUE(std::isnan(g16[i])) << "ddt column " << c << " (outside the slice) was written";
      }
    EXPECT_TRUE(rounded_bitwise(got, want, "ddt16"));
    EXPECT_TRUE(test::all_close(delta, delta_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "delta vs reference"));
    EXPECT_TRUE(close16(got, ref_used, "ddt16 vs reference"));
    EXPECT_TRUE(test::rel_l2_close(from_device(db16), db_ref, tol::kGpuReduceRelL2, "ddt_bias vs reference"));
  }
}

// conv1d_dt_fwd_bf16 / conv1d_dt_bwd_bf16 (the conv and the softplus joined in one launch) against the two ops'
// own launches, bitwise, on fresh random inputs with every output poisoned: xBC and dt as column slices of one
// bf16 zx (the model's layout), the model-like shape (H = 8: the 8-head tile) and H = 40 (the 32-head tile),
// widths 4 and 2, a carried window (window0, window_last, dwindow0) in one case, and odd L (partial tiles).
TEST(Bf16Gpu, ConvSoftplusJoinedIsBitwiseTheTwoLaunches) {
  struct Case { int B, L, C, W, H; bool carry; };
  for (const Case cs : {Case{2, 200, 640, 4, 8, false}, Case{3, 77, 256, 2, 40, true}, Case{1, 300, 384, 4, 8, true}}) {
    SCOPED_TRACE("B=" + std::to_string(cs.B) + " L=" + std::to_string(cs.L) + " C=" + std::to_string(cs.C) +
                 " W=" + std::to_string(cs.W) + " H=" + std::to_string(cs.H));
    const int ld = cs.C + cs.H + 4, M = cs.B * cs.L;  // zx row: xBC (C), dt (H), 4 more columns
    auto rng = test::make_rng(uint64_t(cs.C * 31 + cs.H));
    const Conv1dParams p{.B = cs.B, .L = cs.L, .C = cs.C, .W = cs.W, .ld_x = ld};
    const DtParams dp{M, cs.H, ld, 0.0f, std::numeric_limits<float>::infinity()};
    auto zx16 = to_device16(random_vec<float>(size_t(M) * ld, rng, -3.0, 3.0));
    auto w = to_device(random_vec<float>(size_t(cs.C) * cs.W, rng)), bias = to_device(random_vec<float>(cs.C, rng));
    auto dtb = to_device(random_vec<float>(cs.H, rng));
    const size_t nwin = size_t(cs.B) * (cs.W - 1) * cs.C;
    auto win0 = to_device(random_vec<float>(nwin, rng));
    auto dy = to_device(random_vec<float>(size_t(M) * cs.C, rng)), ddelta = to_device(random_vec<float>(size_t(M) * cs.H, rng));
    const auto dw0 = random_vec<float>(size_t(cs.C) * cs.W, rng), db0 = random_vec<float>(cs.C, rng),
               dtb0 = random_vec<float>(cs.H, rng);
    const __nv_bfloat16* xbc = zx16.data();
    const __nv_bfloat16* dt = zx16.data() + cs.C;
    const gpu::DtInputsBf16 din{.dt = dt, .dt_bias = dtb.data()};
    struct Out {
      std::vector<float> y, y16, delta, wl, dx16, ddt16, dw, db, dtbias, dwin;
    };
    auto run = [&](bool joined) {
      Out o;
      auto y = poisoned(size_t(M) * cs.C), delta = poisoned(size_t(M) * cs.H), wl = poisoned(nwin);
      auto y16 = poisoned16(size_t(M) * cs.C);
      Conv1dInputs<float> in{.w = w.data(), .bias = bias.data()};
      if (cs.carry) in.window0 = win0.data(), in.window_last = wl.data();
      if (joined) {
        gpu::conv1d_dt_fwd_bf16(p, xbc, in, y.data(), dp, din, delta.data(), nullptr);
        o.delta = from_device(delta);
        delta.fill_bytes(0xFF);
        gpu::conv1d_dt_fwd_bf16(p, xbc, in, y16.data(), dp, din, delta.data(), nullptr);
      } else {
        gpu::conv1d_silu_fwd(p, xbc, in, y.data(), nullptr);
        gpu::dt_softplus_fwd(dp, din, delta.data(), nullptr);
        o.delta = from_device(delta);
        delta.fill_bytes(0xFF);
        gpu::conv1d_silu_fwd_bf16(p, xbc, in, y16.data(), nullptr);
        gpu::dt_softplus_fwd(dp, din, delta.data(), nullptr);
      }
      MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(o.delta, from_device(delta)) << "the second forward's delta";
      o.y = from_device(y), o.y16 = from_device16(y16), o.wl = from_device(wl);
      auto dx16 = poisoned16(size_t(M) * ld), ddt16 = poisoned16(size_t(M) * ld);
      auto dw = to_device(dw0), db = to_device(db0), dtbias = to_device(dtb0), dwin = poisoned(nwin);
      auto ws = poisoned(gpu::conv1d_silu_bwd_workspace_floats(p)), wsd = poisoned(gpu::dt_softplus_bwd_workspace_floats(dp));
      const Conv1dInputs<float> bin{.w = w.data(), .bias = bias.data(), .window0 = cs.carry ? win0.data() : nullptr};
      const Conv1dGrads<float> g{.dw = dw.data(), .dbias = db.data(), .dwindow0 = cs.carry ? dwin.data() : nullptr};
      if (joined)
        gpu::conv1d_dt_bwd_bf16(p, xbc, bin, dy.data(), g, ws.data(), dx16.data(), dp, din, ddelta.data(),
                                dtbias.data(), wsd.data(), ddt16.data() + cs.C, nullptr);
      else {
        gpu::dt_softplus_bwd(dp, din, ddelta.data(), {.ddt_bias = dtbias.data()}, wsd.data(), nullptr,
                             ddt16.data() + cs.C);
        gpu::conv1d_silu_bwd(p, xbc, bin, dy.data(), g, ws.data(), nullptr, dx16.data());
      }
      MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
      o.dx16 = from_device16(dx16), o.ddt16 = from_device16(ddt16), o.dw = from_device(dw), o.db = from_device(db);
      o.dtbias = from_device(dtbias), o.dwin = from_device(dwin);
      return o;
    };
    const Out a = run(false), b = run(true);
    auto same = [](const std::vector<float>& x, const std::vector<float>& y, const char* what) {
      ASSERT_EQ(x.size(), y.size()) << what;
      EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * 4)) << what << " differs in its bits";
    };
    same(a.y, b.y, "y"), same(a.y16, b.y16, "y16"), same(a.delta, b.delta, "delta"), same(a.wl, b.wl, "window_last");
    same(a.dx16, b.dx16, "dx16"), same(a.ddt16, b.ddt16, "ddt16"), same(a.dw, b.dw, "dw"), same(a.db, b.db, "dbias");
    same(a.dtbias, b.dtbias, "ddt_bias"), same(a.dwin, b.dwin, "dwindow0");
    // the outputs were written (not left poisoned): a test that cannot fail is a defect
    EXPECT_FALSE(std::isnan(b.y[0]) || std::isnan(b.delta[size_t(M) * cs.H - 1]) || std::isnan(b.dx16[0]) ||
                 std::isnan(b.ddt16[cs.C]) || std::isnan(b.y16[size_t(M) * cs.C - 1]));
    EXPECT_NE(b.dtbias, dtb0);
  }
}

TEST(Bf16Gpu, GatedNormReadsBf16Inputs) {
  for (const auto& [M, Dn, G, ld] : {std::tuple{16384, 256, 1, 648}, std::tuple{300, 512, 4, 1160},
                                     std::tuple{65, 30, 3, 33}}) {
    for (const bool dout16 : {false, true}) {
      SCOPED_TRACE("M=" + std::to_string(M) + " Dn=" + std::to_string(Dn) + " G=" + std::to_string(G) +
                   (dout16 ? " bf16 dout" : " fp32 dout"));
      const GatedNormParams p{M, Dn, G, ld, 1e-5f};
      const size_t n = size_t(M) * Dn;
      auto rng = test::make_rng(uint64_t(M) * 3 + Dn + dout16);
      const auto y = rounded(random_vec<float>(n, rng));  // y and z as the SSD and in_proj write them in bf16
      const auto zr = strided(M, Dn, ld, rounded(random_vec<float>(n, rng, -4, 4)));
      const auto w = random_vec<float>(Dn, rng, 0.5, 1.5);
      auto dout = random_vec<float>(n, rng);
      if (dout16) dout = rounded(dout);
      const auto y_g = to_device(y), z32 = to_device(zr), w_g = to_device(w), do32 = to_device(dout);
      const auto y16 = to_device16(y), z16 = to_device16(zr), do16 = to_device16(dout);
      auto out32 = poisoned(n), rstd32 = poisoned(size_t(M) * G), rstd16 = poisoned(size_t(M) * G);
      auto out16 = poisoned16(n);
      gpu::gated_rmsnorm_fwd(p, GatedNormInputs<float>{.y = y_g.data(), .z = z32.data(), .w = w_g.data()}, out32.data(),
                             rstd32.data(), nullptr);
      gpu::gated_rmsnorm_fwd(p, gpu::GatedNormInputsBf16{.y = y16.data(), .z = z16.data(), .w = w_g.data()},
                             out16.data(), rstd16.data(), nullptr);
      const auto rstd = from_device(rstd16);
      EXPECT_TRUE(test::same_bits(rstd, from_device(rstd32))) << "rstd";
      EXPECT_TRUE(rounded_bitwise(from_device16(out16), from_device(out32), "out16"));
      auto ws = poisoned(gpu::gated_rmsnorm_bwd_workspace_floats(p));
      auto dy32 = poisoned(n), dy16 = poisoned(n), dz32 = poisoned(size_t(M) * ld);
      auto dz16 = poisoned16(size_t(M) * ld);
      auto dw32 = to_device(std::vector<float>(Dn, 0.f)), dw16 = to_device(std::vector<float>(Dn, 0.f));
      gpu::gated_rmsnorm_bwd(p, GatedNormInputs<float>{.y = y_g.data(), .z = z32.data(), .w = w_g.data()},
                             rstd32.data(), do32.data(), {.dy = dy32.data(), .dz = dz32.data(), .dw = dw32.data()},
                             ws.data(), nullptr);
      const gpu::GatedNormInputsBf16 in16{.y = y16.data(), .z = z16.data(), .w = w_g.data()};
      if (dout16)
        gpu::gated_rmsnorm_bwd(p, in16, rstd16.data(), do16.data(), {.dy = dy16.data(), .dw = dw16.data()}, ws.data(),
                               nullptr, dz16.data());
      else
        gpu::gated_rmsnorm_bwd(p, in16, rstd16.data(), do32.data(), {.dy = dy16.data(), .dw = dw16.data()}, ws.data(),
                               nullptr, dz16.data());
      const auto dy = from_device(dy16);
      EXPECT_TRUE(test::same_bits(dy, from_device(dy32))) << "dy";
      EXPECT_TRUE(test::same_bits(from_device(dw16), from_device(dw32))) << "dw";
      // the double reference on the same values
      const auto yd = test::cast_vec<double>(y), zd = test::cast_vec<double>(zr), wd = test::cast_vec<double>(w),
                 dd = test::cast_vec<double>(dout);
      std::vector<double> out_ref(n), rstd_ref(size_t(M) * G), dy_ref(n), dz_ref(size_t(M) * ld, 0.0), dw_ref(Dn, 0.0);
      const GatedNormParams pd = p;
      ref::gated_rmsnorm_fwd<double>(pd, {yd.data(), zd.data(), wd.data()}, out_ref.data(), rstd_ref.data());
      ref::gated_rmsnorm_bwd<double>(pd, {yd.data(), zd.data(), wd.data()}, rstd_ref.data(), dd.data(),
                                     {dy_ref.data(), dz_ref.data(), dw_ref.data()});
      const auto g16 = from_device16(dz16), g32 = from_device(dz32);
      std::vector<float> got, want;
      std::vector<double> ref_used;
      for (int m = 0; m < M; ++m)
        for (int c = 0; c < ld; ++c) {
          const size_t i = size_t(m) * ld + c;
          if (c < Dn) got.push_back(g16[i]), want.push_back(g32[i]), ref_used.push_back(dz_ref[i]);
          else ASSERT_TRUE(std::isnan(g16[i])) << "dz column " << c << " (outside the slice) was written";
        }
      EXPECT_TRUE(rounded_bitwise(got, want, "dz16"));
      EXPECT_TRUE(close16(from_device16(out16), out_ref, "out16 vs reference"));
      EXPECT_TRUE(test::all_close(rstd, rstd_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "rstd vs reference"));
      EXPECT_TRUE(test::all_close(dy, dy_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "dy vs reference"));
      EXPECT_TRUE(close16(got, ref_used, "dz16 vs reference"));
      EXPECT_TRUE(test::rel_l2_close(from_device(dw16), dw_ref, tol::kGpuReduceRelL2, "dw vs reference"));
    }
  }
}

// dy in bf16 (where the SSD's reverse walk reads it): each element the round to nearest even of the fp32 dy the
// same call writes (0 elements differ), and dz16, dw the bits of that call; on the float4 path (S's and a grouped
// shape) and the scalar one (odd group size), with dy16 poisoned before the run. One output each: g.dy or g.dz
// beside dy16, or a null dy16, is refused.
TEST(Bf16Gpu, GatedNormWritesBf16Dy) {
  for (const auto& [M, Dn, G, ld] : {std::tuple{16384, 256, 1, 648}, std::tuple{300, 512, 4, 1160},
                                     std::tuple{65, 30, 3, 33}}) {
    SCOPED_TRACE("M=" + std::to_string(M) + " Dn=" + std::to_string(Dn) + " G=" + std::to_string(G));
    const GatedNormParams p{M, Dn, G, ld, 1e-5f};
    const size_t n = size_t(M) * Dn;
    auto rng = test::make_rng(uint64_t(M) * 7 + Dn);
    const auto y16 = to_device16(random_vec<float>(n, rng));
    const auto z16 = to_device16(strided(M, Dn, ld, random_vec<float>(n, rng, -4, 4)));
    const auto w = to_device(random_vec<float>(Dn, rng, 0.5, 1.5));
    const auto do16 = to_device16(random_vec<float>(n, rng));
    const auto rstd = to_device(random_vec<float>(size_t(M) * G, rng, 0.5, 2.0));
    const gpu::GatedNormInputsBf16 in16{.y = y16.data(), .z = z16.data(), .w = w.data()};
    auto ws = poisoned(gpu::gated_rmsnorm_bwd_workspace_floats(p));
    auto dy32 = poisoned(n), dw32 = to_device(std::vector<float>(Dn, 0.f));
    auto dw16 = to_device(std::vector<float>(Dn, 0.f));
    auto dz_a = poisoned16(size_t(M) * ld), dz_b = poisoned16(size_t(M) * ld), dy16 = poisoned16(n);
    gpu::gated_rmsnorm_bwd(p, in16, rstd.data(), do16.data(), {.dy = dy32.data(), .dw = dw32.data()}, ws.data(),
                           nullptr, dz_a.data());
    gpu::gated_rmsnorm_bwd(p, in16, rstd.data(), do16.data(), {.dw = dw16.data()}, ws.data(), nullptr, dz_b.data(),
                           dy16.data(), nullptr);
    const auto want = from_device(dy32), got = from_device16(dy16);
    size_t nonzero = 0;
    for (const float v : want) nonzero += v != 0.f && std::isfinite(v);
    EXPECT_EQ(nonzero, n) << "the fp32 dy should be finite and non-zero everywhere (random inputs)";
    EXPECT_TRUE(rounded_bitwise(got, want, "dy16"));
    const auto za = from_device16(dz_a), zb = from_device16(dz_b);
    EXPECT_TRUE(test::same_bits(za, zb)) << "dz16 (columns past Dn stay poisoned in both)";
    EXPECT_TRUE(test::same_bits(from_device(dw16), from_device(dw32))) << "dw";
    EXPECT_THROW(gpu::gated_rmsnorm_bwd(p, in16, rstd.data(), do16.data(), {.dy = dy32.data(), .dw = dw16.data()},
                                        ws.data(), nullptr, dz_b.data(), dy16.data(), nullptr),
                 Error);
    EXPECT_THROW(gpu::gated_rmsnorm_bwd(p, in16, rstd.data(), do16.data(), {.dw = dw16.data()}, ws.data(), nullptr,
                                        dz_b.data(), nullptr, nullptr),
                 Error);
  }
}

// AdamW with the copy: the fp32 results are those of the plain kernel, bitwise, and the copy is their
// rounding; two members, the second skipped (non-finite norm), whose copy must stay as it was.
TEST(Bf16Gpu, AdamWWritesTheWeightCopy) {
  const size_t n = 4 * 10007;
  const int E = 2;
  auto rng = test::make_rng(9);
  const auto p0 = random_vec<float>(n * E, rng), g = random_vec<float>(n * E, rng, -0.01, 0.01);
  std::vector<float> gbad = g;
  gbad[n + 5] = std::numeric_limits<float>::infinity();  // member 1's norm is not finite: skipped
  std::vector<unsigned char> decay(n);
  for (size_t i = 0; i < n; ++i) decay[i] = i % 3 != 0;
  DeviceBuffer<unsigned char> ddecay(n);
  ddecay.upload(decay);
  const gpu::MemberOptim mo{{1.0f, 0.9f, 0.999f, {1e-2f, 0.1f, 0, 10, false}}, {0.9f, 0.999f, 1e-8f, 0.05f}};
  std::vector<gpu::MemberOptim> mos(E, mo);
  DeviceBuffer<gpu::MemberOptim> opt(E);
  opt.upload(mos);
  std::vector<std::vector<float>> params;
  std::vector<float> copy;
  for (const bool with_copy : {false, true}) {
    auto dp = to_device(p0), dg = to_device(gbad), dm = to_device(std::vector<float>(n * E, 0.f)),
         dv = to_device(std::vector<float>(n * E, 0.f));
    std::vector<DeviceStepState> s0(E);
    std::memset(s0.data(), 0, sizeof(DeviceStepState) * E);
    DeviceBuffer<DeviceStepState> st(E);
    st.upload(s0);
    DeviceBuffer<float> partials(size_t(gpu::grad_norm_blocks(n)) * E);
    DeviceBuffer<__nv_bfloat16> p16(n * E);
    gpu::cast_bf16(dp.data(), p16.data(), n * E, nullptr);
    gpu::grad_norm_sq_phase1(dg.data(), n, E, partials.data(), nullptr);
    gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), E, st.data(), nullptr);
    gpu::grad_clip_scale(opt.data(), E, st.data(), nullptr, nullptr, nullptr, 0, nullptr);
    gpu::adamw_step_devscale(dp.data(), dg.data(), dm.data(), dv.data(), ddecay.data(), n, E, opt.data(), st.data(),
                             nullptr, with_copy ? p16.data() : nullptr);
    params.push_back(from_device(dp));
    if (with_copy) copy = from_device16(p16);
  }
  EXPECT_TRUE(test::same_bits(params[1], params[0])) << "writing the copy changed the fp32 update";
  EXPECT_TRUE(rounded_bitwise(copy, params[1], "params16"));
  EXPECT_TRUE(test::same_bits(std::span<const float>(params[1]).subspan(n), std::span<const float>(p0).subspan(n)))
      << "the skipped member was updated";
  const std::vector<float> before(p0.begin(), p0.begin() + n), after(params[1].begin(), params[1].begin() + n);
  EXPECT_FALSE(test::same_bits(after, before)) << "member 0 was not updated";
}

}  // namespace
}  // namespace mlalpha
