// Evaluation metrics against hand-computed values on tiny panels, the NaN / skip rules, the single-
// series path, and the statistical sanity of perfect, negated and random predictions on a big panel.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "tests/test_util.h"
#include "mlalpha/metrics.h"

namespace mlalpha {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A panel stored the way Panel::y is: (N, T, K), filled from per-instrument rows of a K = 1 panel.
struct TinyPanel {
  int N, T, K;
  std::vector<float> pred, y;
  TinyPanel(int n, int t, int k = 1) : N(n), T(t), K(k) {}
  MetricsInput input(int min_pairs = 3) const { return {pred, y, N, T, K, 0, -1, min_pairs}; }
};

// N = 5 instruments, T = 3 steps, K = 1; values (instrument-major) chosen so every number is easy by hand.
//   t = 0: pred 1 2 3 4 · (NaN y)        y 2 4 5 9 ·     Pearson 11/√130, Spearman 1
//   t = 1: pred 1 2 2 4 NaN              y 1 3 2 4 3     Pearson 4.5/√23.75, Spearman 4.5/√22.5 (tie)
//   t = 2: pred NaN 1 NaN 2 5            y 0.5 NaN NaN 1 −2   two valid pairs: skipped at min_pairs 3
TinyPanel hand_panel() {
  TinyPanel p{5, 3};
  const std::vector<std::vector<float>> pred{{1, 1, kNaN}, {2, 2, 1}, {3, 2, kNaN}, {4, 4, 2}, {7, kNaN, 5}};
  const std::vector<std::vector<float>> y{{2, 1, 0.5f}, {4, 3, kNaN}, {5, 2, kNaN}, {9, 4, 1}, {kNaN, 3, -2}};
  for (int i = 0; i < p.N; ++i)
    for (int t = 0; t < p.T; ++t) p.pred.push_back(pred[i][t]), p.y.push_back(y[i][t]);
  return p;
}

const double kIc0 = 11 / std::sqrt(130.0), kIc1 = 4.5 / std::sqrt(23.75), kRank1 = 4.5 / std::sqrt(22.5);

TEST(MetricsDetail, PearsonAndAverageRanks) {
  const std::vector<double> a{1, 2, 3, 4}, b{2, 4, 5, 9};
  EXPECT_NEAR(metrics_detail::pearson(a, b), kIc0, 1e-15);
  const std::vector<double> c{3, 1, 3, 2, 3};
  EXPECT_EQ(metrics_detail::average_ranks(c), (std::vector<double>{4, 1, 4, 2, 4}));
  EXPECT_EQ(metrics_detail::average_ranks(std::vector<double>{5, 5}), (std::vector<double>{1.5, 1.5}));
  // Constant input (even where a rounded mean would leave tiny deviations) and n < 2 are undefined.
  EXPECT_TRUE(std::isnan(metrics_detail::pearson(std::vector<double>{0.1, 0.1, 0.1}, std::span<const double>(a).first(3))));
  EXPECT_TRUE(std::isnan(metrics_detail::pearson(std::vector<double>{1}, std::vector<double>{2})));
}

TEST(Metrics, HandComputedPanel) {
  const TinyPanel p = hand_panel();
  const MetricsResult r = compute_metrics(p.input());
  ASSERT_EQ(r.per_target.size(), 1u);
  const Metrics& m = r.per_target[0];
  // Valid points: 4 at t = 0 (instrument 4 has a NaN y), 4 at t = 1 (NaN pred), 2 at t = 2.
  EXPECT_EQ(m.points, 10);
  EXPECT_EQ(m.steps, 2);  // t = 2 has only two valid pairs
  EXPECT_NEAR(m.mse, (34.0 + 1.0 + 50.0) / 10.0, 1e-12);
  EXPECT_NEAR(m.ic, (kIc0 + kIc1) / 2, 1e-12);
  EXPECT_NEAR(m.rank_ic, (1.0 + kRank1) / 2, 1e-12);
  // Sample std of two values is |a − b| / √2.
  EXPECT_NEAR(m.icir, ((kIc0 + kIc1) / 2) / (std::abs(kIc0 - kIc1) / std::sqrt(2.0)), 1e-9);
  EXPECT_NEAR(m.dir_acc, 0.9, 1e-15);  // only (pred 5, y −2) disagrees
  // The mean entry of a single target is that target.
  EXPECT_EQ(r.mean.points, 10);
  EXPECT_DOUBLE_EQ(r.mean.ic, m.ic);
}

TEST(Metrics, MinPairsTwoKeepsTheTwoInstrumentStep) {
  const MetricsResult r = compute_metrics(hand_panel().input(2));
  const Metrics& m = r.per_target[0];
  EXPECT_EQ(m.steps, 3);
  EXPECT_NEAR(m.ic, (kIc0 + kIc1 - 1.0) / 3, 1e-12);  // (pred 1, 2 ↔ y 1, −2) correlates at −1
  EXPECT_NEAR(m.rank_ic, (1.0 + kRank1 - 1.0) / 3, 1e-12);
}

TEST(Metrics, TimeRangeIsHalfOpen) {
  TinyPanel p = hand_panel();
  MetricsInput in = p.input();
  in.t0 = 1, in.t1 = 2;  // only t = 1
  const Metrics m = compute_metrics(in).per_target[0];
  EXPECT_EQ(m.points, 4);
  EXPECT_EQ(m.steps, 1);
  EXPECT_NEAR(m.ic, kIc1, 1e-12);
  EXPECT_NEAR(m.mse, 0.25, 1e-15);
  EXPECT_TRUE(std::isnan(m.icir));  // one IC_t has no spread
}

TEST(Metrics, ConstantCrossSectionIsSkipped) {
  TinyPanel p{3, 2};
  // instrument-major (t = 0, t = 1): at t = 0 all predictions are equal.
  p.pred = {0.3f, 1, 0.3f, 2, 0.3f, 3};
  p.y = {1, 1, 2, 2, 3, 4};
  const Metrics m = compute_metrics(p.input()).per_target[0];
  EXPECT_EQ(m.steps, 1);
  EXPECT_EQ(m.points, 6);
  EXPECT_NEAR(m.ic, metrics_detail::pearson(std::vector<double>{1, 2, 3}, std::vector<double>{1, 2, 4}), 1e-15);
}

TEST(Metrics, SingleSeriesIsPearsonOverTime) {
  TinyPanel p{1, 6};
  p.pred = {kNaN, 1, 2, 3, 4, 8};   // a burn-in NaN prediction at t = 0
  p.y = {100, 2, 4, 5, 9, kNaN};    // a NaN target at t = 5
  const Metrics m = compute_metrics(p.input()).per_target[0];
  EXPECT_EQ(m.points, 4);
  EXPECT_EQ(m.steps, 4);
  EXPECT_NEAR(m.ic, kIc0, 1e-12);
  EXPECT_NEAR(m.rank_ic, 1.0, 1e-15);
  EXPECT_TRUE(std::isnan(m.icir));  // undefined for one series
  EXPECT_NEAR(m.mse, 34.0 / 4, 1e-12);
  // Below min_pairs valid time steps the IC is undefined and no step counts.
  TinyPanel q{1, 3};
  q.pred = {1, 2, kNaN};
  q.y = {1, 3, 4};
  const Metrics mq = compute_metrics(q.input()).per_target[0];
  EXPECT_TRUE(std::isnan(mq.ic));
  EXPECT_EQ(mq.steps, 0);
  EXPECT_EQ(mq.points, 2);
}

TEST(Metrics, SignStrategyOfOneSeriesByHand) {
  // r_t = sign(pred_t) · y_t over the valid pairs: t = 1..5 give +2, −4, +5, 0 (a zero prediction), −1.
  TinyPanel p{1, 7};
  p.pred = {kNaN, 1, 2, -3, 0, 4, 1};
  p.y = {100, 2, -4, -5, 7, -1, kNaN};
  MetricsInput in = p.input();
  in.periods_per_year = 4;
  const Metrics m = compute_metrics(in).per_target[0];
  const std::vector<double> r{2, -4, 5, 0, -1};
  const double mean = 0.4, sd = std::sqrt((1.6 * 1.6 + 4.4 * 4.4 + 4.6 * 4.6 + 0.4 * 0.4 + 1.4 * 1.4) / 4);
  EXPECT_NEAR(m.ts_mean, mean, 1e-12);
  EXPECT_NEAR(m.ts_std, sd, 1e-12);
  EXPECT_NEAR(m.ts_sharpe, mean / sd * 2, 1e-12);  // √4 periods per year
  EXPECT_NEAR(m.ts_hit, 2.0 / 4, 1e-15);            // the zero return is neither a hit nor a miss
  // Cumulative 2, −2, 3, 3, 2 from 0: the fall from 2 to −2 is the deepest.
  EXPECT_NEAR(m.ts_max_dd, 4.0, 1e-12);
  in.periods_per_year = kNaN;
  EXPECT_TRUE(std::isnan(compute_metrics(in).per_target[0].ts_sharpe));
}

TEST(Metrics, SignStrategyOfAPanelIsTheMeanOverInstruments) {
  // Two dates of three instruments; date 1's NaN prediction leaves two: r_0 = (1 + 2 − (−3)) / 3, r_1 = (−1 − 2) / 2.
  TinyPanel p{3, 2};
  const std::vector<std::vector<float>> pred{{1, -1}, {1, 1}, {-1, kNaN}}, y{{1, 1}, {2, -2}, {-3, 5}};
  for (int i = 0; i < 3; ++i)
    for (int t = 0; t < 2; ++t) p.pred.push_back(pred[i][t]), p.y.push_back(y[i][t]);
  const Metrics m = compute_metrics(p.input()).per_target[0];
  EXPECT_NEAR(m.ts_mean, (2.0 - 1.5) / 2, 1e-12);
  EXPECT_NEAR(m.ts_hit, 0.5, 1e-15);
  EXPECT_NEAR(m.ts_max_dd, 1.5, 1e-12);  // cumulative 2 then 0.5
}

TEST(Metrics, DirectionalAccuracyLeavesZerosOut) {
  TinyPanel p{1, 5};
  p.pred = {1, -1, 0, 2, -3};
  p.y = {1, 1, 1, 0, -2};
  const Metrics m = compute_metrics(p.input()).per_target[0];
  EXPECT_EQ(m.points, 5);
  EXPECT_NEAR(m.dir_acc, 2.0 / 3.0, 1e-15);  // (1,1) hit, (−1,1) miss, (−3,−2) hit; zeros excluded
  TinyPanel z{1, 3};
  z.pred = {0, 0, 0};
  z.y = {1, -1, 2};
  EXPECT_TRUE(std::isnan(compute_metrics(z.input()).per_target[0].dir_acc));
}

TEST(Metrics, InfinitePredictionPoisonsInsteadOfHiding) {
  TinyPanel p = hand_panel();
  p.pred[1 * p.T + 0] = std::numeric_limits<float>::infinity();  // instrument 1, t = 0
  const Metrics m = compute_metrics(p.input()).per_target[0];
  EXPECT_TRUE(std::isinf(m.mse));
  EXPECT_TRUE(std::isnan(m.ic));
  EXPECT_TRUE(std::isnan(m.rank_ic));
  EXPECT_TRUE(std::isnan(m.icir));
}

TEST(Metrics, MeanOverTargetsSkipsUndefinedTargets) {
  // K = 2: target 0 is the hand panel's target, target 1 is all NaN.
  const TinyPanel h = hand_panel();
  TinyPanel p{h.N, h.T, 2};
  for (size_t j = 0; j < h.y.size(); ++j) {
    p.pred.push_back(h.pred[j]), p.pred.push_back(1.0f);
    p.y.push_back(h.y[j]), p.y.push_back(kNaN);
  }
  const MetricsResult r = compute_metrics(p.input());
  ASSERT_EQ(r.per_target.size(), 2u);
  EXPECT_EQ(r.per_target[1].points, 0);
  EXPECT_TRUE(std::isnan(r.per_target[1].mse));
  EXPECT_TRUE(std::isnan(r.per_target[1].ic));
  EXPECT_NEAR(r.mean.ic, (kIc0 + kIc1) / 2, 1e-12);
  EXPECT_NEAR(r.mean.mse, 8.5, 1e-12);
  EXPECT_EQ(r.mean.points, 10);
  EXPECT_EQ(r.mean.steps, 2);

  // Two defined targets average with equal weight.
  TinyPanel q{1, 4, 2};
  q.pred = {1, -1, 2, -2, 3, -3, 4, 4};  // (t, k) pairs: target 1 is right in sign only at t = 3
  q.y = {1, 1, 2, 2, 3, 3, 4, 4};
  const MetricsResult rq = compute_metrics(q.input());
  EXPECT_NEAR(rq.per_target[0].ic, 1.0, 1e-15);
  EXPECT_NEAR(rq.per_target[1].ic, metrics_detail::pearson(std::vector<double>{-1, -2, -3, 4},
                                                           std::vector<double>{1, 2, 3, 4}), 1e-15);
  EXPECT_NEAR(rq.mean.ic, (1.0 + rq.per_target[1].ic) / 2, 1e-15);
  EXPECT_NEAR(rq.mean.dir_acc, 0.625, 1e-15);  // target 0: 1, target 1: 1/4
  EXPECT_NEAR(rq.mean.mse, (0.0 + (4 + 16 + 36 + 0) / 4.0) / 2, 1e-15);
}

TEST(Metrics, PerfectNegatedMonotoneAndRandomOnBigPanel) {
  auto rng = test::make_rng(51);
  const int N = 200, T = 100, K = 2;
  TinyPanel p{N, T, K};
  p.y = test::random_vec<float>(size_t(N) * T * K, rng);
  p.pred = p.y;
  auto with = [&](auto f) {  // predictions = f(targets)
    TinyPanel q = p;
    for (auto& v : q.pred) v = f(v);
    return compute_metrics(q.input()).mean;
  };
  const Metrics perfect = with([](float v) { return v; });
  EXPECT_NEAR(perfect.ic, 1.0, 1e-12);
  EXPECT_NEAR(perfect.rank_ic, 1.0, 1e-12);
  EXPECT_EQ(perfect.mse, 0.0);
  EXPECT_EQ(perfect.dir_acc, 1.0);
  EXPECT_EQ(perfect.points, int64_t(N) * T * K);
  EXPECT_EQ(perfect.steps, int64_t(T) * K);
  const Metrics negated = with([](float v) { return -v; });
  EXPECT_NEAR(negated.ic, -1.0, 1e-12);
  EXPECT_NEAR(negated.rank_ic, -1.0, 1e-12);
  EXPECT_EQ(negated.dir_acc, 0.0);
  // A monotone distortion keeps the ranks (rank IC 1) but not the linear fit (IC < 1).
  const Metrics cubed = with([](float v) { return v * v * v; });
  EXPECT_NEAR(cubed.rank_ic, 1.0, 1e-12);
  EXPECT_LT(cubed.ic, 0.95);
  EXPECT_GT(cubed.ic, 0.8);
  // Independent predictions: IC_t ~ N(0, 1/√N), averaged over 100 steps and 2 targets → sd ≈ 0.005.
  TinyPanel q = p;
  q.pred = test::random_vec<float>(p.y.size(), rng);
  const Metrics random = compute_metrics(q.input()).mean;
  EXPECT_LT(std::abs(random.ic), 0.03);
  EXPECT_LT(std::abs(random.rank_ic), 0.03);
  EXPECT_LT(std::abs(random.dir_acc - 0.5), 0.03);
  EXPECT_NEAR(random.mse, 2.0 / 3.0, 0.03);  // E(a − b)² = 2·Var(U(−1, 1)) = 2/3
}

TEST(Metrics, BadInputNamesTheProblem) {
  const TinyPanel p = hand_panel();
  auto throws_with = [](MetricsInput in, const std::string& needle) {
    try {
      compute_metrics(in);
    } catch (const Error& e) {
      return std::string(e.what()).find(needle) != std::string::npos ? ::testing::AssertionSuccess()
                                                                      : ::testing::AssertionFailure() << e.what();
    }
    return ::testing::AssertionFailure() << "no error for " << needle;
  };
  MetricsInput in = p.input();
  in.pred = in.pred.subspan(1);
  EXPECT_TRUE(throws_with(in, "pred has 14 values, expected N*T*K = 15"));
  in = p.input();
  in.y = in.y.subspan(0, 3);
  EXPECT_TRUE(throws_with(in, "y has 3 values"));
  in = p.input();
  in.t1 = 4;
  EXPECT_TRUE(throws_with(in, "time range [0, 4)"));
  in.t0 = 2, in.t1 = 2;
  EXPECT_TRUE(throws_with(in, "is empty"));
  in = p.input(1);
  EXPECT_TRUE(throws_with(in, "min_pairs = 1"));
  in = p.input();
  in.K = 0;
  EXPECT_TRUE(throws_with(in, "K=0"));
}

TEST(MetricNames, LookupDirectionAndImprovement) {
  Metrics m;
  m.mse = 0.5, m.ic = 0.1, m.rank_ic = 0.2, m.icir = 0.3, m.dir_acc = 0.6;
  EXPECT_EQ(metric_by_name(m, "mse"), 0.5);
  EXPECT_EQ(metric_by_name(m, "ic"), 0.1);
  EXPECT_EQ(metric_by_name(m, "rank_ic"), 0.2);
  EXPECT_EQ(metric_by_name(m, "icir"), 0.3);
  EXPECT_EQ(metric_by_name(m, "dir_acc"), 0.6);
  EXPECT_EQ(metric_names().size(), 16u);
  EXPECT_FALSE(higher_is_better("ts_max_dd"));
  EXPECT_TRUE(higher_is_better("ts_sharpe"));
  EXPECT_FALSE(higher_is_better("mse"));
  EXPECT_TRUE(higher_is_better("ic"));
  EXPECT_TRUE(higher_is_better("dir_acc"));
  try {
    higher_is_better("IC ");
    ADD_FAILURE() << "unknown metric accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown metric 'IC '; expected one of: mse, ic, rank_ic, icir, dir_acc, ls_mean, ls_std, "
                           "ls_sharpe, turnover, mse_zero, mse_mean, ts_mean, ts_std, ts_sharpe, ts_hit, ts_max_dd, q1 .. qQ "
                           "(quantile means)");
  }
  EXPECT_THROW(metric_by_name(m, "sharpe"), Error);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(is_improvement("mse", 0.4, 0.5));
  EXPECT_FALSE(is_improvement("mse", 0.5, 0.5));
  EXPECT_TRUE(is_improvement("ic", 0.2, 0.1));
  EXPECT_FALSE(is_improvement("ic", 0.05, 0.1));
  EXPECT_TRUE(is_improvement("ic", -0.3, nan));
  EXPECT_FALSE(is_improvement("ic", nan, 0.1));
}

}  // namespace
}  // namespace mlalpha
