#pragma once
// Evaluation metrics of predictions against targets over a time range of a panel:
// MSE, IC (cross-sectional Pearson per time step, averaged; Pearson over time for a single series),
// rank IC (Spearman), ICIR and directional accuracy; per-date quantile portfolios (the long-short series,
// its Sharpe ratio, the top quantile's turnover) and the MSE of two baseline predictors. Host-only C++20 (std::span): never include from
// .cu files. Double arithmetic throughout; every definition and choice is in docs/metrics.md.
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
  // Annualises ls_sharpe (mean / std · sqrt(periods_per_year)); NaN or <= 0: ls_sharpe is NaN.
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
};

struct Metrics {
  double mse = 0;      // mean of (pred − y)² over the valid points
  double ic = 0;       // mean over time steps of the cross-sectional Pearson IC_t; N = 1: Pearson over time
  double rank_ic = 0;  // the same with Spearman (average ranks for ties)
  double icir = 0;     // mean(IC_t) / sample std(IC_t); NaN for N = 1 or fewer than 2 steps
  double dir_acc = 0;  // fraction of valid points with pred and y both non-zero where sign(pred) = sign(y)
  double ls_mean = 0;    // mean over portfolio steps of the long-short return (top − bottom quantile)
  double ls_std = 0;     // its sample standard deviation (n − 1)
  double ls_sharpe = 0;  // ls_mean / ls_std · sqrt(periods_per_year); NaN without periods per year
  double turnover = 0;   // mean fraction of the top quantile new since the previous time step
  double mse_zero = 0;   // MSE of the zero predictor over the same valid points as mse
  double mse_mean = 0;   // MSE of the training-mean predictor over the same points (NaN without train_mean)
  std::vector<double> quantile_means;  // (Q): mean over portfolio steps of each group's mean target
  int64_t points = 0;  // valid (pred, y) points
  int64_t steps = 0;   // time steps whose IC_t entered the average; N = 1: time steps in the Pearson
  int64_t portfolio_steps = 0;  // time steps that formed quantile portfolios
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

// The scalar metric names, in report order: mse, ic, rank_ic, icir, dir_acc, ls_mean, ls_std, ls_sharpe,
// turnover, mse_zero, mse_mean. The quantile means are named q1 .. qQ (q1 the lowest predictions).
const std::vector<std::string>& metric_names();
// "q1" .. "qQ" for Q quantiles.
std::vector<std::string> quantile_names(int quantiles);
// The value of a metric by name (a scalar name, or "q<k>" with k >= 1: NaN when m has fewer than k
// quantiles); an unknown name throws an Error listing the valid ones.
double metric_by_name(const Metrics& m, std::string_view name);
// For early stopping and "best" checkpoints: false for mse, mse_zero, mse_mean, ls_std and turnover, true
// for the others; unknown name throws.
bool higher_is_better(std::string_view name);
// True when `candidate` is strictly better than `best` on metric `name`; a NaN candidate is never
// better, and anything finite beats a NaN best.
bool is_improvement(std::string_view name, double candidate, double best);

namespace metrics_detail {
// Exposed for the tests. Pearson correlation of a and b (same length); NaN when fewer than 2 values or
// either side is constant.
double pearson(std::span<const double> a, std::span<const double> b);
// Ranks 1..n, ties get the average of the ranks they span.
std::vector<double> average_ranks(std::span<const double> v);
}  // namespace metrics_detail

}  // namespace mlalpha
