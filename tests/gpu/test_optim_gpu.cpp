// GPU global norm, clip scale, schedule and AdamW against the CPU reference (DESIGN section 2, steps 5-7).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/mapped_buffer.h"
#include "gpu_util.h"
#include "test_util.h"
#include "train/optim.h"

namespace mlalpha::test {
namespace {

DeviceBuffer<DeviceStepState> fresh_state(long long step = 0, long long adam_step = 0) {
  DeviceStepState s;
  std::memset(&s, 0, sizeof s);
  s.step = step;
  s.adam_step = adam_step;
  DeviceBuffer<DeviceStepState> d(1);
  d.upload(&s, 1);
  return d;
}

TEST(GradNormGpu, MatchesDoubleAndIsDeterministic) {
  for (size_t n : {size_t(4), size_t(1000), size_t(4 * 300001), size_t(25'000'000)}) {
    auto rng = make_rng(n);
    const auto g = random_vec<float>(n, rng, -2, 2);
    const auto dg = to_device(g);
    DeviceBuffer<float> partials(gpu::grad_norm_blocks(n));
    auto st = fresh_state();
    gpu::grad_norm_sq_phase1(dg.data(), n, partials.data(), nullptr);
    gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), st.data(), nullptr);
    const double got = st.download()[0].norm_sq;
    const double want = ref::grad_norm_sq(g.data(), n);
    EXPECT_NEAR(got, want, 1e-6 * want) << "n=" << n;
    gpu::grad_norm_sq_phase1(dg.data(), n, partials.data(), nullptr);
    gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), st.data(), nullptr);
    const double again = st.download()[0].norm_sq;
    EXPECT_EQ(std::memcmp(&got, &again, sizeof got), 0) << "norm not bitwise reproducible, n=" << n;
  }
}

// Two full devscale steps (norm → clip → AdamW) against ref::adamw with the same clip scale and lr.
TEST(AdamWGpu, TwoStepsMatchReference) {
  const size_t n = 4 * 12345;
  auto rng = make_rng(77);
  auto p = random_vec<float>(n, rng), m(std::vector<float>(n, 0.0f)), v(std::vector<float>(n, 0.0f));
  std::vector<unsigned char> decay(n);
  for (size_t i = 0; i < n; ++i) decay[i] = (i / 7) % 2;
  auto dp = to_device(p), dm = to_device(m), dv = to_device(v);
  DeviceBuffer<unsigned char> ddecay(n);
  ddecay.upload(decay);
  DeviceBuffer<float> partials(gpu::grad_norm_blocks(n));
  auto st = fresh_state();
  MappedBuffer<StepRecord> ring(4);
  const gpu::ClipParams cp{0.5f, 0.9f, 0.999f, {1e-2f, 0.1f, 1, 10, true}};
  const gpu::AdamWConfig ac{0.9f, 0.999f, 1e-8f, 0.05f};
  DeviceBuffer<float> loss(1);
  const float loss_value = 0.25f;
  loss.upload(&loss_value, 1);
  for (int step = 0; step < 2; ++step) {
    const auto g = random_vec<float>(n, rng, -0.01, 0.01);
    const auto dg = to_device(g);
    gpu::grad_norm_sq_phase1(dg.data(), n, partials.data(), nullptr);
    gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), st.data(), nullptr);
    gpu::grad_clip_scale(cp, st.data(), loss.data(), ring.device(), 4, nullptr);
    gpu::adamw_step_devscale(dp.data(), dg.data(), dm.data(), dv.data(), ddecay.data(), n, ac, st.data(), nullptr);
    const DeviceStepState s = st.download()[0];
    const ClipResult c = clip_scale(ref::grad_norm_sq(g.data(), n), cp.max_norm);
    EXPECT_NEAR(s.clip_scale, c.scale, 1e-6 * c.scale);
    EXPECT_FLOAT_EQ(s.lr, lr_at(cp.schedule, step));
    EXPECT_EQ(s.step, step + 1);
    EXPECT_EQ(s.adam_step, step + 1);
    ref::adamw(p.data(), g.data(), m.data(), v.data(), decay.data(), n,
               {lr_at(cp.schedule, step), ac.beta1, ac.beta2, ac.eps, ac.weight_decay, step + 1}, s.clip_scale);
    EXPECT_TRUE(all_close(from_device(dp), p, 1e-7, 1e-5, "params after step " + std::to_string(step + 1)));
    EXPECT_TRUE(all_close(from_device(dm), m, 1e-10, 1e-5, "m"));
    EXPECT_TRUE(all_close(from_device(dv), v, 1e-14, 1e-5, "v"));
    const StepRecord r = const_cast<const StepRecord&>(ring.host()[step]);
    EXPECT_EQ(r.step, step + 1);
    EXPECT_EQ(r.loss, loss_value);
    EXPECT_EQ(r.skipped, 0);
  }
}

TEST(AdamWGpu, NonFiniteNormSkipsAndLeavesEverythingAlone) {
  const size_t n = 4096;
  auto rng = make_rng(5);
  auto g = random_vec<float>(n, rng);
  g[123] = std::numeric_limits<float>::quiet_NaN();
  const auto p0 = random_vec<float>(n, rng), m0 = random_vec<float>(n, rng), v0 = random_vec<float>(n, rng, 0, 1);
  auto dp = to_device(p0), dm = to_device(m0), dv = to_device(v0), dg = to_device(g);
  DeviceBuffer<unsigned char> ddecay(n);
  ddecay.fill_bytes(1);
  DeviceBuffer<float> partials(gpu::grad_norm_blocks(n));
  auto st = fresh_state(7, 7);
  gpu::grad_norm_sq_phase1(dg.data(), n, partials.data(), nullptr);
  gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), st.data(), nullptr);
  gpu::grad_clip_scale({1.0f, 0.9f, 0.999f, {}}, st.data(), nullptr, nullptr, 0, nullptr);
  gpu::adamw_step_devscale(dp.data(), dg.data(), dm.data(), dv.data(), ddecay.data(), n, {}, st.data(), nullptr);
  const DeviceStepState s = st.download()[0];
  EXPECT_EQ(s.skip, 1);
  EXPECT_EQ(s.clip_scale, 0.0f);
  EXPECT_EQ(s.skipped_total, 1);
  EXPECT_EQ(s.step, 8);
  EXPECT_EQ(s.adam_step, 7);  // no update was applied
  EXPECT_EQ(from_device(dp), p0);
  EXPECT_EQ(from_device(dm), m0);
  EXPECT_EQ(from_device(dv), v0);
}

}  // namespace
}  // namespace mlalpha::test
