#pragma once
// Predictions scored and written: the metrics of predictions over a time range of a panel, the long-short
// plot, and the prediction files (.npy + .csv) that predict, a walk-forward run and a population's ensemble
// leave (docs/metrics.md).
#include <span>
#include <string>
#include <vector>

#include "mlalpha/config_types.h"
#include "mlalpha/metrics.h"
#include "mlalpha/panel.h"

namespace mlalpha {

// Which part of a panel's time axis to predict or score.
struct TimeRange {
  int t0 = 0, t1 = 0;  // half-open [t0, t1)
  bool empty() const { return t1 <= t0; }
};

// The settings of the portfolio metrics and baselines (docs/metrics.md).
struct ScoreOptions {
  int quantiles = 5;            // run.quantiles
  double periods_per_year = 0;  // run.periods_per_year; 0: periods_per_year(panel) (NaN when not dates)
  TimeRange train;              // the training range: its mean target is the mse_mean predictor (empty: NaN)
};

// Metrics of predictions (N, T, K) against the panel's targets over `range` (docs/metrics.md).
MetricsResult score(const std::vector<float>& pred, const Panel& p, TimeRange range, const ScoreOptions& options = {});
// The same with the training-mean baseline given (K values, or none) and the periods per year as they are.
MetricsResult score_with_mean(const std::vector<float>& pred, const Panel& p, TimeRange range, int quantiles,
                              double periods_per_year, std::span<const double> train_mean);
// The periods per year the options give: options.periods_per_year when > 0, else periods_per_year(p).
double score_periods_per_year(const Panel& p, const ScoreOptions& options);
// Writes the cumulative long-short plot of `r` (docs/metrics.md, "Long-short plot") as an SVG, atomically:
// one line per target, the running sum of the long-short return over the steps that formed portfolios, over
// the panel's dates. `what` ends the title ("test, best checkpoint (step 300)"); `units` names the targets'
// units on the y axis (target_units: "z-score" when they were normalised per date, "" for their own);
// `fold_starts` (time indices), when given, are marked as the starts of folds 0, 1, ...
void write_long_short_plot(const std::string& path, const MetricsResult& r, const Panel& p, const std::string& what,
                           const std::string& units = "", const std::vector<int>& fold_starts = {});
// The units of processed targets for a plot's axis: "z-score" or "rank" under data.target_norm, else "".
std::string target_units(const DataConfig& d);
// "[12, 40) (2020-01-02 .. 2020-02-07)": a range with its first and last time labels when the panel has them.
std::string range_text(const Panel& p, TimeRange r);

// The time range of `split` ("train", "valid", "test", or "all" = the whole axis) in split `s`.
TimeRange split_range(const Split& s, const std::string& split, int T);

// Writes predictions aligned with (time, instrument) as <prefix>.npy (N, T, K) and <prefix>.csv, as a pair:
// both are written in full to temporary files before either replaces an older file of its name. The CSV has
// one row per predicted (time, instrument) in [range), time-major:
//   time, instrument, [fold,] observed, [context,] pred_<target>..., target_<target>...
// observed is 1 when the input row existed and 0 when it was missing (all features and all targets NaN in the
// raw input, docs/data.md: input_row(p, i, t), which a prepared panel remembers); context, when `context` (N, T)
// is given, is the number of rows behind the prediction (docs/data.md, "What a date's prediction is"; fewer than
// train.seq_len flags a date with a shorter history than the model was trained on); floats are written in their shortest form that reads back
// to the same float (std::to_chars), a NaN target as an empty cell, labels quoted where they hold a comma.
// `fold_of_time` (T), when not empty, adds the fold column: the walk-forward fold whose model predicted that
// time step.
struct PredictionFiles {
  std::string npy, csv;
  size_t rows = 0;
};
PredictionFiles write_predictions(const std::string& prefix, const Panel& p, const std::vector<float>& pred,
                                  TimeRange range, const std::vector<int>& fold_of_time = {},
                                  const std::vector<int>& context = {});

}  // namespace mlalpha
