#pragma once
// The folds of a run: each fold's split, its checks and feature statistics (planned before any output), its
// prepared panel (what its engine trains and predicts on), and how its predictions are windowed and scored.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/panel.h"
#include "mlalpha/config.h"
#include "mlalpha/eval.h"
#include "mlalpha/metrics.h"
#include "mlalpha/model.h"
#include "predict/window_plan.h"
#include "train/engine.h"

namespace mlalpha {

struct FoldPlan {
  int fold = 0;
  Split split;
  FeatureStats stats;
  std::filesystem::path dir;  // out_dir/fold-k for walk-forward runs, out_dir otherwise
};
// Every fold of cfg's split on `panel`, checked (the training length, finite targets) and with its feature
// statistics fitted.
std::vector<FoldPlan> plan_folds(const RunConfig& cfg, const Panel& panel);

// How the run scores predictions: run.quantiles, the periods per year, and the training-mean baseline.
struct ScoreSpec {
  int quantiles = 5;
  double periods_per_year = NAN;
  std::vector<double> train_mean;  // (K)
  // data.target_scale: the fold's processed targets before the scale (N, T, K), which the engine's
  // predictions are scored against once multiplied back (the engine trains on the scaled ones). Null: none.
  std::shared_ptr<const Panel> targets;
};
// The spec of a fold trained on `split`'s training range of `panel` (the raw panel: its time axis).
ScoreSpec score_spec(const RunConfig& cfg, const Panel& panel, const Split& split);
// Metrics of pred (N, T, K) against norm's targets over [t0, t1).
MetricsResult score_range(const std::vector<float>& pred, const Panel& norm, const ScoreSpec& sc, int t0, int t1);

// A fold ready to train: the panel processed as the data settings say with the fold's statistics (the whole
// time axis: the engine samples its training range and predicts the others from it; with data.target_scale its
// targets divided by the fold's scales), and its scoring. Predictions leave the engine multiplied back
// (engine_predictions), so every metric and file of a run is in the targets' units.
struct FoldData {
  const FoldPlan* plan = nullptr;
  Panel norm;
  ScoreSpec sc;
  double prepare_seconds = 0;
};
FoldData prepare_fold(const RunConfig& cfg, const Panel& panel, const FoldPlan& plan);
// An engine's predictions (N, T, K) of a fold in the targets' units: data.target_scale inverted.
std::vector<float> engine_predictions(std::vector<float> pred, const FoldData& d);

// The windows a model of `tc` predicts [t0, t1) of a panel of N × T with (validation, test, the pooled
// walk-forward predictions): each date from the window of its last train.seq_len rows, the definition `predict`
// and the stream share (predict/window_plan.h's date_windows; docs/data.md, "What a date's prediction is").
WindowPlan evaluation_plan(const TrainConfig& tc, int N, int T, int t0, int t1);
// What a run's validation, test and pooled predictions are for a model of `tc`: mode carry for a carry-trained
// model (train.state = "carry": the state it was trained to carry), else mode window.
PredictMode evaluation_mode(const TrainConfig& tc);
// Member m's predictions (N, T, K) of the dates [t0, t1) of its fold in evaluation_mode, with its live weights or
// `params`, in the targets' units (engine_predictions).
std::vector<float> evaluate_range(Engine& engine, int m, const TrainConfig& tc, const FoldData& d, int t0, int t1,
                                  const std::vector<float>* params);
// The range a fold's summaries score: its test range, or the validation range without one.
TimeRange scored_range(const Split& s);

// "1.23 s": for the progress messages of long preparations.
std::string seconds_text(double seconds);
std::string seconds_text(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);

}  // namespace mlalpha
