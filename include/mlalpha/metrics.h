#pragma once
// Evaluation metrics of predictions against targets over a time range of a panel:
// MSE, IC (cross-sectional Pearson per time step, averaged; Pearson over time for a single series),
// rank IC (Spearman), ICIR and directional accuracy; per-date quantile portfolios (the long-short series,
// its Sharpe ratio, the top quantile's turnover), the sign strategy (ts_*: defined for a single series too)
// and the MSE of two baseline predictors. Host-only C++20 (std::span): never include from .cu files. Double arithmetic throughout; every definition and choice is in docs/metrics.md.
//
// Missing values: a NaN target or a NaN prediction removes that (instrument, time, target) point from
// every metric (a NaN prediction means "no prediction here", e.g. inside the burn-in). ±Inf is not
// treated as missing: it propagates, so a diverged model cannot report a good score.
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlalpha/metric_table.h"

namespace mlalpha {

struct MetricsInput {
  std::span<const float> pred;  // (N, T, K), the layout of Panel::y: index (i·T + t)·K + k
  std::span<const float> y;     // (N, T, K)
  int N = 0, T = 0, K = 0;
  int t0 = 0, t1 = -1;          // half-open time range [t0, t1); t1 = -1 means T
  // Fewest valid (pred, y) pairs a time step needs to enter the cross-sectional IC (N ≥ 2), and the
  // fewest valid time steps the time-series IC of a single series (N = 1) needs. Two points always
  // correlate at ±1, so the default is 3.
  int min_pairs = 3;
  // Quantile portfolios: at each time step with at least `quantiles` valid pairs (and N ≥ 2), instruments
  // are sorted by prediction and split into this many groups (docs/metrics.md gives the exact rule).
  int quantiles = 5;
  // Annualises ls_sharpe and ts_sharpe (mean / std · sqrt(periods_per_year)); NaN or <= 0: they are NaN.
  double periods_per_year = std::numeric_limits<double>::quiet_NaN();
  // (K) or empty: the mean target over the training range per target (target_means()), the constant
  // predictor behind mse_mean; empty: mse_mean is NaN.
  std::span<const double> train_mean;
};

// The per-time-step portfolio series of one target over the range [t0, t1) (NaN where a time step had
// fewer than `quantiles` valid pairs).
struct PortfolioSeries {
  int t0 = 0;                             // time index of the first row
  int quantiles = 0;                      // Q
  std::vector<double> quantile_returns;   // (t1 − t0, Q): mean target of each group, q = 0 the lowest predictions
  std::vector<double> long_short;         // (t1 − t0): top group's mean − bottom group's mean
  std::vector<uint8_t> formed;            // (t1 − t0): 1 where the time step formed portfolios
  std::vector<double> strategy;           // (t1 − t0): the sign strategy's return (ts_*), NaN without a pair
};



struct MetricsResult {
  std::vector<Metrics> per_target;  // (K)
  Metrics mean;  // each value averaged over the targets where it is defined; points and steps summed
  std::vector<PortfolioSeries> portfolios;  // (K)
};

// (K): the mean of the finite targets over the time range [t0, t1) of every instrument, per target (NaN
// for a target without any); y is (N, T, K).
std::vector<double> target_means(std::span<const float> y, int N, int T, int K, int t0, int t1);

// Throws mlalpha::Error on inconsistent sizes, an empty or out-of-bounds range, or min_pairs < 2.
MetricsResult compute_metrics(const MetricsInput& in);

namespace metrics_detail {
// Exposed for the tests. Pearson correlation of a and b (same length); NaN when fewer than 2 values or
// either side is constant.
double pearson(std::span<const double> a, std::span<const double> b);
// Ranks 1..n, ties get the average of the ranks they span.
std::vector<double> average_ranks(std::span<const double> v);
}  // namespace metrics_detail

}  // namespace mlalpha
