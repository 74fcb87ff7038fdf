#pragma once
// Evaluation metrics of predictions against targets over a time range of a panel:
// MSE, IC (cross-sectional Pearson per time step, averaged; Pearson over time for a single series),
// rank IC (Spearman), ICIR and directional accuracy. Host-only C++20 (std::span): never include from
// .cu files. Double arithmetic throughout; every definition and choice is in docs/metrics.md.
//
// Missing values: a NaN target or a NaN prediction removes that (instrument, time, target) point from
// every metric (a NaN prediction means "no prediction here", e.g. inside the burn-in). ±Inf is not
// treated as missing: it propagates, so a diverged model cannot report a good score.
#include <cstdint>
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
};

struct Metrics {
  double mse = 0;      // mean of (pred − y)² over the valid points
  double ic = 0;       // mean over time steps of the cross-sectional Pearson IC_t; N = 1: Pearson over time
  double rank_ic = 0;  // the same with Spearman (average ranks for ties)
  double icir = 0;     // mean(IC_t) / sample std(IC_t); NaN for N = 1 or fewer than 2 steps
  double dir_acc = 0;  // fraction of valid points with pred and y both non-zero where sign(pred) = sign(y)
  int64_t points = 0;  // valid (pred, y) points
  int64_t steps = 0;   // time steps whose IC_t entered the average; N = 1: time steps in the Pearson
};

struct MetricsResult {
  std::vector<Metrics> per_target;  // (K)
  Metrics mean;  // each value averaged over the targets where it is defined; points and steps summed
};

// Throws mlalpha::Error on inconsistent sizes, an empty or out-of-bounds range, or min_pairs < 2.
MetricsResult compute_metrics(const MetricsInput& in);

// The metric names, in report order: mse, ic, rank_ic, icir, dir_acc.
const std::vector<std::string>& metric_names();
// The value of a metric by name; an unknown name throws an Error listing the valid ones.
double metric_by_name(const Metrics& m, std::string_view name);
// For early stopping and "best" checkpoints: false for mse, true for the others; unknown name throws.
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
