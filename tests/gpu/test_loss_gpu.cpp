// gpu::loss_fwd_bwd against the CPU reference in double: MSE and Huber (errors on both sides of δ), NaN
// targets, burn-in (also burn_in >= L: nothing counted), K > 1, one and many partial blocks; the loss and the
// count stay on the device; plus bitwise determinism.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
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

}  // namespace
}  // namespace mlalpha
