// The CPU batch gather (src/data/sampler.cpp): each window of a step is L consecutive rows of one
// instrument, the one sample_window() names, copied whole for features and targets; windows stay inside
// the series, cover every instrument and start, and change with the step. Time batches (train.batch =
// "time"): every cross-section's windows end at one date, hold distinct instruments (all of them when
// G = N), the cap's choice is deterministic and varies with the step, and end dates cover [L − 1, T − 1].
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

// A time batch gathers, for each cross-section d, the windows [t_d − L + 1, t_d] of distinct instruments.
TEST(Sampler, TimeBatchGathersCrossSections) {
  const int N = 7, T = 120, F = 2, K = 3, L = 16;
  const Panel p = coded_panel(N, T, F, K);
  for (int G : {N, 5, 1}) {
    const int dates = 4, B = dates * G;
    const GatherParams g{N, T, F, K, B, L, 5, dates, G};
    std::vector<float> xb(size_t(B) * L * F, -1.f), yb(size_t(B) * L * K, 1.f);
    for (int64_t step : {int64_t(0), int64_t(3), int64_t(77777)}) {
      gather_batch(g, p.x.data(), p.y.data(), step, xb.data(), yb.data());
      for (int d = 0; d < dates; ++d) {
        std::set<int> seen;
        // t of the cross-section's first window's last row, decoded from x = 10000·n + 10·t + f (f = 0)
        const int end = (int(xb[(size_t(d) * G * L + (L - 1)) * F]) % 10000) / 10;
        ASSERT_GE(end, L - 1);
        ASSERT_LE(end, T - 1);
        for (int j = 0; j < G; ++j) {
          const int b = d * G + j;
          const Window w = sample_window(g, step, b);
          EXPECT_EQ(w.start + L - 1, end) << "G " << G << " step " << step << " date " << d << " slot " << j;
          EXPECT_TRUE(seen.insert(w.instrument).second) << "instrument " << w.instrument << " twice in a cross-section";
          if (G == N) EXPECT_EQ(w.instrument, j) << "G = N takes every instrument in order";
          for (int l = 0; l < L; ++l) {
            for (int f = 0; f < F; ++f)
              ASSERT_EQ(xb[(size_t(b) * L + l) * F + f], float(10000 * w.instrument + 10 * (w.start + l) + f));
            for (int k = 0; k < K; ++k)
              ASSERT_EQ(yb[(size_t(b) * L + l) * K + k], -float(10000 * w.instrument + 10 * (w.start + l) + k));
          }
        }
      }
    }
  }
}

// The cap: G < N instruments chosen by (offset, stride coprime with N) from (seed, step, date slot), so the
// same inputs give the same choice, no instrument repeats, and over many steps every instrument and every
// subset such a pair can pick appears; end dates span [L − 1, T − 1] with both ends reached.
TEST(Sampler, TimeBatchCapIsDeterministicWithoutRepeats) {
  for (int N : {12, 13, 16}) {
    const int T = 60, L = 10, G = 5, dates = 3;
    const GatherParams g{N, T, 1, 1, dates * G, L, 99, dates, G};
    std::set<std::vector<int>> subsets;
    std::set<int> instruments, ends;
    for (int64_t step = 0; step < 400; ++step) {
      for (int d = 0; d < dates; ++d) {
        std::vector<int> pick;
        for (int j = 0; j < G; ++j) {
          const Window w = sample_window(g, step, d * G + j);
          const Window again = sample_window(g, step, d * G + j);
          ASSERT_EQ(w.instrument, again.instrument);
          ASSERT_EQ(w.start, again.start);
          ASSERT_GE(w.instrument, 0);
          ASSERT_LT(w.instrument, N);
          pick.push_back(w.instrument);
          instruments.insert(w.instrument);
          ends.insert(w.start + L - 1);
        }
        const std::set<int> distinct(pick.begin(), pick.end());
        ASSERT_EQ(distinct.size(), size_t(G)) << "N " << N << " step " << step << " date " << d;
        subsets.insert(std::vector<int>(distinct.begin(), distinct.end()));
        const CrossSection c = sample_cross_section(g.seed, step, d, N, T, L);
        ASSERT_GE(c.stride, 1);
        ASSERT_LT(c.stride, N);
        ASSERT_EQ(gcd_int(c.stride, N), 1);
      }
    }
    EXPECT_EQ(instruments.size(), size_t(N));
    // The subsets an (offset, stride) pair can pick: N offsets × φ(N) strides, halved because stride N − s
    // walks the same set backwards (G < N/2 keeps the sets of different pairs apart); all of them appear.
    int phi = 0;
    for (int s = 1; s < N; ++s) phi += gcd_int(s, N) == 1;
    EXPECT_EQ(subsets.size(), size_t(N * phi / 2)) << "N " << N;
    EXPECT_EQ(*ends.begin(), L - 1);
    EXPECT_EQ(*ends.rbegin(), T - 1);
    EXPECT_EQ(ends.size(), size_t(T - L + 1));
    // Another seed picks differently.
    GatherParams other = g;
    other.seed = 100;
    int same = 0;
    for (int b = 0; b < g.B; ++b) same += sample_window(g, 5, b).instrument == sample_window(other, 5, b).instrument;
    EXPECT_LT(same, g.B);
  }
}

// A range of a panel read in place (t_begin, row_stride) gives the windows of a copy of that range alone, in
// both batch modes; a range that does not fit its rows is refused.
TEST(Sampler, ARangeReadInPlaceEqualsItsSlice) {
  const Panel p = coded_panel(5, 80, 2, 1);
  const Panel slice = slice_panel(p, 20, 70);
  for (const int dates : {0, 3}) {
    GatherParams g{5, 50, 2, 1, dates ? 9 : 6, 12, 7, dates, dates ? 3 : 0};
    GatherParams in_place = g;
    in_place.t_begin = 20;
    in_place.row_stride = 80;
    std::vector<float> xa(size_t(g.B) * g.L * 2), ya(size_t(g.B) * g.L), xb(xa.size()), yb(ya.size());
    for (int64_t step : {0, 1, 17}) {
      gather_batch(g, slice.x.data(), slice.y.data(), step, xa.data(), ya.data());
      gather_batch(in_place, p.x.data(), p.y.data(), step, xb.data(), yb.data());
      EXPECT_EQ(xa, xb) << "dates " << dates << " step " << step;
      EXPECT_EQ(ya, yb) << "dates " << dates << " step " << step;
    }
    in_place.t_begin = 31;  // 31 + 50 > 80
    EXPECT_THROW(gather_batch(in_place, p.x.data(), p.y.data(), 0, xb.data(), yb.data()), Error);
  }
}

TEST(Sampler, TimeBatchShapeIsChecked) {
  const Panel p = coded_panel(4, 50, 1, 1);
  std::vector<float> xb(1000), yb(1000);
  for (const GatherParams& g : {GatherParams{4, 50, 1, 1, 10, 5, 1, 2, 5}, GatherParams{4, 50, 1, 1, 6, 5, 1, 2, 4},
                                GatherParams{4, 50, 1, 1, 2, 5, 1, 2, 0}}) {
    try {
      gather_batch(g, p.x.data(), p.y.data(), 0, xb.data(), yb.data());
      FAIL() << "G = " << g.G << ", B = " << g.B << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("time batch needs 1 <= G <= N and B = dates"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mlalpha
