// The CPU batch gather (src/data/sampler.cpp): each window of a step is L consecutive rows of one
// instrument, the one sample_window() names, copied whole for features and targets; windows stay inside
// the series, cover every instrument and start, and change with the step.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/sampler.h"

namespace mlalpha {
namespace {

// A panel whose every value says where it came from: x = 10000·n + 10·t + f, y = −(10000·n + 10·t + k)
// (exact in float for these sizes).
Panel coded_panel(int N, int T, int F, int K) {
  Panel p;
  p.N = N, p.T = T, p.F = F, p.K = K;
  p.x.resize(size_t(N) * T * F);
  p.y.resize(size_t(N) * T * K);
  for (int n = 0; n < N; ++n)
    for (int t = 0; t < T; ++t) {
      for (int f = 0; f < F; ++f) p.x[(size_t(n) * T + t) * F + f] = float(10000 * n + 10 * t + f);
      for (int k = 0; k < K; ++k) p.y[(size_t(n) * T + t) * K + k] = -float(10000 * n + 10 * t + k);
    }
  return p;
}

TEST(Sampler, GatherCopiesTheSampledWindows) {
  const int N = 6, T = 150, F = 3, K = 2, B = 9, L = 40;
  const uint64_t seed = 77;
  const Panel p = coded_panel(N, T, F, K);
  std::set<int> instruments, starts;
  for (int64_t step : {int64_t(0), int64_t(1), int64_t(2), int64_t(999), int64_t(123456789)}) {
    std::vector<float> xb(size_t(B) * L * F, -1.f), yb(size_t(B) * L * K, 1.f);
    gather_batch(p, seed, step, B, L, xb.data(), yb.data());
    for (int b = 0; b < B; ++b) {
      const Window w = sample_window(seed, step, b, N, T, L);
      ASSERT_GE(w.instrument, 0);
      ASSERT_LT(w.instrument, N);
      ASSERT_GE(w.start, 0);
      ASSERT_LE(w.start + L, T) << "window past the end of the series";
      instruments.insert(w.instrument);
      starts.insert(w.start);
      for (int l = 0; l < L; ++l) {
        for (int f = 0; f < F; ++f)
          ASSERT_EQ(xb[(size_t(b) * L + l) * F + f], float(10000 * w.instrument + 10 * (w.start + l) + f))
              << "step " << step << " window " << b << " row " << l << " feature " << f;
        for (int k = 0; k < K; ++k)
          ASSERT_EQ(yb[(size_t(b) * L + l) * K + k], -float(10000 * w.instrument + 10 * (w.start + l) + k))
              << "step " << step << " window " << b << " row " << l << " target " << k;
      }
    }
  }
  // 45 windows over 6 instruments and 111 starts: a sampler stuck on one value would show here.
  EXPECT_EQ(instruments.size(), size_t(N));
  EXPECT_GT(starts.size(), size_t(20));
}

TEST(Sampler, WindowsChangeWithStepAndSeed) {
  const GatherParams g{8, 500, 1, 1, 16, 10, 5};
  auto windows = [&](const GatherParams& p, int64_t step) {
    std::vector<size_t> v;
    for (int b = 0; b < p.B; ++b) v.push_back(window_offsets(p, step, b).x_offset);
    return v;
  };
  EXPECT_EQ(windows(g, 3), windows(g, 3));
  EXPECT_NE(windows(g, 3), windows(g, 4));
  GatherParams other = g;
  other.seed = 6;
  EXPECT_NE(windows(g, 3), windows(other, 3));
}

TEST(Sampler, OffsetsAreTheWindowsRows) {
  const GatherParams g{5, 97, 3, 2, 7, 13, 42};
  for (int b = 0; b < g.B; ++b) {
    const Window w = sample_window(g.seed, 17, b, g.N, g.T, g.L);
    const WindowOffsets o = window_offsets(g, 17, b);
    EXPECT_EQ(o.x_offset, (size_t(w.instrument) * g.T + w.start) * g.F);
    EXPECT_EQ(o.y_offset, (size_t(w.instrument) * g.T + w.start) * g.K);
  }
}

TEST(Sampler, RejectsWindowsLongerThanTheSeries) {
  const Panel p = coded_panel(2, 10, 1, 1);
  std::vector<float> xb(11), yb(11);
  try {
    gather_batch(p, 1, 0, 1, 11, xb.data(), yb.data());
    FAIL() << "L > T accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("window length L = 11 exceeds the series length T = 10"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mlalpha
