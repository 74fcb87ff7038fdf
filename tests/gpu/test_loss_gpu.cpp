// gpu::loss_fwd_bwd against the CPU reference in double: MSE and Huber (errors on both sides of δ), NaN
// targets, burn-in (also burn_in >= L: nothing counted), K > 1, one and many partial blocks; the loss and the
// count stay on the device; plus bitwise determinism. The IC loss (kind IC) likewise: cross-sections of
// G = 1 (no group counts), 2, small and large G, groups with fewer than 3 valid targets, burn-in, K > 1, a
// constant prediction; determinism. The bf16 copy of dout written with it, and the loss-only form; at K = 1 the
// head bias's partials written with it (linear_bias_grad's bits).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
#include "core/error.h"
#include "ops/cast/cast.h"
#include "ops/linear/linear.h"
#include "ops/loss/loss.h"

namespace mlalpha {
namespace {

using test::all_close;
using test::cast_vec;
using test::from_device;
using test::poisoned;
using test::random_vec;
using test::rel_l2_close;
using test::to_device;

struct Inputs {
  LossParams p;
  std::vector<float> out, y;
};

Inputs make_inputs(int B, int L, int K, LossKind kind, float delta, int burn_in, uint64_t salt) {
  Inputs in;
  in.p = LossParams{B, L, K, kind, delta, burn_in};
  const size_t n = size_t(B) * L * K;
  auto rng = test::make_rng(salt);
  in.out = random_vec<float>(n, rng);  // e = out − y spans (−2, 2): both sides of δ = 0.5 and δ = 1
  in.y = random_vec<float>(n, rng);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (auto& v : in.y)
    if (u01(rng) < 0.1) v = std::numeric_limits<float>::quiet_NaN();  // missing targets
  return in;
}

struct GpuResult {
  std::vector<float> loss, dout;
  std::vector<int> count;
};

GpuResult run_gpu(const Inputs& in) {
  const size_t n = in.out.size();
  auto out_g = to_device(in.out), y_g = to_device(in.y);
  auto dout_g = poisoned(n), loss_g = poisoned(1), ws = poisoned(gpu::loss_fwd_bwd_workspace_floats(in.p));
  DeviceBuffer<int> count_g(1);
  count_g.fill_bytes(0xFF);
  gpu::loss_fwd_bwd(in.p, {.out = out_g.data(), .y = y_g.data()},
                    {.loss = loss_g.data(), .count = count_g.data(), .dout = dout_g.data()}, ws.data(), nullptr);
  GpuResult r{from_device(loss_g), from_device(dout_g), {}};
  r.count = count_g.download();
  return r;
}

void check_case(int B, int L, int K, LossKind kind, float delta, int burn_in, uint64_t salt) {
  SCOPED_TRACE("B=" + std::to_string(B) + " L=" + std::to_string(L) + " K=" + std::to_string(K) + " kind=" +
               to_string(kind) + " delta=" + std::to_string(delta) + " burn_in=" + std::to_string(burn_in));
  const Inputs in = make_inputs(B, L, K, kind, delta, burn_in, salt);
  const size_t n = in.out.size();
  const auto outd = cast_vec<double>(in.out), yd = cast_vec<double>(in.y);
  std::vector<double> dout_ref(n);
  const auto ref = ref::loss_fwd_bwd<double>(in.p, {.out = outd.data(), .y = yd.data()}, dout_ref.data());

  const GpuResult g = run_gpu(in);
  EXPECT_EQ(g.count[0], ref.count);
  // Σℓ is a reduction over B·L·K terms (tolerance table: reductions); 0 exactly when nothing is counted.
  EXPECT_TRUE(rel_l2_close(g.loss, std::vector<double>{ref.loss}, tol::kGpuReduceRelL2, "loss"));
  EXPECT_TRUE(all_close(g.dout, dout_ref, tol::kGpuElemAbs, tol::kGpuElemRel, "dout"));

  // The case must exercise what it claims: masked and counted elements, Huber on both sides of δ.
  if (n >= 100 && burn_in < L) {
    EXPECT_GT(ref.count, 0);
    EXPECT_LT(ref.count, (long long)n);
    if (kind == LossKind::Huber) {
      size_t inside = 0, outside = 0;
      for (size_t i = 0; i < n; ++i)
        if (dout_ref[i] != 0.0) (std::abs(outd[i] - yd[i]) <= delta ? inside : outside) += 1;
      EXPECT_GT(inside, 0u);
      EXPECT_GT(outside, 0u);
    }
  }
}

TEST(LossGpu, MatchesReference) {
  struct Shape {
    int B, L, K, burn_in;
  };
  const Shape shapes[] = {{1, 1, 1, 0},    {2, 7, 3, 2},      {4, 64, 1, 10}, {3, 5, 2, 7} /* all burnt in */,
                          {16, 256, 5, 32}, {64, 256, 1, 0}, {8, 2048, 3, 100}};
  uint64_t salt = 1;
  for (const Shape& s : shapes) {
    check_case(s.B, s.L, s.K, LossKind::MSE, 1.0f, s.burn_in, salt++);
    check_case(s.B, s.L, s.K, LossKind::Huber, 0.5f, s.burn_in, salt++);
    check_case(s.B, s.L, s.K, LossKind::Huber, 1.0f, s.burn_in, salt++);
  }
}

Inputs make_ic_inputs(int dates, int G, int L, int K, int burn_in, uint64_t salt) {
  Inputs in = make_inputs(dates * G, L, K, LossKind::IC, 1.0f, burn_in, salt);
  in.p.G = G;
  // Position l = L − 1 of cross-section 0, target 0: a constant prediction (the ε floor's case).
  for (int i = 0; i < G; ++i) in.out[((size_t(i) * L + (L - 1)) * K)] = 0.5f;
  // Position burn_in of the last cross-section, target K − 1: all but two targets missing (not counted).
  if (burn_in < L)
    for (int i = 2; i < G; ++i)
      in.y[((size_t(dates - 1) * G + i) * L + burn_in) * K + (K - 1)] = std::numeric_limits<float>::quiet_NaN();
  return in;
}

TEST(LossGpu, IcMatchesReference) {
  struct Shape {
    int dates, G, L, K, burn_in;
  };
  const Shape shapes[] = {{3, 1, 5, 1, 0},   {4, 2, 7, 2, 0},    {2, 3, 9, 1, 3},     {1, 7, 1, 1, 0},
                          {4, 16, 64, 1, 8}, {3, 37, 33, 3, 5},  {2, 500, 40, 2, 10}, {8, 64, 256, 1, 32},
                          {2, 5, 6, 2, 6} /* all burnt in */};
  uint64_t salt = 500;
  for (const Shape& s : shapes) {
    SCOPED_TRACE("dates=" + std::to_string(s.dates) + " G=" + std::to_string(s.G) + " L=" + std::to_string(s.L) +
                 " K=" + std::to_string(s.K) + " burn_in=" + std::to_string(s.burn_in));
    const Inputs in = make_ic_inputs(s.dates, s.G, s.L, s.K, s.burn_in, salt++);
    const size_t n = in.out.size();
    const auto outd = cast_vec<double>(in.out), yd = cast_vec<double>(in.y);
    std::vector<double> dout_ref(n);
    const auto ref = ref::loss_fwd_bwd<double>(in.p, {.out = outd.data(), .y = yd.data()}, dout_ref.data());
    const GpuResult g = run_gpu(in);
    EXPECT_EQ(g.count[0], ref.count);
    // The groups that count: past the burn-in, with at least 3 finite targets (make_ic_inputs leaves one
    // with two; make_inputs drops 10% at random).
    long long groups = 0;
    for (int d = 0; d < s.dates; ++d)
      for (int l = s.burn_in; l < s.L; ++l)
        for (int k = 0; k < s.K; ++k) {
          int valid = 0;
          for (int i = 0; i < s.G; ++i) valid += !std::isnan(in.y[((size_t(d) * s.G + i) * s.L + l) * s.K + k]);
          groups += valid >= 3;
        }
    EXPECT_EQ(ref.count, groups);
    if (s.G >= 20 && s.burn_in < s.L) EXPECT_GT(ref.count, 0);
    // ρ per group is a ratio of reductions over G members, then a mean over groups (tolerance table:
    // reductions); the gradient is elementwise from the group sums.
    EXPECT_TRUE(rel_l2_close(g.loss, std::vector<double>{ref.loss}, tol::kGpuReduceRelL2, "ic loss"));
    if (ref.count == 0) EXPECT_EQ(g.loss[0], 0.0f);
    // The constant-prediction group's gradient is ~1/√(n·ε) larger than the others': compared on its own so
    // it cannot hide errors in the rest.
    std::vector<float> g_rest, g_const;
    std::vector<double> r_rest, r_const;
    for (size_t i = 0; i < n; ++i) {
      const size_t b = i / (size_t(s.L) * s.K), l = (i / s.K) % s.L, k = i % s.K;
      const bool constant = b < size_t(s.G) && l == size_t(s.L - 1) && k == 0;
      (constant ? g_const : g_rest).push_back(g.dout[i]);
      (constant ? r_const : r_rest).push_back(dout_ref[i]);
    }
    if (!g_rest.empty()) EXPECT_TRUE(rel_l2_close(g_rest, r_rest, tol::kGpuReduceRelL2, "ic dout"));
    if (!g_const.empty()) EXPECT_TRUE(rel_l2_close(g_const, r_const, tol::kGpuReduceRelL2, "ic dout, constant prediction"));
    for (size_t i = 0; i < n; ++i)
      if (dout_ref[i] == 0.0) ASSERT_EQ(g.dout[i], 0.0f) << "element " << i << " is masked or uncounted";
  }
}

TEST(LossGpu, IcDeterministic) {
  const Inputs in = make_ic_inputs(8, 300, 128, 2, 16, 2000);
  const GpuResult a = run_gpu(in), b = run_gpu(in);
  EXPECT_EQ(0, std::memcmp(a.loss.data(), b.loss.data(), sizeof(float))) << "loss differs between two runs";
  EXPECT_EQ(a.count[0], b.count[0]);
  EXPECT_EQ(0, std::memcmp(a.dout.data(), b.dout.data(), a.dout.size() * sizeof(float))) << "dout differs";
}

TEST(LossGpu, Deterministic) {
  for (LossKind kind : {LossKind::MSE, LossKind::Huber}) {
    const Inputs in = make_inputs(64, 2048, 3, kind, 0.5f, 16, 1000);
    const GpuResult a = run_gpu(in), b = run_gpu(in);
    EXPECT_EQ(0, std::memcmp(a.loss.data(), b.loss.data(), sizeof(float))) << "loss differs between two runs";
    EXPECT_EQ(a.count[0], b.count[0]);
    EXPECT_EQ(0, std::memcmp(a.dout.data(), b.dout.data(), a.dout.size() * sizeof(float)))
        << "dout differs between two runs";
  }
}

// The bf16 step's operand: dout16 written with dout is cast_bf16(dout) bitwise, dout itself unchanged by asking
// for it; without dout (loss only, one block) the loss and count are the bits of the run with it; the IC loss
// refuses dout16.
TEST(LossGpu, Bf16DoutAndLossOnly) {
  for (LossKind kind : {LossKind::MSE, LossKind::Huber}) {
    for (const auto& [B, L, K] : {std::tuple{1, 1, 1}, std::tuple{64, 256, 1}, std::tuple{16, 256, 5}}) {
      SCOPED_TRACE("B=" + std::to_string(B) + " L=" + std::to_string(L) + " K=" + std::to_string(K));
      const Inputs in = make_inputs(B, L, K, kind, 0.5f, L > 8 ? 3 : 0, 3000 + B + K);
      const size_t n = in.out.size();
      const GpuResult plain = run_gpu(in);
      auto out_g = to_device(in.out), y_g = to_device(in.y);
      auto dout_g = poisoned(n), loss_g = poisoned(1), ws = poisoned(gpu::loss_fwd_bwd_workspace_floats(in.p));
      DeviceBuffer<__nv_bfloat16> d16(n), cast16(n);
      d16.fill_bytes(0xFF);
      gpu::loss_fwd_bwd(in.p, {.out = out_g.data(), .y = y_g.data()},
                        {.loss = loss_g.data(), .dout = dout_g.data(), .dout16 = d16.data()}, ws.data(), nullptr);
      const auto dout = from_device(dout_g);
      EXPECT_EQ(0, std::memcmp(dout.data(), plain.dout.data(), n * sizeof(float))) << "dout changed by dout16";
      gpu::cast_bf16(dout_g.data(), cast16.data(), n, nullptr);
      const auto a = d16.download(), b = cast16.download();
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(__nv_bfloat16))) << "dout16 is not cast_bf16(dout)";
      auto loss_only = poisoned(1);
      DeviceBuffer<int> count_only(1);
      count_only.fill_bytes(0xFF);
      gpu::loss_fwd_bwd(in.p, {.out = out_g.data(), .y = y_g.data()},
                        {.loss = loss_only.data(), .count = count_only.data()}, ws.data(), nullptr);
      const auto lo = from_device(loss_only);
      EXPECT_EQ(0, std::memcmp(lo.data(), plain.loss.data(), sizeof(float))) << "loss only differs";
      EXPECT_EQ(count_only.download()[0], plain.count[0]);
    }
  }
  const Inputs ic = make_ic_inputs(2, 8, 16, 1, 0, 3100);
  auto out_g = to_device(ic.out), y_g = to_device(ic.y), dout_g = poisoned(ic.out.size()), loss_g = poisoned(1);
  auto ws = poisoned(gpu::loss_fwd_bwd_workspace_floats(ic.p));
  DeviceBuffer<__nv_bfloat16> d16(ic.out.size());
  const gpu::LossOutputs with16{.loss = loss_g.data(), .dout = dout_g.data(), .dout16 = d16.data()};
  EXPECT_THROW(gpu::loss_fwd_bwd(ic.p, {.out = out_g.data(), .y = y_g.data()}, with16, ws.data(), nullptr), Error);
}

// K = 1: the gradient kernel writes the head bias's per-256-row partials of dout (LossOutputs::db_partial), which
// must be bitwise linear_bias_grad's own partials of the same dout (its workspace), whole chunks and a short
// last one (M = 1000: 3 whole + 232 rows), MSE and Huber with burn-in and NaN targets (zeros in dout), while dout
// keeps its bits; db from them (linear_bias_grad_sum) is linear_bias_grad's db bitwise and the double sum of
// dout at fp32 accuracy. K > 1 and the IC loss are refused.
TEST(LossGpu, HeadBiasPartialsAreLinearBiasGrads) {
  for (const LossKind kind : {LossKind::MSE, LossKind::Huber})
    for (const auto& [B, L] : {std::pair{64, 256}, std::pair{4, 250}, std::pair{1, 1}}) {
      SCOPED_TRACE("B=" + std::to_string(B) + " L=" + std::to_string(L) + " kind=" + to_string(kind));
      const Inputs in = make_inputs(B, L, 1, kind, 0.5f, L > 8 ? 3 : 0, 3300 + B);
      const size_t n = in.out.size();
      const LinearParams head{B * L, 7, 1};  // IN unused by the bias gradient
      const int chunks = gpu::linear_db_chunks(head);
      ASSERT_EQ(size_t(chunks) * 1, gpu::linear_bwd_workspace_floats(head));
      const GpuResult plain = run_gpu(in);
      auto out_g = to_device(in.out), y_g = to_device(in.y);
      auto dout_g = poisoned(n), loss_g = poisoned(1), ws = poisoned(gpu::loss_fwd_bwd_workspace_floats(in.p));
      auto part = poisoned(size_t(chunks));
      gpu::loss_fwd_bwd(in.p, {.out = out_g.data(), .y = y_g.data()},
                        {.loss = loss_g.data(), .dout = dout_g.data(), .db_partial = part.data()}, ws.data(), nullptr);
      const auto dout = from_device(dout_g);
      EXPECT_TRUE(test::same_bits(dout, plain.dout)) << "dout changed by db_partial";
      auto rng = test::make_rng(3400);
      const auto db0 = random_vec<float>(1, rng);
      auto lin_ws = poisoned(size_t(chunks)), db_lin = to_device(db0), db_sum = to_device(db0);
      gpu::linear_bias_grad(head, dout_g.data(), db_lin.data(), lin_ws.data(), nullptr);
      EXPECT_TRUE(test::same_bits(from_device(part), from_device(lin_ws))) << "partials differ from linear_bias_grad's";
      gpu::linear_bias_grad_sum(head, part.data(), db_sum.data(), nullptr);
      const auto got = from_device(db_sum);
      EXPECT_TRUE(test::same_bits(got, from_device(db_lin))) << "db differs from linear_bias_grad's";
      double want = db0[0];
      for (const float d : dout) want += d;
      EXPECT_NEAR(got[0], want, 1e-5 * (1.0 + std::abs(want))) << "db against the double sum of dout";
    }
  const Inputs k3 = make_inputs(2, 8, 3, LossKind::MSE, 0.5f, 0, 3500);
  auto out_g = to_device(k3.out), y_g = to_device(k3.y), dout_g = poisoned(k3.out.size()), loss_g = poisoned(1);
  auto ws = poisoned(gpu::loss_fwd_bwd_workspace_floats(k3.p)), part = poisoned(16);
  EXPECT_THROW(gpu::loss_fwd_bwd(k3.p, {.out = out_g.data(), .y = y_g.data()},
                                 {.loss = loss_g.data(), .dout = dout_g.data(), .db_partial = part.data()}, ws.data(),
                                 nullptr),
               Error);
  const Inputs ic = make_ic_inputs(2, 8, 16, 1, 0, 3600);
  auto ic_out = to_device(ic.out), ic_y = to_device(ic.y), ic_dout = poisoned(ic.out.size());
  auto ic_ws = poisoned(gpu::loss_fwd_bwd_workspace_floats(ic.p));
  EXPECT_THROW(gpu::loss_fwd_bwd(ic.p, {.out = ic_out.data(), .y = ic_y.data()},
                                 {.loss = loss_g.data(), .dout = ic_dout.data(), .db_partial = part.data()},
                                 ic_ws.data(), nullptr),
               Error);
}

}  // namespace
}  // namespace mlalpha
