#pragma once
// The metrics a run reports (docs/metrics.md gives each definition) and the one table that names them: the
// JSONL log, folds.csv / folds.json, the leaderboard, the progress lines, run.metric's check and the Python
// package all walk metric_table(), so a metric is added here (a field of Metrics and a row of the table)
// and in compute_metrics (mlalpha/metrics.h), nowhere else. Host-only C++20 (std::span).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mlalpha {

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
  // The sign strategy, the time-series view that needs no cross-section (a single series included): at each
  // time step hold sign(pred) of every instrument with a valid pair, equally weighted, earning
  // r_t = mean_i sign(pred_it) · y_it.
  double ts_mean = 0;    // mean of r_t over the time steps with a position
  double ts_std = 0;     // its sample standard deviation (n − 1)
  double ts_sharpe = 0;  // ts_mean / ts_std · sqrt(periods_per_year); NaN without periods per year
  double ts_hit = 0;     // fraction of those time steps with r_t > 0 among those with r_t ≠ 0 (the hit rate)
  double ts_max_dd = 0;  // largest fall of the cumulative sum of r_t from an earlier peak (≥ 0; 0 at the start)
  std::vector<double> quantile_means;  // (Q): mean over portfolio steps of each group's mean target
  int64_t points = 0;  // valid (pred, y) points
  int64_t steps = 0;   // time steps whose IC_t entered the average; N = 1: time steps in the Pearson
  int64_t portfolio_steps = 0;  // time steps that formed quantile portfolios
};

// One scalar metric: its name, its field of Metrics, which way is better (early stopping, best
// checkpoints, rankings) and whether it is scale-free (shown with 4 decimals; the others with 5
// significant digits).
struct MetricInfo {
  const char* name;
  double Metrics::*field;
  bool higher_is_better;
  bool scale_free;
};
// Every scalar metric in report order: mse, ic, rank_ic, icir, dir_acc, ls_mean, ls_std, ls_sharpe,
// turnover, mse_zero, mse_mean, ts_mean, ts_std, ts_sharpe, ts_hit, ts_max_dd.
std::span<const MetricInfo> metric_table();
// The row of a scalar metric; nullptr for a quantile mean ("q3") or an unknown name.
const MetricInfo* find_metric(std::string_view name);

// The scalar metric names, in report order (metric_table()). The quantile means are named q1 .. qQ (q1 the
// lowest predictions).
const std::vector<std::string>& metric_names();
// "q1" .. "qQ" for Q quantiles.
std::vector<std::string> quantile_names(int quantiles);
// The value of a metric by name (a scalar name, or "q<k>" with k >= 1: NaN when m has fewer than k
// quantiles); an unknown name throws an Error listing the valid ones.
double metric_by_name(const Metrics& m, std::string_view name);
// For early stopping and "best" checkpoints: false for mse, mse_zero, mse_mean, ls_std, turnover, ts_std and
// ts_max_dd, true for the others; unknown name throws.
bool higher_is_better(std::string_view name);
// True when `candidate` is strictly better than `best` on metric `name`; a NaN candidate is never
// better, and anything finite beats a NaN best.
bool is_improvement(std::string_view name, double candidate, double best);

}  // namespace mlalpha
