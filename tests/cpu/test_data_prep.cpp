// Normalisation (training-range statistics, the NaN rule) and chronological splits / walk-forward folds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/normalize.h"
#include "data/split.h"
#include "data/synthetic.h"
#include "data/targets.h"
#include "test_util.h"

namespace mlalpha {
namespace {

using test::contains;
using test::error_of;

Panel make_panel(int N, int T, int F) {
  Panel p;
  p.N = N, p.T = T, p.F = F, p.K = 1;
  p.x.assign(size_t(N) * T * F, 0.0f);
  p.y.assign(size_t(N) * T, 0.0f);
  return p;
}

float& X(Panel& p, int i, int t, int f) { return p.x[(size_t(i) * p.T + t) * p.F + f]; }

// ------------------------------------------------------------------------------------- normalisation

TEST(Synthetic, ThreadedGenerationEqualsOneInstrumentAtATime) {
  // Large panels are generated on several threads; instrument i draws from its own stream, so any
  // instrument equals the same instrument generated alone (instrument 0 of a one-instrument panel) and
  // two generations are identical.
  const SynthParams big{64, 8192, 8, 2, 0.1f, 5};  // 4.7M values: threaded
  const Panel a = make_synthetic(big), b = make_synthetic(big);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  const Panel one = make_synthetic({1, 8192, 8, 2, 0.1f, 5});
  EXPECT_TRUE(std::equal(one.x.begin(), one.x.end(), a.x.begin()));
  EXPECT_TRUE(std::equal(one.y.begin(), one.y.end(), a.y.begin()));
  EXPECT_FALSE(std::equal(one.x.begin(), one.x.end(), a.x.begin() + one.x.size()));  // instruments differ
}

TEST(FeatureStats, UseTheTrainingRangeOnly) {
  // Times [0, 60) hold feature f ~ U(f, 3f+1); times [60, 100) hold values around 1e4 (a regime the
  // statistics must not see). NaNs are sprinkled into the training range and must be ignored.
  auto rng = test::make_rng(11);
  const int N = 5, T = 100, F = 3, t1 = 60;
  Panel p = make_panel(N, T, F);
  std::vector<double> sum(F, 0), cnt(F, 0);
  std::vector<std::vector<double>> seen(F);
  for (int i = 0; i < N; ++i)
    for (int t = 0; t < T; ++t)
      for (int f = 0; f < F; ++f) {
        const std::vector<float> u = test::random_vec<float>(1, rng, f, 3 * f + 1);
        float v = t < t1 ? u[0] : 1e4f + 100.0f * u[0];
        if (t < t1 && (i * 7 + t * 3 + f) % 11 == 0) v = NAN;
        X(p, i, t, f) = v;
        if (t < t1 && !std::isnan(v)) seen[f].push_back(v);
      }
  const FeatureStats s = compute_feature_stats(p, 0, t1);
  ASSERT_EQ(s.mean.size(), size_t(F));
  for (int f = 0; f < F; ++f) {
    double m = 0, v = 0;
    for (double x : seen[f]) m += x;
    m /= double(seen[f].size());
    for (double x : seen[f]) v += (x - m) * (x - m);
    const double sd = std::sqrt(v / double(seen[f].size()));
    EXPECT_NEAR(s.mean[f], m, 1e-5 * (1 + std::abs(m))) << f;
    EXPECT_NEAR(s.stdev[f], sd, 1e-5 * sd) << f;
    EXPECT_LT(s.mean[f], 3 * f + 1);  // the 1e4 regime would drag the mean far above this
  }
  // A later range gives entirely different numbers (the function really looks at [t0, t1)).
  const FeatureStats late = compute_feature_stats(p, t1, T);
  EXPECT_GT(late.mean[0], 9000.0f);
}

TEST(FeatureStats, ConstantFeatureGetsUnitStdevAndBadRangesAreRejected) {
  Panel p = make_panel(2, 10, 2);
  for (int i = 0; i < 2; ++i)
    for (int t = 0; t < 10; ++t) X(p, i, t, 0) = 0.1f, X(p, i, t, 1) = float(t);
  X(p, 1, 3, 0) = NAN;  // NaN does not break "constant"
  const FeatureStats s = compute_feature_stats(p, 0, 10);
  EXPECT_EQ(s.mean[0], 0.1f);
  EXPECT_EQ(s.stdev[0], 1.0f);
  EXPECT_NEAR(s.stdev[1], std::sqrt(8.25), 1e-6);

  EXPECT_TRUE(contains(error_of([&] { compute_feature_stats(p, 5, 5); }), "training range [5, 5) must be a non-empty"));
  EXPECT_TRUE(contains(error_of([&] { compute_feature_stats(p, 0, 11); }), "[0, 11)"));
  EXPECT_TRUE(contains(error_of([&] { compute_feature_stats(p, -1, 4); }), "[-1, 4)"));
  p.feature_names = {"const", "ramp"};
  for (int i = 0; i < 2; ++i)
    for (int t = 0; t < 4; ++t) X(p, i, t, 1) = NAN;
  EXPECT_TRUE(contains(error_of([&] { compute_feature_stats(p, 0, 4); }),
                       "feature 1 ('ramp') has no value (all NaN) in the training range [0, 4)"));
  X(p, 1, 7, 0) = INFINITY;
  EXPECT_TRUE(contains(error_of([&] { compute_feature_stats(p, 0, 10); }), "+inf at instrument 1, time 7, feature 0 ('const')"));
  EXPECT_NO_THROW(compute_feature_stats(p, 5, 7));  // the Inf is outside this range
}

TEST(Normalize, AppliesTrainingStatsAndMapsNaNToZero) {
  Panel p = make_panel(2, 4, 2);
  const std::vector<float> vals = {1, 10, 3, 20, NAN, 30, 5, 40, 7, NAN, 9, 60, 11, 70, 13, 80};
  p.x = vals;
  FeatureStats s;
  s.mean = {4, 50};
  s.stdev = {2, 10};
  normalize_features(p, s);
  for (size_t j = 0; j < vals.size(); ++j) {
    const int f = int(j % 2);
    const float want = std::isnan(vals[j]) ? 0.0f : (vals[j] - s.mean[f]) / s.stdev[f];
    EXPECT_EQ(p.x[j], want) << j;
  }
  EXPECT_EQ(p.x[4], 0.0f);   // NaN → 0 = the training mean
  EXPECT_EQ(p.x[1], -4.0f);  // (10 − 50) / 10
}

TEST(Normalize, RejectsInfAndMismatchedStatsWithoutTouchingThePanel) {
  Panel p = make_panel(3, 5, 2);
  p.instruments = {"A", "B", "C"};
  p.times = {"d0", "d1", "d2", "d3", "d4"};
  for (size_t j = 0; j < p.x.size(); ++j) p.x[j] = float(j);
  X(p, 2, 4, 1) = -INFINITY;
  const std::vector<float> before = p.x.to_vector();
  FeatureStats s{{1, 2}, {3, 4}};
  EXPECT_TRUE(contains(error_of([&] { normalize_features(p, s); }),
                       "-inf at instrument 2 ('C'), time 4 ('d4'), feature 1: features must be finite"));
  EXPECT_TRUE(test::all_close(std::vector<double>(p.x.begin(), p.x.end() - 1),
                              std::vector<double>(before.begin(), before.end() - 1), 0, 0, "panel unchanged"));
  X(p, 2, 4, 1) = 0;
  EXPECT_TRUE(contains(error_of([&] { normalize_features(p, FeatureStats{{1}, {1}}); }), "the panel has F = 2"));
  EXPECT_TRUE(contains(error_of([&] { normalize_features(p, FeatureStats{{1, 2}, {1, 0}}); }),
                       "feature 1 has mean 2.000000 and stdev 0.000000"));
  EXPECT_EQ(p.x[0], 0.0f);
}

// ------------------------------------------------------------------------------------------ splits

void expect_split(const Split& s, std::vector<int> want) {
  EXPECT_EQ((std::vector<int>{s.train_begin, s.train_end, s.valid_begin, s.valid_end, s.test_begin, s.test_end}), want)
      << s.to_string();
}

TEST(Split, FractionsIndicesAndGap) {
  expect_split(make_split({}, 100), {0, 70, 70, 85, 85, 100});  // defaults 0.7 / 0.85
  SplitSpec g{SplitPoint::at_fraction(0.7), SplitPoint::at_fraction(0.85), 5};
  expect_split(make_split(g, 100), {0, 70, 75, 85, 90, 100});
  SplitSpec r{SplitPoint::at_fraction(0.29), SplitPoint::at_fraction(0.58), 0};  // 0.29·100 rounds to 29, not 28
  expect_split(make_split(r, 100), {0, 29, 29, 58, 58, 100});
  SplitSpec idx{SplitPoint::at_index(40), SplitPoint::at_index(47), 2};
  expect_split(make_split(idx, 50), {0, 40, 42, 47, 49, 50});
  SplitSpec no_test{SplitPoint::at_index(40), SplitPoint::at_fraction(1.0), 3};
  const Split s = make_split(no_test, 50);
  expect_split(s, {0, 40, 43, 50, 50, 50});
  EXPECT_FALSE(s.has_test());
  EXPECT_EQ(s.to_string(), "train [0, 40) valid [43, 50) test none");
}

TEST(Split, ByTimeValue) {
  const std::vector<std::string> iso = {"2023-12-29", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05", "2024-01-08"};
  SplitSpec s{SplitPoint::at_time("2024-01-03"), SplitPoint::at_time("2024-01-06"), 0};
  // train: times < 2024-01-03; valid: up to the first time >= 2024-01-06 (a weekend: 2024-01-08).
  expect_split(make_split(s, 6, iso), {0, 2, 2, 5, 5, 6});
  // Numeric labels compare as numbers: 9 < 10 < 100 (strings would put "100" before "9").
  const std::vector<std::string> num = {"8", "9", "10", "100", "1000"};
  SplitSpec n{SplitPoint::at_time("9.5"), SplitPoint::at_time("100"), 0};
  expect_split(make_split(n, 5, num), {0, 2, 2, 3, 3, 5});
}

TEST(Split, BadSpecsAreRejectedNamingTheValues) {
  const auto err = [](SplitSpec s, int T, std::vector<std::string> times = {}) {
    return error_of([&] { make_split(s, T, times); });
  };
  using P = SplitPoint;
  EXPECT_TRUE(contains(err({P::at_fraction(0.0), P::at_fraction(0.5), 0}, 100),
                       "split.train_end = fraction 0 (index 0) leaves the training range empty"));
  EXPECT_TRUE(contains(err({P::at_fraction(0.8), P::at_fraction(0.6), 0}, 100),
                       "the validation range [80, 60) is empty: split.train_end = fraction 0.8 (index 80), gap 0, "
                       "split.valid_end = fraction 0.6 (index 60)"));
  EXPECT_TRUE(contains(err({P::at_fraction(0.5), P::at_fraction(0.55), 5}, 100), "the validation range [55, 55) is empty"));
  EXPECT_TRUE(contains(err({P::at_fraction(0.5), P::at_fraction(0.9), 10}, 100), "the test range [100, 100) is empty"));
  EXPECT_TRUE(contains(err({P::at_fraction(1.5), P::at_fraction(0.9), 0}, 100),
                       "split.train_end = fraction 1.5 must be a fraction in [0, 1]"));
  EXPECT_TRUE(contains(err({P::at_fraction(NAN), P::at_fraction(0.9), 0}, 100), "must be a fraction in [0, 1]"));
  EXPECT_TRUE(contains(err({P::at_index(10), P::at_index(101), 0}, 100),
                       "split.valid_end = index 101 must be a time index in [0, T=100]"));
  EXPECT_TRUE(contains(err({P::at_index(10), P::at_index(20), -1}, 100), "split.gap must be >= 0, got -1"));
  EXPECT_TRUE(contains(err({P::at_time("2024"), P::at_index(20), 0}, 100), "this panel has no time labels"));
  EXPECT_TRUE(contains(err({P::at_time("0"), P::at_time("5"), 0}, 3, {"1", "2", "3"}), "split.train_end = time '0' (index 0)"));
  // A text boundary on a numeric axis has no place in its order.
  EXPECT_EQ(err({P::at_time("2020-01-01"), P::at_time("5"), 0}, 3, {"20191231", "20200102", "20200103"}),
            "split.train_end = time '2020-01-01' is not a number, but the time labels are (from '20191231' to "
            "'20200103'); give a number on that scale");
  EXPECT_TRUE(contains(error_of([] { validate_split(Split{0, 10, 9, 20, 20, 30}, 30); }),
                       "split train [0, 10) valid [9, 20) test [20, 30) on T = 30 is invalid"));
  EXPECT_TRUE(contains(error_of([] { validate_split(Split{0, 10, 10, 20, 20, 31}, 30); }), "on T = 30 is invalid"));
  EXPECT_NO_THROW(validate_split(Split{0, 10, 10, 20, 20, 30}, 30));
}

TEST(WalkForward, ExpandingFoldsTileTheEnd) {
  // T = 100, 3 folds, automatic sizes: test = valid = 100 / 5 = 20.
  const std::vector<Split> f = walk_forward(100, {3, 0, 0, 0, 0});
  ASSERT_EQ(f.size(), 3u);
  expect_split(f[0], {0, 20, 20, 40, 40, 60});
  expect_split(f[1], {0, 40, 40, 60, 60, 80});
  expect_split(f[2], {0, 60, 60, 80, 80, 100});
}

TEST(WalkForward, RollingWindowOfTheDocsExample) {
  // docs/data.md: T = 100, 3 folds, automatic sizes (20), train_size = 15.
  const std::vector<Split> f = walk_forward(100, {3, 0, 0, 15, 0});
  ASSERT_EQ(f.size(), 3u);
  expect_split(f[0], {5, 20, 20, 40, 40, 60});
  expect_split(f[1], {25, 40, 40, 60, 60, 80});
  expect_split(f[2], {45, 60, 60, 80, 80, 100});
}

TEST(WalkForward, RollingWindowWithGap) {
  WalkForwardSpec w;
  w.folds = 4;
  w.test_size = 10;
  w.valid_size = 5;
  w.train_size = 30;
  w.gap = 2;
  const std::vector<Split> f = walk_forward(103, w);
  ASSERT_EQ(f.size(), 4u);
  // fold 0: test [63, 73), valid [56, 61), train [24, 54)
  expect_split(f[0], {24, 54, 56, 61, 63, 73});
  for (size_t k = 0; k < f.size(); ++k) {
    EXPECT_EQ(f[k].train_end - f[k].train_begin, 30);
    EXPECT_EQ(f[k].valid_begin - f[k].train_end, 2);
    EXPECT_EQ(f[k].test_begin - f[k].valid_end, 2);
    if (k > 0) EXPECT_EQ(f[k].test_begin, f[k - 1].test_end) << "test blocks are consecutive";
  }
  EXPECT_EQ(f.back().test_end, 103);
}

TEST(WalkForward, ImpossibleSpecsAreRejected) {
  EXPECT_TRUE(contains(error_of([] { walk_forward(100, {0, 0, 0, 0, 0}); }), "folds = 0, test_size = 0"));
  EXPECT_TRUE(contains(error_of([] { walk_forward(100, {0, 0, 0, 0, 0}); }), "folds must be >= 1"));
  EXPECT_TRUE(contains(error_of([] { walk_forward(5, {10, 0, 0, 0, 0}); }), "the automatic test block"));
  EXPECT_TRUE(contains(error_of([] { walk_forward(100, {5, 20, 0, 0, 0}); }),
                       "walk-forward (T = 100, folds = 5, test_size = 20, valid_size = 0, train_size = 0, gap = 0): "
                       "fold 0 would need 121 time steps"));
  EXPECT_TRUE(contains(error_of([] { walk_forward(100, {2, 10, 10, 70, 1}); }), "fold 0 would need 102 time steps (train_size"));
  EXPECT_TRUE(contains(error_of([] { walk_forward(100, {2, -1, 0, 0, 0}); }), "sizes and gap must be >= 0"));
  EXPECT_NO_THROW(walk_forward(100, {2, 10, 10, 68, 1}));
}

// ------------------------------------------------------------------------------------ valid targets

TEST(ValidTargets, CountsFiniteTargetsPerTargetInTheRange) {
  Panel p;
  p.N = 2, p.T = 4, p.F = 1, p.K = 2;
  p.x.assign(8, 0.0f);
  // (N, T, K): instrument 0 has target 1 only at t = 3; instrument 1 has no target 1 at all.
  p.y = {1, NAN, 2, NAN, NAN, NAN, 3, 4,  //
         NAN, NAN, 5, NAN, 6, NAN, NAN, NAN};
  EXPECT_EQ(count_finite_targets(p, 0, 4), (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(count_finite_targets(p, 0, 3), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(count_finite_targets(p, 3, 4), (std::vector<int64_t>{1, 1}));
  EXPECT_NO_THROW(require_valid_targets(p, 0, 4, "the training range"));
  EXPECT_TRUE(contains(error_of([&] { count_finite_targets(p, 2, 2); }), "range [2, 2) is not a non-empty range of T = 4"));
  EXPECT_TRUE(contains(error_of([&] { count_finite_targets(p, 0, 5); }), "range [0, 5) is not a non-empty range"));

  // Unnamed targets, no time labels.
  EXPECT_EQ(error_of([&] { require_valid_targets(p, 0, 3, "the training range", "data.targets = 'y.npy'"); }),
            "the training range [0, 3) has no finite value of target 2 of 2 in data.targets = 'y.npy': all 6 values "
            "there are NaN; check the label columns (data.target_columns; a forward-looking target is NaN where its "
            "horizon runs past the data) or move the split (split.train_end, split.valid_end)");
  // Named targets and time labels.
  p.target_names = {"fwd_1", "fwd_5"};
  p.times = {"2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"};
  EXPECT_EQ(error_of([&] { require_valid_targets(p, 1, 3, "the validation range of fold 2"); }),
            "the validation range of fold 2 [1, 3) (times '2024-01-03' to '2024-01-04') has no finite value of target "
            "'fwd_5' (target 2 of 2): all 4 values there are NaN; check the label columns (data.target_columns; a "
            "forward-looking target is NaN where its horizon runs past the data) or move the split (split.train_end, "
            "split.valid_end)");
  // Every target empty: the first one is named.
  for (float& v : p.y) v = NAN;
  EXPECT_TRUE(contains(error_of([&] { require_valid_targets(p, 0, 4, "the training range", "data.csv = 'd.csv'"); }),
                       "the training range [0, 4) (times '2024-01-02' to '2024-01-05') has no finite value of target "
                       "'fwd_1' (target 1 of 2) in data.csv = 'd.csv': all 8 values there are NaN"));
}

}  // namespace
}  // namespace mlalpha
