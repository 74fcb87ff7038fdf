// Degenerate runs refused before training, and a run whose selection metric never had a value (data_checks.h).
#include "run/data_checks.h"

#include <algorithm>
#include <cmath>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "mlalpha/metric_table.h"

namespace mlalpha {

namespace {

// What a time range of the targets offers a cross-sectional computation: the most instruments with a finite
// target on one date (over the targets), and the dates where at least `need` instruments have finite targets
// that are not all equal.
struct CrossSections {
  int most = 0;
  int varying_dates = 0;
  int example_t = -1, example_k = -1, example_n = 0;  // a date whose targets are all equal, for the message
  double example_value = 0;
};

CrossSections cross_sections(const Panel& p, int t0, int t1, int need) {
  CrossSections c;
  for (int t = t0; t < t1; ++t) {
    bool varying = false;
    for (int k = 0; k < p.K; ++k) {
      int n = 0;
      double lo = INFINITY, hi = -INFINITY;
      for (int i = 0; i < p.N; ++i) {
        const double v = p.y[(size_t(i) * p.T + t) * p.K + k];
        if (!std::isfinite(v)) continue;
        ++n, lo = std::min(lo, v), hi = std::max(hi, v);
      }
      c.most = std::max(c.most, n);
      if (n >= need && lo < hi) varying = true;
      if (n >= need && lo == hi && c.example_t < 0) c.example_t = t, c.example_k = k, c.example_n = n, c.example_value = lo;
    }
    c.varying_dates += varying;
  }
  return c;
}

// The finite targets of one instrument series (N = 1) over a range and whether they vary.
struct SeriesValues {
  int n = 0;
  bool varying = false;
};
SeriesValues series_values(const Panel& p, int t0, int t1) {
  SeriesValues s;
  for (int k = 0; k < p.K; ++k) {
    int n = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int t = t0; t < t1; ++t) {
      const double v = p.y[size_t(t) * p.K + k];
      if (!std::isfinite(v)) continue;
      ++n, lo = std::min(lo, v), hi = std::max(hi, v);
    }
    s.n = std::max(s.n, n);
    s.varying = s.varying || (n >= 3 && lo < hi);
  }
  return s;
}

std::string time_label(const Panel& p, int t) {
  return size_t(t) < p.times.size() ? "'" + p.times[size_t(t)] + "'" : "time step " + std::to_string(t);
}
std::string target_label(const Panel& p, int k) {
  return size_t(k) < p.target_names.size() ? "'" + p.target_names[size_t(k)] + "'" : "target " + std::to_string(k);
}
std::string range_label(const Panel& p, int t0, int t1, const std::string& what, int folds, int fold) {
  return (folds > 1 ? "fold " + std::to_string(fold) + "'s " : std::string("the ")) + what + " " +
         range_text(p, {t0, t1});
}

constexpr int kMinPairs = 3;  // what the IC needs on a date (MetricsInput::min_pairs)

void check_ic_loss(const RunConfig& cfg, const Panel& p, const std::vector<FoldPlan>& plans) {
  if (cfg.train.loss != LossKind::IC) return;
  const std::string head = "train.loss = 'ic' needs >= 3 instruments with finite targets on a date (it correlates the "
                           "predictions with the targets across the instruments of each date)";
  require(p.N >= kMinPairs, head + "; the panel has N = " + std::to_string(p.N) +
                                (p.N == 1 ? " (a single series)" : std::string(" instruments")) +
                                ", so the loss and its gradient are 0 at every step: use train.loss = 'mse' (or 'huber')");
  const int cs = cfg.train.cross_section(p.N);
  require(cs >= kMinPairs, head + "; train.instruments = " + std::to_string(cfg.train.instruments) +
                               " makes each cross-section " + std::to_string(cs) +
                               " instruments: set train.instruments >= 3 (0: all " + std::to_string(p.N) + ")");
  for (const FoldPlan& plan : plans) {
    const Split& s = plan.split;
    const CrossSections c = cross_sections(p, s.train_begin, s.train_end, kMinPairs);
    if (c.varying_dates > 0) continue;
    const std::string where = range_label(p, s.train_begin, s.train_end, "training range", int(plans.size()), plan.fold);
    if (c.most < kMinPairs)
      throw Error(head + "; " + where + " has at most " + std::to_string(c.most) +
                  " instruments with a finite target on any date: use train.loss = 'mse' (or 'huber')");
    throw Error(head + " whose targets differ; in " + where + " the targets are equal across the instruments of " +
                "every date (e.g. " + target_label(p, c.example_k) + " is " + std::to_string(c.example_value) +
                " for all " + std::to_string(c.example_n) + " instruments on " + time_label(p, c.example_t) +
                "), so the correlation and its gradient are 0: check the target columns, or use train.loss = 'mse'");
  }
}

// Per-date processing across instruments (data.feature_norm zscore | rank | robust, data.target_norm).
void check_per_date_processing(const RunConfig& cfg, const Panel& p, std::vector<std::string>& warnings) {
  const DataConfig& d = cfg.data;
  auto check = [&](const std::string& key, const std::string& mode, const char* what, const char* instead) {
    require(p.N >= 2, key + " = '" + mode + "' processes each " + what + " across the instruments of a date, but the " +
                          "panel has N = 1 instrument: every " + what + " would become 0 and the model would learn " +
                          "nothing. " + instead);
    if (p.N == 2)
      warnings.push_back("warning: " + key + " = '" + mode + "' across N = 2 instruments maps each " + what +
                         " of a date to -1, 0 or +1 (which of the two is larger, nothing more)");
  };
  if (d.feature_norm != "global")
    check("data.feature_norm", d.feature_norm, "feature",
          "Use data.feature_norm = 'global' (statistics of the training range) for a single series");
  if (d.target_norm != "none")
    check("data.target_norm", d.target_norm, "target",
          "Use data.target_norm = 'none' (data.target_scale = 'std' rescales a single series globally)");
}

// run.metric on each fold's validation range: refused when the data cannot give it a value at any validation.
void check_selection_metric(const RunConfig& cfg, const Panel& p, const std::vector<FoldPlan>& plans) {
  const std::string& m = cfg.run.metric;
  const std::string key = "run.metric = '" + m + "'";
  const std::string other = "choose a run.metric this data defines (mse, dir_acc, ts_mean" +
                            std::string(p.N >= kMinPairs ? ", ic" : p.N == 1 ? ", ic (over time)" : "") + ")";
  const bool correlation = m == "ic" || m == "rank_ic" || m == "icir";
  const bool portfolio = m.rfind("ls_", 0) == 0 || m == "turnover" || find_metric(m) == nullptr;  // q1 .. qQ
  const bool annualised = m == "ls_sharpe" || m == "ts_sharpe";
  if (annualised) {
    const double ppy = cfg.run.periods_per_year > 0 ? cfg.run.periods_per_year : periods_per_year(p);
    require(!std::isnan(ppy), key + " is annualised with the periods per year, which the time labels do not give " +
                                  "(they are not dates): set run.periods_per_year (e.g. 252 for trading days), or " +
                                  "choose " + (m == "ls_sharpe" ? "ls_mean" : "ts_mean"));
  }
  if (m == "icir")
    require(p.N >= 2, key + " is the mean over the standard deviation of the per-date IC, and a single series (N = 1) "
                            "has one IC over time, no spread: choose run.metric = 'ic' (its correlation over time), "
                            "'mse' or 'ts_sharpe'");
  if (portfolio)
    require(p.N >= 2, key + " needs quantile portfolios, formed across the instruments of a date, and a single series "
                            "(N = 1) has none: choose run.metric = 'ts_sharpe' or 'ts_mean' (the sign strategy of the "
                            "series), 'mse' or 'ic'");
  for (const FoldPlan& plan : plans) {
    const Split& s = plan.split;
    const std::string where = range_label(p, s.valid_begin, s.valid_end, "validation range", int(plans.size()), plan.fold);
    if (correlation && p.N == 1) {
      const SeriesValues v = series_values(p, s.valid_begin, s.valid_end);
      require(v.varying, key + " is a correlation over time for a single series, but " + where + " has " +
                             std::to_string(v.n) + " finite targets" + (v.n >= 3 ? ", all equal" : "") +
                             ", so it is NaN at every validation: " + other);
    } else if (correlation) {
      const CrossSections c = cross_sections(p, s.valid_begin, s.valid_end, kMinPairs);
      const int need_dates = m == "icir" ? 2 : 1;
      if (c.varying_dates >= need_dates) continue;
      throw Error(key + " correlates the predictions with the targets across the instruments of a date and needs >= 3 "
                  "of them with finite, unequal targets" + (m == "icir" ? " on at least 2 dates" : std::string()) +
                  "; " + where + (p.N < kMinPairs ? " has N = " + std::to_string(p.N) + " instruments"
                                                  : " has " + std::to_string(c.varying_dates) + " such dates (at most " +
                                                        std::to_string(c.most) + " instruments with a target on one)") +
                  ", so it is NaN at every validation and no best checkpoint can be chosen: " + other);
    } else if (portfolio) {
      const CrossSections c = cross_sections(p, s.valid_begin, s.valid_end, cfg.run.quantiles);
      if (c.most >= cfg.run.quantiles) continue;
      throw Error(key + " ranks the instruments of each date into run.quantiles = " + std::to_string(cfg.run.quantiles) +
                  " groups, but " + where + " has at most " + std::to_string(c.most) +
                  " instruments with a finite target on a date, so it is NaN at every validation: " +
                  (c.most >= 2 ? "set run.quantiles = " + std::to_string(c.most) + " (or fewer, >= 2), or "
                               : std::string()) + other);
    }
  }
}

}  // namespace

std::vector<std::string> check_run_data(const RunConfig& cfg, const Panel& p, const std::vector<FoldPlan>& plans,
                                        bool fresh) {
  std::vector<std::string> warnings;
  check_ic_loss(cfg, p, plans);
  check_per_date_processing(cfg, p, warnings);
  check_selection_metric(cfg, p, plans);
  if (cfg.model.Q > cfg.train.L && cfg.model.Q > 64)
    warnings.push_back("warning: model.chunk = " + std::to_string(cfg.model.Q) + " is longer than a training window " +
                       "(train.seq_len = " + std::to_string(cfg.train.L) + "): each window is one chunk, and the " +
                       "longer chunk only costs memory and time; set model.chunk <= " + std::to_string(cfg.train.L));
  if (fresh && !cfg.train.init.empty()) {
    try {
      load_checkpoint_weights(cfg.train.init, cfg.model);
    } catch (const Error& e) {
      throw Error("train.init = '" + cfg.train.init + "' cannot start this model: " + e.what());
    }
  }
  return warnings;
}

void require_selection_metric(const RunConfig& cfg, const RunResult& r, bool overwriting) {
  std::vector<std::string> models;
  auto never = [](int64_t best_step, double best_value) { return best_step > 0 && std::isnan(best_value); };
  for (const FoldResult& f : r.folds)
    if (never(f.best_step, f.best_value))
      models.push_back(r.folds.size() > 1 || cfg.split.walk_forward_folds > 0 ? "fold " + std::to_string(f.fold)
                                                                             : std::string("the model"));
  for (const MemberResult& m : r.members)
    if (never(m.best_step, m.best_value))
      models.push_back(m.name + (cfg.split.walk_forward_folds > 0 ? " of fold " + std::to_string(m.fold) : std::string()));
  if (models.empty()) return;
  std::string list;
  for (size_t i = 0; i < models.size() && i < 5; ++i) list += (i ? ", " : "") + models[i];
  if (models.size() > 5) list += " and " + std::to_string(models.size() - 5) + " more";
  throw Error("run.metric = '" + cfg.run.metric + "' was NaN at every validation of " + list +
              ", so no best checkpoint could be chosen (best.safetensors holds the first validation's weights) and "
              "the run reports no result; " +
                  (overwriting ? "--overwrite replaces a run only by one that has a result, so the old run in " +
                                     r.run_dir + " is restored and this run's files are removed"
                               : "its files stay in " + r.run_dir) +
                  ". Choose a run.metric this data defines "
              "(mse is defined wherever predictions and targets are) or check the validation range's targets");
}

}  // namespace mlalpha
