// `ml-alpha eval | predict | synth | info`: parse, call the library (include/mlalpha/), print.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>

#include <charconv>

#include "commands.h"
#include "mlalpha/device.h"
#include "mlalpha/ensemble.h"
#include "mlalpha/model.h"
#include "mlalpha/stream.h"

namespace mlalpha {

namespace {

// The checkpoint's model, or a population's members (--checkpoint a run folder), applied to the data: the
// data settings given on the command line or in --config, else those recorded in the checkpoint.
struct Prepared {
  std::optional<Model> model;        // --checkpoint names a file
  std::optional<Ensemble> ensemble;  // --checkpoint names a population run folder
  RunConfig cfg;
  Compute compute;  // cfg.compute(), resolved once
  Panel panel;
  Split split;
  TimeRange range;
  // The settings, statistics and fold: the model's, or the first member's (the members share them).
  const Model& ref() const { return model ? *model : ensemble->member(0); }
  // What predicts: the model, or the members' mean.
  const Predictor& predictor() const {
    if (model) return *model;
    return *ensemble;
  }
  // "runs/x/best.safetensors (step 400)" or "the mean of 3 members of runs/pop (member-00, member-01, ...)".
  std::string what(const std::string& checkpoint) const {
    if (model) return checkpoint + " (step " + std::to_string(model->step()) + ")";
    std::string names;
    for (size_t i = 0; i < ensemble->size(); ++i) names += (i ? ", " : "") + ensemble->name(i);
    return "the mean of " + std::to_string(ensemble->size()) + " member" + (ensemble->size() > 1 ? "s" : "") +
           " of " + ensemble->dir() + " (" + names + ")";
  }
};

Prepared prepare(const EvalArgs& a, bool allow_all) {
  Prepared p;
  if (std::filesystem::is_directory(a.checkpoint)) {
    p.ensemble.emplace(Ensemble::load(a.checkpoint, EnsembleSelection::parse(a.members.empty() ? "all" : a.members), a.fold));
  } else {
    require(a.members.empty(), "--members chooses the members of a population run folder; " + a.checkpoint +
                                   " is one checkpoint (give its run folder, e.g. " +
                                   std::filesystem::path(a.checkpoint).parent_path().parent_path().string() + ")");
    p.model.emplace(Model::load(a.checkpoint));
  }
  p.cfg = load_run_config(a.config, a.overrides, a.settings);
  const Model& ref = p.ref();
  if (!p.cfg.was_given_in("data")) {
    if (!ref.has_data_config())
      throw Error(a.checkpoint + " does not record the data it was trained on: give the data settings (--config FILE, "
                                 "or --set data.source=... with its paths)");
    p.cfg.data = ref.data_config();
    std::cout << "data: as recorded in " << a.checkpoint << " (data.source = " << p.cfg.data.source << ")" << std::endl;
  }
  if (!p.cfg.was_given_in("split") && ref.has_data_config()) p.cfg.split = ref.split_config();
  p.compute = resolve(p.cfg.compute());
  check_inference_settings(p.cfg, a, ref.data_config(), a.checkpoint, "eval and predict", true, p.compute);
  require(a.split == "train" || a.split == "valid" || a.split == "test" || (allow_all && a.split == "all"),
          "--split must be train, valid, test" + std::string(allow_all ? " or all" : "") + ", got '" + a.split + "'");
  p.panel = load_panel(p.cfg.data);
  ref.check_panel(p.panel, a.checkpoint);
  const std::vector<Split> splits = make_splits(p.cfg.split, p.panel);
  const int fold = a.fold >= 0 ? a.fold : (ref.fold() < int(splits.size()) ? ref.fold() : 0);
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

void check_inference_settings(const RunConfig& cfg, const CommonArgs& a, const DataConfig& trained,
                              const std::string& checkpoint, const std::string& command, bool reads_split,
                              const Compute& compute) {
  const std::vector<ConfigSetting>& flags = a.settings;
  // A --set of a setting the command never reads (the model's shape and its training come from the checkpoint)
  // would be ignored silently. A config file is left alone: it is often the training's own file, given for its
  // data settings.
  for (const std::string& o : a.overrides) {
    const std::string key = o.substr(0, o.find('='));
    const bool ignored = key.rfind("model.", 0) == 0 || key.rfind("sweep.", 0) == 0 ||
                         (key.rfind("train.", 0) == 0 && key != "train.precision") ||
                         (!reads_split && key.rfind("split.", 0) == 0);
    require(!ignored, "--set " + o + ": " + key + " does nothing for " + command + " (the model and its training come " +
                          "from " + checkpoint + (reads_split ? "" : ", and it scores every row it is given") +
                          "): drop it");
  }
  // The data is processed as in training (Model::prepare): a different processing setting is a mistake.
  auto same = [&](const char* key, const std::string& given, const std::string& have) {
    require(!cfg.was_given(key) || given == have, std::string(key) + " = '" + given + "' but " + checkpoint +
                                                      " was trained with '" + have + "'; " + command +
                                                      " must process the data as the training did (drop the setting)");
  };
  same("data.feature_norm", cfg.data.feature_norm, trained.feature_norm);
  same("data.target_norm", cfg.data.target_norm, trained.target_norm);
  same("data.nan_fill", cfg.data.nan_fill, trained.nan_fill);
  same("data.robust_clip", std::to_string(cfg.data.robust_clip), std::to_string(trained.robust_clip));
  // The CPU computes in fp32 whatever --precision says: a flag that would do nothing is refused.
  for (const ConfigSetting& f : flags)
    if (f.key == "train.precision" && f.value != to_string(Precision::FP32) && !compute.gpu())
      throw Error("--precision " + f.value + " is for the GPU; on the CPU " + command +
                  " must compute in fp32 (drop --precision, or run on the GPU: --device gpu)");
}

namespace {

void check_predict_outputs(const std::string& out, const std::string& checkpoint, const DataConfig& d) {
  for (const std::string& target : {out + ".npy", out + ".csv"}) check_output_not_read("--out", out, target, checkpoint, d);
}

}  // namespace

int cmd_eval(const EvalArgs& a) {
  const Prepared p = prepare(a, false);
  if (!a.long_short_svg.empty())
    check_output_not_read("--long-short-svg", a.long_short_svg, a.long_short_svg, a.checkpoint, p.cfg.data);
  for (const std::string& w : p.ref().range_warnings(p.panel, p.range, "the evaluated " + a.split + " range"))
    std::cerr << w << std::endl;
  ScoreOptions so;
  so.quantiles = p.cfg.run.quantiles;
  so.periods_per_year = p.cfg.run.periods_per_year;
  so.train = p.ref().training_range(p.panel);
  std::string note;
  const PredictMode mode = resolve_predict_mode(a.mode, p.predictor().train_config(), "--mode", &note);
  if (!note.empty()) std::printf("%s\n", note.c_str());
  const MetricsResult r = p.predictor().evaluate(p.panel, p.range, p.compute, so, mode);
  std::printf("%s on the %s split, time steps %s:\n", p.what(a.checkpoint).c_str(), a.split.c_str(),
              range_text(p.panel, p.range).c_str());
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
    write_long_short_plot(a.long_short_svg, r, p.panel, a.split + " range of " + a.checkpoint,
                          target_units(p.ref().data_config()));
    std::printf("wrote %s\n", a.long_short_svg.c_str());
  }
  return 0;
}


int cmd_predict(const PredictArgs& a) {
  require(!a.out.empty(), "--out is required (a path prefix: <out>.npy and <out>.csv are written)");
  if (!a.mode.empty()) parse_predict_mode(a.mode, "--mode");  // a wrong value is refused before the data is read
  const Prepared p = prepare(a, true);
  std::string note;
  const PredictMode mode = resolve_predict_mode(a.mode, p.predictor().train_config(), "--mode", &note);
  if (!note.empty()) std::printf("%s\n", note.c_str());
  check_predict_outputs(a.out, a.checkpoint, p.cfg.data);
  for (const std::string& w : p.ref().range_warnings(p.panel, p.range, "the predicted " + a.split + " range"))
    std::cerr << w << std::endl;
  // The targets written beside the predictions are the processed ones the predictions estimate.
  const Panel norm = p.ref().prepare(p.panel);
  const std::vector<float> pred =
      p.model ? p.model->predict_prepared(norm, p.range, p.compute, mode)
              : p.ensemble->predict(p.panel, p.range, p.compute, mode);
  if (p.ensemble) std::printf("predicting with %s\n", p.what(a.checkpoint).c_str());
  const PredictionFiles f = write_predictions(a.out, norm, pred, p.range, {}, p.ref().context(norm, mode));
  std::printf("wrote %s (%d, %d, %d; NaN outside the %s split) and %s (%zu rows)\n", f.npy.c_str(), p.panel.N,
              p.panel.T, p.panel.K, a.split.c_str(), f.csv.c_str(), f.rows);
  return 0;
}

int cmd_synth(const SynthArgs& a) {
  const RunConfig cfg = load_run_config(a.config, a.overrides, a.settings);
  require(a.format == "npy" || a.format == "csv" || a.format == "both",
          "--format must be npy, csv or both, got '" + a.format + "'");
  cfg.validate();
  DataConfig d = cfg.data;
  d.source = "synthetic";
  const Panel p = load_panel(d);
  for (const std::string& f : write_panel_files(p, a.out_dir, a.format, a.overwrite))
    std::printf("wrote %s\n", f.c_str());
  std::printf("synthetic panel: N=%d instruments, T=%d steps, F=%d features, K=%d targets\n", p.N, p.T, p.F, p.K);
  return 0;
}

namespace {

// A population run folder: its members with their settings and leaderboard values, then the settings
// they share (as a checkpoint's info prints them).
int population_info(const std::string& dir, int fold) {
  if (fold < 0 && std::filesystem::exists(std::filesystem::path(dir) / "fold-0")) {
    std::printf("%s: a walk-forward population; its members are listed per fold (--fold K, or the folder "
                "fold-K/)\n", dir.c_str());
    return 0;
  }
  const Ensemble e = Ensemble::load(dir, {}, fold);
  std::string metric;  // the column of run.metric on the validation range, "valid_<metric>"
  for (const std::string& c : e.leaderboard_columns())
    if (c.rfind("valid_", 0) == 0) metric = c;
  std::printf("%s: population of %zu members, fold %d%s\n", e.dir().c_str(), e.size(), e.fold(),
              e.leaderboard_file().empty() ? " (no leaderboard.csv: the run did not finish)" : "");
  const std::string test = metric.empty() ? "" : "test_" + metric.substr(6);
  auto value = [&](size_t i, const std::string& column) {  // a leaderboard number to 5 significant digits
    const std::string cell = e.leaderboard_cell(i, column);
    if (cell.empty()) return cell;
    char b[32];
    std::snprintf(b, sizeof b, "%.5g", std::strtod(cell.c_str(), nullptr));
    return std::string(b);
  };
  std::printf("| member | rank | step | seed | lr | weight_decay | clip | warmup | best_step | %s | %s | checkpoint |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
              metric.empty() ? "valid" : metric.c_str(), test.empty() ? "test" : test.c_str());
  for (size_t i = 0; i < e.size(); ++i) {
    const TrainConfig& t = e.member(i).train_config();
    std::printf("| %s | %s | %lld | %llu | %g | %g | %g | %lld | %s | %s | %s | %s |\n", e.name(i).c_str(),
                e.rank(i) > 0 ? std::to_string(e.rank(i)).c_str() : "", static_cast<long long>(e.member(i).step()),
                static_cast<unsigned long long>(t.seed), double(t.lr), double(t.weight_decay), double(t.clip),
                static_cast<long long>(t.warmup), e.leaderboard_cell(i, "best_step").c_str(),
                value(i, metric).c_str(), value(i, test).c_str(),
                std::filesystem::path(e.checkpoint(i)).filename().string().c_str());
  }
  const Model& m = e.member(0);
  RunConfig c;
  c.model = m.model_config();
  if (m.has_data_config()) c.data = m.data_config(), c.split = m.split_config();
  std::printf("shared: features F = %d, targets K = %d, %zu parameters each\n%s", c.model.F, c.model.K, m.parameters(),
              to_toml(c, m.has_data_config() ? std::vector<std::string>{"data", "split", "model"}
                                             : std::vector<std::string>{"model"})
                  .c_str());
  return 0;
}

// A number as the user would write it: the shortest text that reads back to the same value.
std::string shortest_text(double v) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A stream's state file: what it continues and where a restart picks up (docs/data.md, "Streaming").
int state_info(const std::string& path) {
  const StreamStateInfo s = read_stream_state_info(path);
  std::printf("%s: a stream state, mode %s%s%s\n", path.c_str(), s.mode.c_str(),
              s.kernels.empty() ? "" : ", kernels ", s.kernels.c_str());
  std::printf("checkpoint: %s (weights and settings hash %s)\n",
              s.source.empty() ? "not recorded" : s.source.c_str(), s.checkpoint_hash.c_str());
  std::printf("members %d, features F = %d, targets K = %d, context length %d\n", s.members, s.features, s.targets,
              s.context_length);
  std::string when = "none yet";
  if (!std::isnan(s.last_time)) {
    when = shortest_text(s.last_time);
    // Date times are kept as seconds since 1970: the date too, when the number reads as a plausible one.
    if (s.last_time == std::floor(s.last_time) && s.last_time >= 1e8 && s.last_time < 4.1e9) {
      const std::time_t t = std::time_t(s.last_time);
      std::tm tm{};
      char b[32];
      if (gmtime_r(&t, &tm) && std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm))
        when += std::string(" (") + b + " if the times are dates)";
    }
  }
  std::printf("time steps: %lld, the last at time %s\n", static_cast<long long>(s.bars), when.c_str());
  std::printf("restart: send rows after time %s (rows at or before it are passed over: the state holds them)\n",
              std::isnan(s.last_time) ? "(any)" : shortest_text(s.last_time).c_str());
  std::printf("instruments: %zu\n| instrument | rows of history |\n|---|---|\n", s.instruments.size());
  for (size_t i = 0; i < s.instruments.size(); ++i)
    std::printf("| %s | %d |\n", s.instruments[i].c_str(), s.history[i]);
  return 0;
}

}  // namespace

int cmd_info(const std::string& checkpoint, int fold, const std::string& state) {
  require(checkpoint.empty() || state.empty(), "info: give --checkpoint or --state, not both");
  require(fold < 0 || state.empty(), "info: --fold is for a population run folder, not a stream's state file");
  if (!state.empty()) return state_info(state);
  const std::vector<std::string> gpus = gpu_devices();
  if (!gpu_support_built())
    std::printf("CUDA devices: none (a CPU-only build: it computes on the CPU; docs/python.md and README say how to get "
                "GPU support)\n");
  else
    std::printf("CUDA devices: %zu\n", gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) std::printf("  [%zu] %s\n", i, gpus[i].c_str());
  if (checkpoint.empty()) {
    require(fold < 0, "info: --fold " + std::to_string(fold) + " lists a population run folder's members: give the folder as --checkpoint");
    return 0;
  }
  if (std::filesystem::is_directory(checkpoint)) return population_info(checkpoint, fold);
  // One model's file holds one fold (printed below): a --fold would be ignored.
  require(fold < 0, "info: --fold " + std::to_string(fold) + " is for a population run folder; " + checkpoint +
                        " is one model's checkpoint (its fold is printed without --fold)");
  if (is_stream_state(checkpoint)) return state_info(checkpoint);
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
