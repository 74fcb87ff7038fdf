// The bf16 mode's conversions: every place that writes a bf16 GEMM operand must store exactly
// bf16_round (core/bf16.h, round to nearest even) of the fp32 value the fp32 path computes, so each is
// checked bitwise against the fp32 kernel's output rounded on the host: the cast op (ties, subnormals,
// ±Inf, NaN, unaligned tails), RMSNorm's forward and its backward's dx copy, the gated norm's forward, and
// AdamW's weight copy (a skipped step leaves it alone).
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
#include "ops/rmsnorm/rmsnorm.h"
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
