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

DeviceBuffer<gpu::MemberOptim> optim_of(const std::vector<gpu::MemberOptim>& members) {
  DeviceBuffer<gpu::MemberOptim> d(members.size());
  d.upload(members);
  return d;
}

TEST(GradNormGpu, MatchesDoubleAndIsDeterministic) {
  for (size_t n : {size_t(4), size_t(1000), size_t(4 * 300001), size_t(25'000'000)}) {
    auto rng = make_rng(n);
    const auto g = random_vec<float>(n, rng, -2, 2);
    const auto dg = to_device(g);
    DeviceBuffer<float> partials(gpu::grad_norm_blocks(n));
    auto st = fresh_state();
    gpu::grad_norm_sq_phase1(dg.data(), n, 1, partials.data(), nullptr);
    gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), 1, st.data(), nullptr);
    const double got = st.download()[0].norm_sq;
    const double want = ref::grad_norm_sq(g.data(), n);
    EXPECT_NEAR(got, want, 1e-6 * want) << "n=" << n;
    gpu::grad_norm_sq_phase1(dg.data(), n, 1, partials.data(), nullptr);
    gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), 1, st.data(), nullptr);
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
  const auto opt = optim_of({{cp, ac}});
  for (int step = 0; step < 2; ++step) {
    const auto g = random_vec<float>(n, rng, -0.01, 0.01);
    const auto dg = to_device(g);
    gpu::grad_norm_sq_phase1(dg.data(), n, 1, partials.data(), nullptr);
    gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), 1, st.data(), nullptr);
    gpu::grad_clip_scale(opt.data(), 1, st.data(), loss.data(), nullptr, ring.device(), 4, nullptr);
    gpu::adamw_step_devscale(dp.data(), dg.data(), dm.data(), dv.data(), ddecay.data(), n, 1, opt.data(), st.data(),
                             nullptr);
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
  const auto opt = optim_of({{{1.0f, 0.9f, 0.999f, {}}, {}}});
  gpu::grad_norm_sq_phase1(dg.data(), n, 1, partials.data(), nullptr);
  gpu::grad_norm_sq_phase2(partials.data(), gpu::grad_norm_blocks(n), 1, st.data(), nullptr);
  gpu::grad_clip_scale(opt.data(), 1, st.data(), nullptr, nullptr, nullptr, 0, nullptr);
  gpu::adamw_step_devscale(dp.data(), dg.data(), dm.data(), dv.data(), ddecay.data(), n, 1, opt.data(), st.data(),
                           nullptr);
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

// A population of four members in one launch each: member m's weights, moments, state and record equal
// bitwise those of a population of one with its settings and gradients. Member 1's NaN gradient skips
// member 1 only; member 3 is frozen and keeps everything, counters included. The population takes phase 2 and
// the clip in one launch (grad_norm_sq_phase2_clip, as the trainer does), the solo runs in two: the same bits.
TEST(AdamWGpu, MembersEqualSoloRunsBitwiseAndSkipAlone) {
  const size_t n = 4 * 3001;
  const int E = 4;
  auto rng = make_rng(2024);
  std::vector<gpu::MemberOptim> settings;
  for (int m = 0; m < E; ++m)
    settings.push_back({{0.3f + 0.4f * m, 0.9f, 0.999f, {1e-2f / float(m + 1), 0.1f, m, 20, m % 2 == 0}},
                        {0.9f, 0.99f - 0.01f * m, 1e-8f, 0.02f * m}});
  const auto p0 = random_vec<float>(n * E, rng), m0 = random_vec<float>(n * E, rng, -0.01, 0.01);
  const auto v0 = random_vec<float>(n * E, rng, 0, 1e-4);
  std::vector<unsigned char> decay(n);
  for (size_t i = 0; i < n; ++i) decay[i] = (i / 5) % 3 != 0;
  DeviceBuffer<unsigned char> ddecay(n);
  ddecay.upload(decay);
  auto slice = [&](const std::vector<float>& a, int m) { return std::vector<float>(a.begin() + m * n, a.begin() + (m + 1) * n); };
  // The population.
  auto dp = to_device(p0), dm = to_device(m0), dv = to_device(v0);
  DeviceBuffer<float> partials(size_t(gpu::grad_norm_blocks(n)) * E), loss(E);
  const std::vector<float> losses{0.5f, 1.5f, 2.5f, 3.5f};
  loss.upload(losses);
  std::vector<DeviceStepState> s0(E);
  std::memset(s0.data(), 0, sizeof(DeviceStepState) * E);
  for (int m = 0; m < E; ++m) s0[m].step = s0[m].adam_step = 3 + m;
  DeviceBuffer<DeviceStepState> st(E);
  st.upload(s0);
  DeviceBuffer<int> frozen(E);
  frozen.upload(std::vector<int>{0, 0, 0, 1});
  MappedBuffer<StepRecord> ring(size_t(E) * 8);
  std::memset(const_cast<StepRecord*>(ring.host()), 0xFF, sizeof(StepRecord) * E * 8);
  const auto opt = optim_of(settings);
  std::vector<std::vector<float>> grads;
  for (int step = 0; step < 3; ++step) {
    auto g = random_vec<float>(n * E, rng, -0.05, 0.05);
    if (step == 1) g[n + 17] = std::numeric_limits<float>::quiet_NaN();
    grads.push_back(g);
    const auto dg = to_device(g);
    gpu::grad_norm_sq_phase1(dg.data(), n, E, partials.data(), nullptr);
    gpu::grad_norm_sq_phase2_clip(partials.data(), gpu::grad_norm_blocks(n), opt.data(), E, st.data(), loss.data(),
                                  frozen.data(), ring.device(), 8, nullptr);
    gpu::adamw_step_devscale(dp.data(), dg.data(), dm.data(), dv.data(), ddecay.data(), n, E, opt.data(), st.data(),
                             nullptr);
  }
  const auto P = from_device(dp), M = from_device(dm), V = from_device(dv);
  const auto S = st.download();
  for (int m = 0; m < E; ++m) {
    SCOPED_TRACE("member " + std::to_string(m));
    if (m == 3) {  // frozen: untouched
      EXPECT_EQ(slice(P, m), slice(p0, m));
      EXPECT_EQ(S[m].step, s0[m].step);
      EXPECT_EQ(S[m].adam_step, s0[m].adam_step);
      continue;
    }
    auto sp = to_device(slice(p0, m)), sm = to_device(slice(m0, m)), sv = to_device(slice(v0, m));
    DeviceBuffer<float> sparts(gpu::grad_norm_blocks(n)), sloss(1);
    sloss.upload(&losses[m], 1);
    DeviceBuffer<DeviceStepState> sst(1);
    sst.upload(&s0[m], 1);
    const auto sopt = optim_of({settings[m]});
    MappedBuffer<StepRecord> sring(8);
    std::memset(const_cast<StepRecord*>(sring.host()), 0, sizeof(StepRecord) * 8);
    for (int step = 0; step < 3; ++step) {
      const auto dg = to_device(slice(grads[step], m));
      gpu::grad_norm_sq_phase1(dg.data(), n, 1, sparts.data(), nullptr);
      gpu::grad_norm_sq_phase2(sparts.data(), gpu::grad_norm_blocks(n), 1, sst.data(), nullptr);
      gpu::grad_clip_scale(sopt.data(), 1, sst.data(), sloss.data(), nullptr, sring.device(), 8, nullptr);
      gpu::adamw_step_devscale(sp.data(), dg.data(), sm.data(), sv.data(), ddecay.data(), n, 1, sopt.data(), sst.data(),
                               nullptr);
    }
    EXPECT_EQ(slice(P, m), from_device(sp));
    EXPECT_EQ(slice(M, m), from_device(sm));
    EXPECT_EQ(slice(V, m), from_device(sv));
    const DeviceStepState one = sst.download()[0];
    EXPECT_EQ(std::memcmp(&S[m], &one, sizeof one), 0);
    EXPECT_EQ(S[m].skipped_total, m == 1 ? 1 : 0);
    EXPECT_EQ(S[m].step, s0[m].step + 3);
    for (int k = 0; k < 8; ++k) {
      const StepRecord a = const_cast<const StepRecord&>(ring.host()[m * 8 + k]);
      const StepRecord b = const_cast<const StepRecord&>(sring.host()[k]);
      if (b.step < 1) continue;  // a slot the solo run never wrote
      EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "record slot " << k;
      EXPECT_EQ(a.loss, losses[m]);
    }
  }
  EXPECT_NE(slice(P, 0), slice(p0, 0));  // the members did train
}

}  // namespace
}  // namespace mlalpha::test
