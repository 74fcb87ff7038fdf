// The summaries of a solo run and of a population (summary.h).
#include "run/summary.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "data/csv_write.h"
#include "eval/folds.h"
#include "mlalpha/eval.h"
#include "predict/prediction_mean.h"
#include "predict/window_plan.h"
#include "run/leaderboard.h"
#include "run/oos_pool.h"
#include "run/valid_pool.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

// The panel predictions are written and pooled against: the processed targets, as they are scored. Per-date
// target processing does not depend on the fold, so any fold's preparation gives them.
class ProcessedTargets {
 public:
  ProcessedTargets(const RunConfig& cfg, const Panel& panel, const FoldPlan& first) : cfg_(cfg), panel_(panel), first_(first) {}
  const Panel& get() {
    if (cfg_.data.target_norm == "none") return panel_;
    if (!ready_) processed_ = prepared(panel_, cfg_.data, first_.stats), ready_ = true;
    return processed_;
  }

 private:
  const RunConfig& cfg_;
  const Panel& panel_;
  const FoldPlan& first_;
  Panel processed_;
  bool ready_ = false;
};

// ---- a solo run

// The walk-forward backtest at a glance: the pooled test blocks' cumulative long-short, each fold's start marked.
void write_pooled_plot(const fs::path& path, const MetricsResult& m, const RunContext& c,
                       const std::vector<FoldReport>& reports) {
  std::vector<int> starts;
  for (const FoldReport& f : reports)
    if (f.has_test) starts.push_back(f.split.test_begin);
  write_long_short_plot(path.string(), m, c.panel,
                        "pooled out-of-sample (" + std::to_string(starts.size()) +
                            " folds, each test block by its fold's best checkpoint)",
                        target_units(c.cfg.data), starts);
}

FoldReport report_of(const FoldResult& r) {
  FoldReport f;
  f.fold = r.fold;
  f.split = r.split;
  f.steps = r.steps;
  f.best_step = r.best_step;
  f.best_value = r.best_value;
  f.has_test = r.has_test;
  f.test = r.test;
  return f;
}

class SoloSummary : public Summary {
 public:
  SoloSummary(RunContext& c, const std::vector<FoldPlan>& plans, RunResult& result)
      : c_(c), plans_(plans), result_(result), targets_(c.cfg, c.panel, plans.front()) {}

  void add(const std::vector<int>&, std::vector<Trained>& trained, bool) override {
    for (Trained& t : trained) {
      if (t.trained) result_.folds.push_back(t.res);  // folds finished earlier are in folds.csv, not here
      if (c_.folds == 1) continue;
      reports_.push_back(report_of(t.res));
      if (t.res.has_test) oos().add(plans_[size_t(t.res.fold)], t.best_pred);
      std::vector<float>().swap(t.best_pred);
    }
    if (c_.folds == 1) return;
    const fs::path out(c_.cfg.run.out_dir);
    write_folds_csv(out / "folds.csv", reports_, c_.panel.times, c_.cfg.run.metric);
    OosSummary pooled;
    if (oos().any()) {
      pooled = oos().write(out / "oos_pred");
      result_.has_oos = true;
      result_.oos = pooled.metrics;
      result_.oos_file = pooled.file;
      write_pooled_plot(out / "long_short.svg", pooled.metrics, c_, reports_);
    }
    write_folds_json(out / "folds.json", reports_, c_.panel.times, c_.cfg.run.metric, oos().any() ? &pooled : nullptr);
    result_.fold_test_mean = mean_test_metrics(reports_);
    result_.fold_test_std = std_test_metrics(reports_);
  }

 private:
  OosPool& oos() {
    if (!oos_) oos_ = std::make_unique<OosPool>(targets_.get(), c_.cfg);
    return *oos_;
  }
  RunContext& c_;
  const std::vector<FoldPlan>& plans_;
  RunResult& result_;
  ProcessedTargets targets_;
  std::vector<FoldReport> reports_;  // every fold summarised so far, in fold order
  std::unique_ptr<OosPool> oos_;
};

// ---- a population

std::vector<std::string> setting_keys(const std::vector<MemberSpec>& members) {
  std::vector<std::string> keys;
  for (const MemberSpec& m : members)
    for (const auto& kv : m.settings)
      if (std::find(keys.begin(), keys.end(), kv.first) == keys.end()) keys.push_back(kv.first);
  return keys;
}

std::string setting_of(const MemberSpec& m, const std::string& key) {
  for (const auto& kv : m.settings)
    if (kv.first == key) return kv.second;
  return "";
}

// The mean over members of their best-weight predictions (N, T, K), in member order: NaN where any member has
// NaN; members without best weights (no validation ran) are left out.
std::vector<float> mean_prediction(const std::vector<const Trained*>& members) {
  PredictionMean mean;
  for (const Trained* t : members)
    if (!t->best_pred.empty()) mean.add(t->best_pred);
  return mean.empty() ? std::vector<float>{} : mean.mean();
}

MemberResult member_result(const Trained& t) {
  MemberResult m;
  m.name = t.spec.name;
  m.fold = t.data->plan->fold;
  m.settings = t.spec.settings;
  m.dir = t.res.dir;
  m.steps = t.res.steps;
  m.best_step = t.res.best_step;
  m.best_value = t.res.best_value;
  m.early_stopped = t.res.early_stopped;
  m.has_test = t.res.has_test;
  m.test = t.res.test;
  return m;
}

class PopulationSummary : public Summary {
 public:
  PopulationSummary(RunContext& c, const std::vector<FoldPlan>& plans, const std::vector<MemberSpec>& members,
                    RunResult& result)
      : c_(c), result_(result), targets_(c.cfg, c.panel, plans.front()), keys_(setting_keys(members)) {
    for (const MemberSpec& m : members)  // the members of one fold, in order
      if (std::find(names_.begin(), names_.end(), m.name) == names_.end()) names_.push_back(m.name);
  }

  void add(const std::vector<int>& folds, std::vector<Trained>& trained, bool final) override {
    for (const Trained& t : trained) specs_[t.spec.name] = t.spec;
    for (int f : folds) fold_board(f, trained);
    for (Trained& t : trained) {  // pooled now: one fold's predictions at a time
      std::vector<float>().swap(t.best_pred);
      std::vector<float>().swap(t.valid_pred);
    }
    if (c_.folds > 1) run_board(folds.back(), final);
  }

 private:
  const Panel& out_panel() { return targets_.get(); }
  OosPool& member_oos(size_t i) {
    if (member_oos_.empty())
      for (size_t k = 0; k < names_.size(); ++k) member_oos_.push_back(std::make_unique<OosPool>(out_panel(), c_.cfg));
    return *member_oos_[i];
  }
  ValidPool& member_valid(size_t i) {
    if (member_valid_.empty()) member_valid_.resize(names_.size());
    return member_valid_[i];
  }
  OosPool& ensemble_oos() {
    if (!ensemble_oos_) ensemble_oos_ = std::make_unique<OosPool>(out_panel(), c_.cfg);
    return *ensemble_oos_;
  }
  std::vector<std::string> board_columns(const std::vector<std::string>& tail) const {
    std::vector<std::string> cols{"rank", "member"};
    cols.insert(cols.end(), keys_.begin(), keys_.end());
    cols.insert(cols.end(), tail.begin(), tail.end());
    return cols;
  }

  // A fold's leaderboard and mean-ensemble (fold-k/ for walk-forward runs, out_dir for one split).
  void fold_board(int f, const std::vector<Trained>& trained) {
    const RunConfig& cfg = c_.cfg;
    std::vector<const Trained*> of_fold;
    for (const Trained& t : trained)
      if (t.data->plan->fold == f) of_fold.push_back(&t);
    const FoldData& d = *of_fold.front()->data;
    const Split& split = d.plan->split;
    const bool test = split.has_test();
    std::vector<std::string> tail{"best_step", "valid_" + cfg.run.metric};
    for (const MetricInfo& info : metric_table()) tail.push_back(std::string("test_") + info.name);
    tail.push_back("dir");
    std::vector<LeaderboardEntry> entries;
    for (const Trained* t : of_fold) {
      LeaderboardEntry e;
      e.key = t->res.best_step > 0 ? t->res.best_value : NAN;
      e.cells.push_back(t->spec.name);
      for (const std::string& k : keys_) e.cells.push_back(setting_of(t->spec, k));
      e.cells.push_back(t->res.best_step > 0 ? std::to_string(t->res.best_step) : "");
      e.cells.push_back(csv_number(e.key));
      add_metric_cells(e.cells, t->res.has_test, t->res.test.mean);
      e.cells.push_back(t->res.dir);
      entries.push_back(std::move(e));
    }
    const std::vector<float> ensemble_pred = mean_prediction(of_fold);
    std::vector<std::string> ens;
    MetricsResult ensemble;
    if (!ensemble_pred.empty()) {
      const TimeRange r = scored_range(split);
      ensemble = score_range(ensemble_pred, d.norm, d.sc, r.t0, r.t1);
      const fs::path dir = d.plan->dir / "ensemble";
      c_.dirs.create(dir);
      write_predictions((dir / "pred").string(), out_panel(), ensemble_pred, r, {},
                        window_contexts(out_panel().N, out_panel().T, cfg.train.L));
      ens.push_back("ensemble");
      ens.insert(ens.end(), keys_.size() + 1, "");
      ens.push_back(test ? "" : csv_number(metric_by_name(ensemble.mean, cfg.run.metric)));
      add_metric_cells(ens, test, ensemble.mean);
      ens.push_back(dir.string());
    }
    const Leaderboard board = rank_entries(cfg.run.metric, board_columns(tail), std::move(entries), ens);
    const std::string file = write_leaderboard(d.plan->dir, board);
    for (const Trained* t : of_fold) {
      result_.members.push_back(member_result(*t));
      const size_t i = size_t(std::find(names_.begin(), names_.end(), t->spec.name) - names_.begin());
      if (c_.folds > 1 && t->res.has_test) member_oos(i).add(*d.plan, t->best_pred);
      if (c_.folds > 1 && !t->valid_pred.empty()) member_valid(i).add(out_panel(), split, t->valid_pred);
    }
    if (c_.folds == 1) {
      result_.leaderboard_file = file;
      result_.leaderboard = board;
      result_.has_ensemble = !ensemble_pred.empty();
      result_.ensemble = ensemble;
      c_.rep.message("leaderboard (" + file + ", by validation " + cfg.run.metric + "):" +
                         leaderboard_text(board, board_columns({"best_step", "valid_" + cfg.run.metric,
                                                                "test_" + cfg.run.metric}),
                                          10),
                     f, 0);
    } else if (!ensemble_pred.empty() && test) {
      ensemble_oos().add(*d.plan, ensemble_pred);
    }
  }

  // Walk-forward: the run's leaderboard of the members ranked by their pooled validation run.metric (chosen
  // without looking at a test block), their pooled out-of-sample metrics beside it.
  void run_board(int last_fold, bool final) {
    const RunConfig& cfg = c_.cfg;
    const fs::path out(cfg.run.out_dir);
    const std::string valid_column = "valid_" + cfg.run.metric;
    const double ppy = cfg.run.periods_per_year > 0 ? cfg.run.periods_per_year : periods_per_year(c_.panel);
    std::vector<std::string> tail{"folds", valid_column};
    for (const MetricInfo& info : metric_table()) tail.push_back(std::string("oos_") + info.name);
    tail.push_back("dir");
    std::vector<LeaderboardEntry> entries;
    for (size_t i = 0; i < names_.size(); ++i) {
      const auto spec = specs_.find(names_[i]);
      if (spec == specs_.end()) continue;
      int n = 0;
      for (const MemberResult& m : result_.members) n += m.name == names_[i] && m.has_test;
      LeaderboardEntry e;
      e.cells.push_back(names_[i]);
      for (const std::string& k : keys_) e.cells.push_back(setting_of(spec->second, k));
      e.cells.push_back(std::to_string(n));
      if (member_valid(i).any())
        e.key = metric_by_name(member_valid(i).score(cfg.run.quantiles, ppy).mean, cfg.run.metric);
      e.cells.push_back(csv_number(e.key));
      const fs::path dir = out / names_[i];
      if (member_oos(i).any()) {
        c_.dirs.create(dir);
        const OosSummary o = member_oos(i).write(dir / "oos_pred");
        add_metric_cells(e.cells, true, o.metrics.mean);
        for (MemberResult& m : result_.members)
          if (m.name == names_[i]) m.has_oos = true, m.oos = o.metrics, m.oos_file = o.file;
      } else {
        add_metric_cells(e.cells, false, Metrics{});
      }
      e.cells.push_back(dir.string());
      entries.push_back(std::move(e));
    }
    std::vector<std::string> ens;
    if (ensemble_oos().any()) {
      c_.dirs.create(out / "ensemble");
      const OosSummary o = ensemble_oos().write(out / "ensemble" / "pred");
      write_long_short_plot((out / "ensemble" / "long_short.svg").string(), o.metrics, c_.panel,
                            "the mean-ensemble, pooled out-of-sample over the folds' test blocks",
                            target_units(cfg.data));
      result_.has_ensemble = true;
      result_.ensemble = o.metrics;
      ens.push_back("ensemble");
      ens.insert(ens.end(), keys_.size(), "");
      ens.push_back(std::to_string(c_.folds));
      ens.push_back("");  // the ensemble is not ranked
      add_metric_cells(ens, true, o.metrics.mean);
      ens.push_back((out / "ensemble").string());
    }
    const Leaderboard board = rank_entries(cfg.run.metric, board_columns(tail), std::move(entries), ens);
    result_.leaderboard_file = write_leaderboard(out, board);
    result_.leaderboard = board;
    if (!final) return;
    std::vector<std::string> cols =
        board_columns({"folds", valid_column, "oos_" + cfg.run.metric, "oos_ic", "oos_ls_sharpe"});
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    c_.rep.message("leaderboard (" + result_.leaderboard_file + ", by pooled validation " + cfg.run.metric +
                       ", the pooled test blocks beside it):" + leaderboard_text(board, cols, 10),
                   last_fold, 0);
  }

  RunContext& c_;
  RunResult& result_;
  ProcessedTargets targets_;
  std::vector<std::string> keys_;   // the settings the members vary
  std::vector<std::string> names_;  // the members of one fold, in order
  std::map<std::string, MemberSpec> specs_;
  std::vector<std::unique_ptr<OosPool>> member_oos_;  // walk-forward: each member's test blocks, pooled
  std::vector<ValidPool> member_valid_;                // and its validation blocks
  std::unique_ptr<OosPool> ensemble_oos_;            // and the ensemble's
};

}  // namespace

std::unique_ptr<Summary> make_solo_summary(RunContext& c, const std::vector<FoldPlan>& plans, RunResult& result) {
  return std::make_unique<SoloSummary>(c, plans, result);
}

std::unique_ptr<Summary> make_population_summary(RunContext& c, const std::vector<FoldPlan>& plans,
                                                 const std::vector<MemberSpec>& members, RunResult& result) {
  return std::make_unique<PopulationSummary>(c, plans, members, result);
}

}  // namespace mlalpha
