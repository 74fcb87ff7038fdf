// AdamW, global-norm clipping and the LR schedule against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "train/optim.h"
#include "train/schedule.h"

namespace mlalpha {
namespace {

// Two AdamW steps on one scalar, lr 0.1, β = (0.9, 0.999), eps 1e-8, wd 0.01; the second with a clip
// scale of 0.5 on g = −1. Expected values computed by hand (PyTorch's AdamW formula, in double); the
// update runs in fp32, where 1 − β2 itself is off by 1.3e-5 relative, hence the relative bounds.
TEST(AdamW, HandComputedTwoSteps) {
  for (unsigned char decay : {1, 0}) {
    std::vector<float> p{1.0f}, m{0.0f}, v{0.0f}, g{0.5f};
    AdamWParams a{0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
    ref::adamw(p.data(), g.data(), m.data(), v.data(), &decay, 1, a, 1.0f);
    EXPECT_NEAR(p[0], decay ? 0.899000002 : 0.900000002, 1e-6);
    EXPECT_NEAR(m[0], 0.05, 0.05 * 1e-6);
    EXPECT_NEAR(v[0], 0.00025, 0.00025 * 2e-5);
    g[0] = -1.0f;
    a.step = 2;
    ref::adamw(p.data(), g.data(), m.data(), v.data(), &decay, 1, a, 0.5f);
    EXPECT_NEAR(p[0], decay ? 0.9033641598 : 0.9052631598, 1e-6);
    EXPECT_NEAR(m[0], -0.005, 0.005 * 1e-5);
    EXPECT_NEAR(v[0], 0.00049975, 0.00049975 * 2e-5);
  }
}

TEST(AdamW, ZeroGradientWithoutDecayLeavesParameterAlone) {
  std::vector<float> p{0.7f, -0.3f}, m{0, 0}, v{0, 0}, g{0, 0};
  std::vector<unsigned char> decay{0, 1};
  ref::adamw(p.data(), g.data(), m.data(), v.data(), decay.data(), 2, {0.1f, 0.9f, 0.999f, 1e-8f, 0.5f, 1}, 1.0f);
  EXPECT_EQ(p[0], 0.7f);                    // no decay, zero update
  EXPECT_NEAR(p[1], -0.3 * (1 - 0.05), 1e-7);  // decoupled decay only
}

TEST(Clip, HandComputed) {
  const std::vector<float> g{3.0f, 4.0f};
  const double nsq = ref::grad_norm_sq(g.data(), g.size());
  EXPECT_EQ(nsq, 25.0);
  EXPECT_FLOAT_EQ(clip_scale(nsq, 1.0f).scale, 0.2f);
  EXPECT_EQ(clip_scale(nsq, 1.0f).skip, 0);
  EXPECT_EQ(clip_scale(nsq, 10.0f).scale, 1.0f);  // under the limit: untouched
  EXPECT_EQ(clip_scale(nsq, 0.0f).scale, 1.0f);   // clipping disabled
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    const ClipResult r = clip_scale(bad, 1.0f);
    EXPECT_EQ(r.scale, 0.0f);
    EXPECT_EQ(r.skip, 1);
    EXPECT_EQ(clip_scale(bad, 0.0f).skip, 1);  // a non-finite norm skips even without clipping
  }
}

TEST(Schedule, WarmupThenCosine) {
  const ScheduleParams s{1e-3f, 0.1f, 10, 110, true};
  EXPECT_FLOAT_EQ(lr_at(s, 0), 1e-4f);
  EXPECT_FLOAT_EQ(lr_at(s, 4), 5e-4f);
  EXPECT_FLOAT_EQ(lr_at(s, 9), 1e-3f);
  EXPECT_FLOAT_EQ(lr_at(s, 10), 1e-3f);
  EXPECT_NEAR(lr_at(s, 109), 1e-4f, 1e-9);
  EXPECT_NEAR(lr_at(s, 10 + 33), 1e-4 + 0.5 * 9e-4 * (1 + std::cos(M_PI * 33.0 / 99.0)), 1e-8);
  for (int64_t t = 11; t < 110; ++t) EXPECT_LT(lr_at(s, t), lr_at(s, t - 1)) << "step " << t;
  EXPECT_NEAR(lr_at(s, 500), 1e-4f, 1e-9);  // past the end: stays at the floor
}

TEST(Schedule, Constant) {
  const ScheduleParams s{2e-3f, 0.1f, 4, 100, false};
  EXPECT_FLOAT_EQ(lr_at(s, 0), 5e-4f);
  EXPECT_FLOAT_EQ(lr_at(s, 3), 2e-3f);
  EXPECT_FLOAT_EQ(lr_at(s, 50), 2e-3f);
  EXPECT_FLOAT_EQ(lr_at({2e-3f, 0.1f, 0, 100, true}, 0), 2e-3f);  // no warm-up: full lr at once
}

}  // namespace
}  // namespace mlalpha
