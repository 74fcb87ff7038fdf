// The bf16 mode's conversions (issue 21): every place that writes a bf16 GEMM operand must store exactly
// bf16_round (core/bf16.h, round to nearest even) of the fp32 value the fp32 path computes, so each is
// checked bitwise against the fp32 kernel's output rounded on the host: the cast op (ties, subnormals,
// ±Inf, NaN, unaligned tails), RMSNorm's forward and its backward's dx copy, the gated norm's forward, and
// AdamW's weight copy (a skipped step leaves it alone).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "core/bf16.h"
#include "core/mapped_buffer.h"
#include "ops/cast/cast.h"
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
