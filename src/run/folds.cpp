// The folds of a run (folds.h).
#include "run/folds.h"

#include <cstdio>

#include "core/error.h"
#include "eval/folds.h"
#include "mlalpha/eval.h"

namespace mlalpha {

namespace fs = std::filesystem;

std::vector<FoldPlan> plan_folds(const RunConfig& cfg, const Panel& panel) {
  const std::vector<Split> splits = make_splits(cfg.split, panel);
  const int folds = int(splits.size());
  const fs::path out(cfg.run.out_dir);
  const std::string source = cfg.data.source == "csv" ? "data.csv = '" + cfg.data.csv + "'"
                             : cfg.data.source == "npy" ? "data.targets = '" + cfg.data.targets + "'"
                                                        : std::string("the synthetic panel");
  std::vector<FoldPlan> plans;
  for (int f = 0; f < folds; ++f) {
    FoldPlan p;
    p.fold = f;
    p.split = splits[f];
    p.dir = folds > 1 ? out / fold_dir_name(f) : out;
    const std::string where = folds > 1 ? "walk-forward fold " + std::to_string(f) + ": " : std::string();
    const int train_len = p.split.train_end - p.split.train_begin;
    require(cfg.train.L <= train_len, where + "train.seq_len = " + std::to_string(cfg.train.L) +
                                          " is longer than the training range (" + std::to_string(train_len) +
                                          " steps: " + p.split.to_string() + "); lower train.seq_len or move split.train_end");
    require_finite_targets(panel, p.split.train_begin, p.split.train_end, where + "the training range", source);
    require_finite_targets(panel, p.split.valid_begin, p.split.valid_end, where + "the validation range", source);
    if (p.split.has_test())
      require_finite_targets(panel, p.split.test_begin, p.split.test_end, where + "the test range", source);
    p.stats = fit_feature_stats(panel, cfg.data, p.split.train_begin, p.split.train_end);
    plans.push_back(std::move(p));
  }
  return plans;
}

ScoreSpec score_spec(const RunConfig& cfg, const Panel& panel, const Split& split) {
  ScoreSpec sc;
  sc.quantiles = cfg.run.quantiles;
  sc.periods_per_year = cfg.run.periods_per_year > 0 ? cfg.run.periods_per_year : periods_per_year(panel);
  sc.train_mean = target_means(panel.y, panel.N, panel.T, panel.K, split.train_begin, split.train_end);
  return sc;
}

MetricsResult score_range(const std::vector<float>& pred, const Panel& norm, const ScoreSpec& sc, int t0, int t1) {
  return score_with_mean(pred, sc.targets ? *sc.targets : norm, {t0, t1}, sc.quantiles, sc.periods_per_year,
                         sc.train_mean);
}

FoldData prepare_fold(const RunConfig& cfg, const Panel& panel, const FoldPlan& plan) {
  const auto t0 = std::chrono::steady_clock::now();
  FoldData d;
  d.plan = &plan;
  d.norm = prepared(panel, cfg.data, plan.stats);
  d.sc = score_spec(cfg, panel, plan.split);
  if (!plan.stats.target_scale.empty()) {
    auto targets = std::make_shared<Panel>();  // the targets alone: scoring reads nothing else
    targets->N = d.norm.N, targets->T = d.norm.T, targets->F = d.norm.F, targets->K = d.norm.K;
    targets->y = d.norm.y;
    d.sc.targets = std::move(targets);
    scale_targets(d.norm, plan.stats);
  }
  d.prepare_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

std::vector<float> engine_predictions(std::vector<float> pred, const FoldData& d) {
  unscale_predictions(pred, d.norm.K, d.plan->stats);
  return pred;
}

WindowPlan evaluation_plan(const TrainConfig& tc, int N, int T, int t0, int t1) {
  return date_windows(N, T, tc.L, t0, t1);
}

PredictMode evaluation_mode(const TrainConfig& tc) {
  return tc.state == StateMode::Carry ? PredictMode::carry : PredictMode::window;
}

std::vector<float> evaluate_range(Engine& engine, int m, const TrainConfig& tc, const FoldData& d, int t0, int t1,
                                  const std::vector<float>* params) {
  if (evaluation_mode(tc) == PredictMode::carry) return engine_predictions(engine.predict_carry(m, t0, t1, params), d);
  return engine_predictions(engine.predict(m, evaluation_plan(tc, d.norm.N, d.norm.T, t0, t1), params), d);
}

TimeRange scored_range(const Split& s) {
  return s.has_test() ? TimeRange{s.test_begin, s.test_end} : TimeRange{s.valid_begin, s.valid_end};
}

std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  return buf;
}
std::string seconds_text(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return seconds_text(std::chrono::duration<double>(b - a).count());
}

}  // namespace mlalpha
