// The portfolio metrics (quantile means, long-short mean / std / Sharpe, top-quantile turnover) and the
// baseline MSEs against a hand-computed panel with uneven groups, NaN holes, a tied prediction and a
// date with too few instruments; metric names and their directions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "mlalpha/metrics.h"

namespace mlalpha {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// N = 7 instruments, T = 5 dates, K = 1, Q = 3 (rows are dates, columns instruments). Groups by
// floor(r·3/n) of the 0-based ascending rank r:
//   t0: 7 valid, groups of 3, 2, 2: {1,2,3} {4,5} {6,7} → 2, 4.5, 6.5; ls 4.5; top {i5, i3}
//   t1: y NaN at i2 → 6 valid, groups of 2: {5,0} {3,1} {4,2} → 2.5, 2, 3; ls 0.5; top {i1, i0}: turnover 1
//   t2: 2 valid (< Q): no portfolio
//   t3: 7 valid, i0 and i1 tie at 0.5 (i0 ranks lower): {-1,0,1} {2,3} {6,4} → 0, 2.5, 5; ls 5; top {i4, i3}
//       (t2 formed none, so t3 has no turnover pair)
//   t4: pred NaN at i1 → 6 valid: {0,0} {0,0} {2,1} → 0, 0, 1.5; ls 1.5; top {i6, i3}: turnover 1/2
const std::vector<std::vector<float>> kPred = {{0.1f, 0.5f, 0.3f, 0.7f, 0.2f, 0.6f, 0.4f},
                                               {0.7f, 0.6f, 0.5f, 0.4f, 0.3f, 0.2f, 0.1f},
                                               {1, 2, kNaN, kNaN, kNaN, kNaN, kNaN},
                                               {0.5f, 0.5f, 0.1f, 0.9f, 0.8f, 0.2f, 0.3f},
                                               {0.1f, kNaN, 0.3f, 0.9f, 0.4f, 0.5f, 0.8f}};
const std::vector<std::vector<float>> kY = {{1, 5, 3, 7, 2, 6, 4},
                                            {2, 4, kNaN, 1, 3, 0, 5},
                                            {1, 1, 0, 0, 0, 0, 0},
                                            {2, 3, -1, 4, 6, 0, 1},
                                            {0, 0, 0, 1, 0, 0, 2}};

struct Hand {
  int N = 7, T = 5, K = 1;
  std::vector<float> pred, y;
  Hand() {
    for (int i = 0; i < N; ++i)
      for (int t = 0; t < T; ++t) pred.push_back(kPred[t][i]), y.push_back(kY[t][i]);
  }
  MetricsInput input() const {
    MetricsInput in{pred, y, N, T, K};
    in.quantiles = 3;
    return in;
  }
};

TEST(Portfolio, HandComputedQuantilesLongShortAndTurnover) {
  const Hand h;
  MetricsInput in = h.input();
  in.periods_per_year = 252;
  const MetricsResult r = compute_metrics(in);
  const Metrics& m = r.per_target[0];
  const PortfolioSeries& ps = r.portfolios[0];
  ASSERT_EQ(ps.quantile_returns.size(), 15u);
  const std::vector<double> q0{2, 4.5, 6.5}, q1{2.5, 2, 3}, q3{0, 2.5, 5}, q4{0, 0, 1.5};
  for (int g = 0; g < 3; ++g) {
    EXPECT_DOUBLE_EQ(ps.quantile_returns[0 * 3 + g], q0[g]) << g;
    EXPECT_DOUBLE_EQ(ps.quantile_returns[1 * 3 + g], q1[g]) << g;
    EXPECT_TRUE(std::isnan(ps.quantile_returns[2 * 3 + g])) << g;
    EXPECT_DOUBLE_EQ(ps.quantile_returns[3 * 3 + g], q3[g]) << g;
    EXPECT_DOUBLE_EQ(ps.quantile_returns[4 * 3 + g], q4[g]) << g;
  }
  EXPECT_EQ(ps.formed, (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  EXPECT_DOUBLE_EQ(ps.long_short[0], 4.5);
  EXPECT_DOUBLE_EQ(ps.long_short[1], 0.5);
  EXPECT_TRUE(std::isnan(ps.long_short[2]));
  EXPECT_DOUBLE_EQ(ps.long_short[3], 5);
  EXPECT_DOUBLE_EQ(ps.long_short[4], 1.5);
  EXPECT_EQ(m.portfolio_steps, 4);
  ASSERT_EQ(m.quantile_means.size(), 3u);
  EXPECT_DOUBLE_EQ(m.quantile_means[0], 4.5 / 4);
  EXPECT_DOUBLE_EQ(m.quantile_means[1], 9.0 / 4);
  EXPECT_DOUBLE_EQ(m.quantile_means[2], 16.0 / 4);
  EXPECT_DOUBLE_EQ(m.ls_mean, 11.5 / 4);
  // Deviations 1.625, −2.375, 2.125, −1.375: squares sum to 14.6875 over n − 1 = 3.
  const double sd = std::sqrt(14.6875 / 3);
  EXPECT_NEAR(m.ls_std, sd, 1e-15);
  EXPECT_NEAR(m.ls_sharpe, 11.5 / 4 / sd * std::sqrt(252.0), 1e-12);
  EXPECT_DOUBLE_EQ(m.turnover, 0.75);  // (1 + 0.5) / 2
  EXPECT_DOUBLE_EQ(metric_by_name(m, "q3"), 4.0);
  EXPECT_DOUBLE_EQ(metric_by_name(m, "ls_mean"), 11.5 / 4);
  EXPECT_TRUE(std::isnan(metric_by_name(m, "q4")));  // only 3 quantiles
  // The mean over one target is that target.
  EXPECT_DOUBLE_EQ(r.mean.ls_mean, m.ls_mean);
  EXPECT_EQ(r.mean.quantile_means, m.quantile_means);
}

TEST(Portfolio, BaselineMsesUseTheModelsValidPoints) {
  const Hand h;
  MetricsInput in = h.input();
  const std::vector<double> mean{1.0};
  in.train_mean = mean;
  const Metrics m = compute_metrics(in).per_target[0];
  // 28 valid points (7 + 6 + 2 + 7 + 6); Σ y² = 140 + 55 + 2 + 67 + 5, Σ (y − 1)² = 91 + 31 + 0 + 44 + 5.
  EXPECT_EQ(m.points, 28);
  EXPECT_DOUBLE_EQ(m.mse_zero, 269.0 / 28);
  EXPECT_DOUBLE_EQ(m.mse_mean, 171.0 / 28);
  // Without periods per year or a training mean those two are NaN; the rest is unchanged.
  const Metrics bare = compute_metrics(h.input()).per_target[0];
  EXPECT_TRUE(std::isnan(bare.ls_sharpe));
  EXPECT_TRUE(std::isnan(bare.mse_mean));
  EXPECT_DOUBLE_EQ(bare.ls_mean, m.ls_mean);
  EXPECT_DOUBLE_EQ(bare.mse_zero, m.mse_zero);
}

TEST(Portfolio, TargetMeansSkipNonFiniteValues) {
  // N = 2, T = 3, K = 2: target 0 over t in [1, 3): 2, 3 (instrument 0), NaN, 5 (instrument 1) → 10 / 3.
  const std::vector<float> y{1, 10, 2, 20, 3, 30, 4, 40, kNaN, 50, 5, kNaN};
  const std::vector<double> m = target_means(y, 2, 3, 2, 1, 3);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m[0], 10.0 / 3);
  EXPECT_DOUBLE_EQ(m[1], (20.0 + 30 + 50) / 3);
  EXPECT_THROW(target_means(y, 2, 3, 2, 2, 2), Error);
}

TEST(Portfolio, TooFewInstrumentsOrASingleSeriesFormNoPortfolio) {
  // Two instruments, three quantiles: no date qualifies; every portfolio value is NaN, not 0.
  const std::vector<float> pred{1, 2, 3, 4}, y{1, 2, 3, 4};
  MetricsInput in{pred, y, 2, 2, 1};
  in.quantiles = 3;
  const Metrics m = compute_metrics(in).per_target[0];
  EXPECT_EQ(m.portfolio_steps, 0);
  EXPECT_TRUE(std::isnan(m.ls_mean) && std::isnan(m.ls_std) && std::isnan(m.turnover) && std::isnan(m.quantile_means[0]));
  in.quantiles = 2;  // now both dates have one instrument per group: ls = y of the higher prediction − the lower
  const Metrics two = compute_metrics(in).per_target[0];
  EXPECT_EQ(two.portfolio_steps, 2);
  EXPECT_DOUBLE_EQ(two.ls_mean, 2.0);  // instrument 1 minus instrument 0 at both dates: 3 − 1, 4 − 2
  EXPECT_TRUE(std::isnan(two.ls_sharpe));  // constant series: std 0
  EXPECT_DOUBLE_EQ(two.turnover, 0.0);    // instrument 1 is the top at both dates
  in.quantiles = 1;
  EXPECT_THROW(compute_metrics(in), Error);
  // A single series (N = 1) has no cross-section to sort.
  MetricsInput one{pred, y, 1, 4, 1};
  one.quantiles = 2;
  EXPECT_EQ(compute_metrics(one).per_target[0].portfolio_steps, 0);
}

TEST(Portfolio, NamesAndDirections) {
  for (const char* lower : {"mse", "mse_zero", "mse_mean", "ls_std", "turnover"}) EXPECT_FALSE(higher_is_better(lower)) << lower;
  for (const char* higher : {"ls_mean", "ls_sharpe", "q1", "q5", "q12", "ic"}) EXPECT_TRUE(higher_is_better(higher)) << higher;
  for (const char* bad : {"q0", "q", "qx", "q-1", "q01", "sharpe"}) EXPECT_THROW(higher_is_better(bad), Error) << bad;
  EXPECT_EQ(quantile_names(3), (std::vector<std::string>{"q1", "q2", "q3"}));
}

}  // namespace
}  // namespace mlalpha
