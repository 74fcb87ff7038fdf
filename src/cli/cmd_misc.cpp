// `ml-alpha eval | predict | synth | info`: parse, call the library (include/mlalpha/), print.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "mlalpha/device.h"
#include "mlalpha/model.h"

namespace mlalpha {

namespace {

// The checkpoint's model applied to the data: the data settings given on the command line or in --config,
// else those recorded in the checkpoint.
struct Prepared {
  Model model;
  RunConfig cfg;
  Panel panel;
  Split split;
  TimeRange range;
};

Prepared prepare(const EvalArgs& a, bool allow_all) {
  Prepared p{Model::load(a.checkpoint), load_run_config(a.config, a.overrides), {}, {}, {}};
  if (!p.cfg.was_given_in("data")) {
    if (!p.model.has_data_config())
      throw Error(a.checkpoint + " does not record the data it was trained on: give the data settings (--config FILE, "
                                 "or --set data.source=... with its paths)");
    p.cfg.data = p.model.data_config();
    std::cout << "data: as recorded in " << a.checkpoint << " (data.source = " << p.cfg.data.source << ")" << std::endl;
  }
  if (!p.cfg.was_given_in("split") && p.model.has_data_config()) p.cfg.split = p.model.split_config();
  // The data is processed as in training (Model::prepare): a different processing setting is a mistake.
  const DataConfig& trained = p.model.data_config();
  auto same = [&](const char* key, const std::string& given, const std::string& have) {
    require(!p.cfg.was_given(key) || given == have, std::string(key) + " = '" + given + "' but " + a.checkpoint +
                                                        " was trained with '" + have + "'; eval and predict process " +
                                                        "the data as the training did (drop the setting)");
  };
  same("data.feature_norm", p.cfg.data.feature_norm, trained.feature_norm);
  same("data.target_norm", p.cfg.data.target_norm, trained.target_norm);
  same("data.nan_fill", p.cfg.data.nan_fill, trained.nan_fill);
  same("data.robust_clip", std::to_string(p.cfg.data.robust_clip), std::to_string(trained.robust_clip));
  require(a.split == "train" || a.split == "valid" || a.split == "test" || (allow_all && a.split == "all"),
          "--split must be train, valid, test" + std::string(allow_all ? " or all" : "") + ", got '" + a.split + "'");
  p.panel = load_panel(p.cfg.data);
  p.model.check_panel(p.panel, a.checkpoint);
  const std::vector<Split> splits = make_splits(p.cfg.split, p.panel);
  const int fold = a.fold >= 0 ? a.fold : (p.model.fold() < int(splits.size()) ? p.model.fold() : 0);
  require(fold < int(splits.size()),
          "--fold " + std::to_string(fold) + " does not exist: " +
              (splits.size() == 1 ? std::string("the split is a single one (fold 0)")
                                  : "the split has " + std::to_string(splits.size()) + " folds, 0 to " +
                                        std::to_string(splits.size() - 1)));
  p.split = splits[fold];
  p.range = split_range(p.split, a.split, p.panel.T);
  return p;
}

std::string label(const std::vector<std::string>& names, size_t i) {
  return i < names.size() ? names[i] : std::to_string(i);
}

}  // namespace

int cmd_eval(const EvalArgs& a) {
  const Prepared p = prepare(a, false);
  for (const std::string& w : p.model.range_warnings(p.panel, p.range, "the evaluated " + a.split + " range"))
    std::cerr << w << std::endl;
  ScoreOptions so;
  so.quantiles = p.cfg.run.quantiles;
  so.periods_per_year = p.cfg.run.periods_per_year;
  so.train = p.model.training_range(p.panel);
  const MetricsResult r = p.model.evaluate(p.panel, p.range, p.cfg.run.device, p.cfg.run.tf32, so);
  std::printf("%s (step %lld) on the %s split, time steps %s:\n", a.checkpoint.c_str(),
              static_cast<long long>(p.model.step()), a.split.c_str(), range_text(p.panel, p.range).c_str());
  std::printf("| target | mse | mse_zero | mse_mean | ic | rank_ic | icir | dir_acc | points |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  auto row = [](const std::string& name, const Metrics& m) {
    std::printf("| %s | %.6g | %.6g | %.6g | %.4f | %.4f | %.3f | %.4f | %lld |\n", name.c_str(), m.mse, m.mse_zero,
                m.mse_mean, m.ic, m.rank_ic, m.icir, m.dir_acc, static_cast<long long>(m.points));
  };
  for (size_t k = 0; k < r.per_target.size(); ++k) row(label(p.panel.target_names, k), r.per_target[k]);
  if (r.per_target.size() > 1) row("mean", r.mean);
  // The portfolio table: quantile means q1 (lowest predictions) .. qQ, then the long-short statistics.
  std::string head = "| target |", rule = "|---|";
  for (const std::string& q : quantile_names(so.quantiles)) head += " " + q + " |", rule += "---|";
  std::printf("\n%s ls_mean | ls_std | ls_sharpe | turnover | dates |\n%s---|---|---|---|---|\n", head.c_str(), rule.c_str());
  auto prow = [](const std::string& name, const Metrics& m) {
    std::printf("| %s |", name.c_str());
    for (double q : m.quantile_means) std::printf(" %.6g |", q);
    std::printf(" %.6g | %.6g | %.3f | %.4f | %lld |\n", m.ls_mean, m.ls_std, m.ls_sharpe, m.turnover,
                static_cast<long long>(m.portfolio_steps));
  };
  for (size_t k = 0; k < r.per_target.size(); ++k) prow(label(p.panel.target_names, k), r.per_target[k]);
  if (r.per_target.size() > 1) prow("mean", r.mean);
  if (std::isnan(score_periods_per_year(p.panel, so)))
    std::printf("ls_sharpe is NaN: the time labels are not dates, so the periods per year are unknown "
                "(set run.periods_per_year, e.g. --set run.periods_per_year=252)\n");
  if (so.train.empty()) std::printf("mse_mean is NaN: the checkpoint does not record its training range\n");
  if (!a.long_short_svg.empty()) {
    write_long_short_plot(a.long_short_svg, r, p.panel, a.split + " (" + a.checkpoint + ")");
    std::printf("wrote %s\n", a.long_short_svg.c_str());
  }
  return 0;
}

int cmd_predict(const PredictArgs& a) {
  require(!a.out.empty(), "--out is required (a path prefix: <out>.npy and <out>.csv are written)");
  const Prepared p = prepare(a, true);
  for (const std::string& w : p.model.range_warnings(p.panel, p.range, "the predicted " + a.split + " range"))
    std::cerr << w << std::endl;
  // The targets written beside the predictions are the processed ones the predictions estimate.
  const Panel norm = p.model.prepare(p.panel);
  const std::vector<float> pred = p.model.predict_prepared(norm, p.range, p.cfg.run.device, p.cfg.run.tf32);
  const PredictionFiles f = write_predictions(a.out, norm, pred, p.range);
  std::printf("wrote %s (%d, %d, %d; NaN outside the %s split) and %s (%zu rows)\n", f.npy.c_str(), p.panel.N,
              p.panel.T, p.panel.K, a.split.c_str(), f.csv.c_str(), f.rows);
  return 0;
}

int cmd_synth(const SynthArgs& a) {
  const RunConfig cfg = load_run_config(a.config, a.overrides);
  require(a.format == "npy" || a.format == "csv" || a.format == "both",
          "--format must be npy, csv or both, got '" + a.format + "'");
  cfg.validate();
  DataConfig d = cfg.data;
  d.source = "synthetic";
  const Panel p = load_panel(d);
  for (const std::string& f : write_panel_files(p, a.out_dir, a.format)) std::printf("wrote %s\n", f.c_str());
  std::printf("synthetic panel: N=%d instruments, T=%d steps, F=%d features, K=%d targets\n", p.N, p.T, p.F, p.K);
  return 0;
}

int cmd_info(const std::string& checkpoint) {
  const std::vector<std::string> gpus = gpu_devices();
  std::printf("CUDA devices: %zu\n", gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) std::printf("  [%zu] %s\n", i, gpus[i].c_str());
  if (checkpoint.empty()) return 0;
  const Model m = Model::load(checkpoint);
  RunConfig c;
  c.model = m.model_config();
  c.train = m.train_config();
  if (m.has_data_config()) c.data = m.data_config(), c.split = m.split_config();
  std::printf("%s: step %lld, %zu parameters, %s optimizer state, fold %d\n", checkpoint.c_str(),
              static_cast<long long>(m.step()), m.parameters(), m.has_optimizer_state() ? "with" : "without", m.fold());
  std::printf("features F = %d, targets K = %d\n%s", c.model.F, c.model.K,
              to_toml(c, m.has_data_config() ? std::vector<std::string>{"data", "split", "model", "train"}
                                             : std::vector<std::string>{"model", "train"})
                  .c_str());
  for (const auto& t : m.tensors()) {
    std::string shape;
    for (size_t d = 0; d < t.shape.size(); ++d) shape += (d ? ", " : "") + std::to_string(t.shape[d]);
    std::printf("  %-40s (%s)\n", t.name.c_str(), shape.c_str());
  }
  return 0;
}

}  // namespace mlalpha
