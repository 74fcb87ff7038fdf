// The run loop (include/mlalpha/run.h): folds, evaluation cadence, early stopping, the best-checkpoint
// policy, resume, and the files a run leaves. Everything the user sees leaves as a RunEvent.
#include "mlalpha/run.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/fileio.h"
#include "model/layout.h"
#include "train/backend.h"
#include "train/checkpoint.h"
#include "mlalpha/model.h"
#include "train/folds.h"
#include "train/report.h"
#include "train/run_config.h"
#include "train/run_record.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

// ---- output folders and files

// Creates folders and, when destroyed, removes those it created that are still empty: an error before
// anything was written leaves nothing behind.
class CreatedDirs {
 public:
  void create(const fs::path& dir) {
    std::vector<fs::path> missing;
    for (fs::path p = dir; !p.empty() && !fs::exists(p); p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    require(!ec, dir.string() + ": cannot create the run folder: " + ec.message() + " (check run.out_dir)");
    created_.insert(created_.end(), missing.begin(), missing.end());  // deepest first
  }
  ~CreatedDirs() {
    for (const fs::path& p : created_) {
      std::error_code ec;
      if (fs::is_directory(p, ec) && fs::is_empty(p, ec)) fs::remove(p, ec);
    }
  }

 private:
  std::vector<fs::path> created_;
};

const char* const kRunFiles[] = {"metrics.jsonl",    "curves.svg",       "best.json", "best.safetensors",
                                 "last.safetensors", "folds.csv",        "folds.json", "long_short.svg",
                                 "oos_pred.csv",     "oos_pred.npy"};

// The run files in `dir` and its fold-k folders.
std::vector<fs::path> run_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  auto scan = [&](const fs::path& d) {
    for (const char* f : kRunFiles) {
      if (fs::exists(d / f, ec)) out.push_back(d / f);
      if (fs::exists(d / (std::string(f) + ".optim.safetensors"), ec)) out.push_back(d / (std::string(f) + ".optim.safetensors"));
    }
  };
  scan(dir);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("fold-", 0) == 0) scan(e.path());
  return out;
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

// The folds before `first` that an earlier invocation finished (a resumed walk-forward), from folds.json.
std::vector<FoldReport> earlier_folds(const fs::path& json, int first) {
  std::vector<FoldReport> out;
  std::error_code ec;
  if (first == 0 || !fs::exists(json, ec)) return out;
  const auto j = nlohmann::json::parse(read_file_bytes(json.string()), nullptr, false);
  if (!j.is_object() || !j.contains("folds") || !j["folds"].is_array()) return out;
  auto num = [](const nlohmann::json& v, double dflt) { return v.is_number() ? v.get<double>() : dflt; };
  for (const auto& f : j["folds"]) {
    if (!f.is_object() || f.value("fold", -1) < 0 || f.value("fold", -1) >= first) continue;
    FoldReport r;
    r.fold = f.value("fold", 0);
    auto range = [&](const char* k, int& b, int& e) {
      if (f.contains(k) && f[k].is_object()) b = f[k].value("begin", 0), e = f[k].value("end", 0);
    };
    range("train", r.split.train_begin, r.split.train_end);
    range("valid", r.split.valid_begin, r.split.valid_end);
    range("test", r.split.test_begin, r.split.test_end);
    r.steps = f.value("steps", int64_t(0));
    r.best_step = f.value("best_step", int64_t(0));
    r.best_value = f.contains("best_value") ? num(f["best_value"], NAN) : NAN;
    if (f.contains("test_metrics") && f["test_metrics"].is_object()) {
      const auto& m = f["test_metrics"];
      r.has_test = true;
      r.test.mean = metrics_from_json_text(m.dump());
      r.test.per_target = {r.test.mean};
    }
    out.push_back(r);
  }
  return out;
}

// ---- one fold

class Reporter {
 public:
  Reporter(const RunOptions& o) : opt_(o) {}
  // Passes the event on; a callback that returns false requests a stop (stop_requested).
  void emit(const RunEvent& e) {
    if (opt_.callback && !opt_.callback(e)) stop_ = true;
  }
  void message(const std::string& m, int fold, int64_t step) {
    RunEvent e;
    e.kind = RunEvent::Kind::message;
    e.fold = fold;
    e.step = step;
    e.message = m;
    emit(e);
  }
  bool stop_requested() const { return stop_ || (opt_.stop && opt_.stop->load()); }

 private:
  const RunOptions& opt_;
  bool stop_ = false;
};

// How the run scores predictions: run.quantiles, the periods per year, and the training-mean baseline.
struct ScoreSpec {
  int quantiles = 5;
  double periods_per_year = NAN;
  std::vector<double> train_mean;  // (K)
};

// Predictions over [t0, t1) and their metrics; the predictions (N, T, K, NaN outside) go to *pred_out.
MetricsResult evaluate(Backend& be, const Panel& norm, const TrainConfig& tc, const ScoreSpec& sc, int t0, int t1,
                       const std::vector<float>* params, std::vector<float>* pred_out = nullptr) {
  const PredictSpec spec{tc.L, tc.burn_in, tc.windows_per_step(norm.N), t0, t1};
  std::vector<float> pred = be.predict(norm, spec, params);
  MetricsInput in;
  in.pred = pred;
  in.y = norm.y;
  in.N = norm.N;
  in.T = norm.T;
  in.K = norm.K;
  in.t0 = t0;
  in.t1 = t1;
  in.quantiles = sc.quantiles;
  in.periods_per_year = sc.periods_per_year;
  in.train_mean = sc.train_mean;
  MetricsResult r = compute_metrics(in);
  if (pred_out) *pred_out = std::move(pred);
  return r;
}

// "1.23 s": for the progress messages of long preparations.
std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  return buf;
}
std::string seconds_text(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return seconds_text(std::chrono::duration<double>(b - a).count());
}

struct FoldPlan {
  int fold = 0;
  Split split;
  FeatureStats stats;
  fs::path dir;
  double read_seconds = -1;  // >= 0: the run read the panel from the data settings in that time (reported)
};

FoldResult train_fold(const RunConfig& cfg, const Panel& panel, const FoldPlan& plan, int folds, const Checkpoint* resume,
                      bool described, uint64_t fingerprint, Reporter& rep, std::vector<float>* test_pred) {
  const Split& split = plan.split;
  const fs::path& out = plan.dir;
  const auto t_prepare = std::chrono::steady_clock::now();
  const Panel norm = prepared(panel, cfg.data, plan.stats);
  const Panel train = slice_panel(norm, split.train_begin, split.train_end);
  const auto t_setup = std::chrono::steady_clock::now();
  const ModelLayout layout(cfg.model);
  auto be = make_backend(cfg, train);
  std::string prep_note = plan.read_seconds >= 0 ? "panel read in " + seconds_text(plan.read_seconds) + "; " : "";
  prep_note += "data prepared in " + seconds_text(t_prepare, t_setup) +
               " (processed as the data settings say, training range sliced); " + be->name() + " engine set up in " +
               seconds_text(t_setup, std::chrono::steady_clock::now()) + " (training panel in its memory)";
  CheckpointMeta meta{cfg.model, cfg.train, plan.stats, panel.feature_names, panel.target_names, {}};
  meta.data_json = encode_run_record(cfg, described, plan.fold, fingerprint);

  int64_t start = 0;
  if (resume) {
    be->load_state(resume->state);
    start = resume->state.step;
  }
  FoldResult res;
  res.fold = plan.fold;
  res.split = split;
  res.dir = out.string();
  {
    RunEvent e;
    e.kind = RunEvent::Kind::fold_start;
    e.fold = plan.fold;
    e.folds = folds;
    e.split = split;
    e.device = be->name();
    e.params = layout.table.count();
    e.start_step = start;
    e.step = start;
    rep.emit(e);
  }
  rep.message(prep_note, plan.fold, start);

  JsonlWriter jsonl(out / "metrics.jsonl", start > 0 ? JsonlWriter::Mode::append : JsonlWriter::Mode::truncate);
  ScoreSpec sc;
  sc.quantiles = cfg.run.quantiles;
  sc.periods_per_year = cfg.run.periods_per_year > 0 ? cfg.run.periods_per_year : periods_per_year(panel);
  sc.train_mean = target_means(panel.y, panel.N, panel.T, panel.K, split.train_begin, split.train_end);
  if (std::isnan(sc.periods_per_year))
    rep.message("ls_sharpe is NaN: the time labels are not dates, so the periods per year are unknown "
                "(set run.periods_per_year, e.g. 252 for trading days)",
                plan.fold, start);
  CurvesPlot plot;
  plot.metric = cfg.run.metric;
  plot.valid_loss_label = "validation mse";
  plot.title = "ml-alpha: " + out.string();

  res.best_value = higher_is_better(cfg.run.metric) ? -INFINITY : INFINITY;
  std::vector<float> best_params;
  // best.json remembers the best evaluation so a resumed run keeps comparing against it.
  const fs::path best_json = out / "best.json";
  if (start > 0 && fs::exists(best_json) && fs::exists(out / "best.safetensors")) {
    const auto j = nlohmann::json::parse(read_file_bytes(best_json.string()), nullptr, false);
    if (j.is_object() && j.value("metric", "") == cfg.run.metric && j.contains("value") && j["value"].is_number()) {
      res.best_value = j["value"].get<double>();
      res.best_step = j.value("step", int64_t(0));
      best_params = load_checkpoint_weights((out / "best.safetensors").string(), cfg.model).params;
    }
  }
  MetricsResult best_eval;  // the best validation of this invocation (its long-short plot when there is no test)
  int bad_evals = 0;
  int64_t reported = start;
  const int64_t eval_every = cfg.run.eval_every > 0 ? cfg.run.eval_every : cfg.train.steps;
  int64_t s = start;
  for (s = start + 1; s <= cfg.train.steps; ++s) {
    be->step();
    const bool eval_now = s % eval_every == 0 || s == cfg.train.steps;
    const bool pause = cfg.run.stop_after > 0 && s - start >= cfg.run.stop_after;
    bool stop = rep.stop_requested() || pause;
    if (s % cfg.train.log_every == 0 || eval_now || stop || s == cfg.train.steps) {
      RunEvent e;
      e.kind = RunEvent::Kind::log;
      e.fold = plan.fold;
      e.step = s;
      for (; reported < s;) {  // the GPU backend syncs once here for all these records
        const TrainPoint p = be->point(++reported);
        jsonl.train(p);
        plot.train.push_back({double(p.step), p.loss});
        res.history.push_back(p);
        e.points.push_back(p);
      }
      rep.emit(e);
      stop = stop || rep.stop_requested();
    }
    if (eval_now) {
      Evaluation ev;
      ev.step = s;
      ev.metrics = evaluate(*be, norm, cfg.train, sc, split.valid_begin, split.valid_end, nullptr);
      ev.value = metric_by_name(ev.metrics.mean, cfg.run.metric);
      ev.best = is_improvement(cfg.run.metric, ev.value, res.best_value) || best_params.empty();
      jsonl.metrics(s, "valid", ev.metrics);
      plot.valid.push_back({double(s), ev.value});
      plot.valid_loss.push_back({double(s), ev.metrics.mean.mse});
      if (ev.best) {
        best_eval = ev.metrics;
        res.best_value = ev.value;
        res.best_step = s;
        bad_evals = 0;
        const TrainState st = be->state();
        best_params = st.params;
        save_checkpoint((out / "best.safetensors").string(), layout, st, meta);
        write_file_atomic(best_json.string(),
                          nlohmann::json{{"metric", cfg.run.metric}, {"value", ev.value}, {"step", s}}.dump() + "\n");
      } else if (cfg.run.patience > 0) {
        ++bad_evals;
      }
      res.evaluations.push_back(ev);
      RunEvent e;
      e.kind = RunEvent::Kind::eval;
      e.fold = plan.fold;
      e.step = s;
      e.evaluation = ev;
      rep.emit(e);
      stop = stop || rep.stop_requested();
      if (cfg.run.patience > 0 && bad_evals >= cfg.run.patience && s < cfg.train.steps) {
        res.early_stopped = true;
        rep.message("early stop at step " + std::to_string(s) + ": no " + cfg.run.metric + " improvement in " +
                        std::to_string(bad_evals) + " evaluations (best " + std::to_string(res.best_value) +
                        " at step " + std::to_string(res.best_step) + ")",
                    plan.fold, s);
        break;
      }
    }
    if (stop && s < cfg.train.steps) {
      res.stopped = rep.stop_requested();
      res.paused = !res.stopped;
      rep.message((res.paused ? "stopping after " + std::to_string(cfg.run.stop_after) + " steps"
                              : std::string("interrupted")) +
                      " at step " + std::to_string(s) + ": saving the last checkpoint (continue with --resume " +
                      (out / "last.safetensors").string() + ")",
                  plan.fold, s);
      break;
    }
  }
  res.steps = std::min<int64_t>(s, cfg.train.steps);
  save_checkpoint((out / "last.safetensors").string(), layout, be->state(), meta);
  write_curves_svg(out / "curves.svg", plot);
  const fs::path ls_svg = out / "long_short.svg";
  bool wrote_ls = false;
  if (split.has_test() && !best_params.empty()) {
    res.test = evaluate(*be, norm, cfg.train, sc, split.test_begin, split.test_end, &best_params, test_pred);
    res.has_test = true;
    jsonl.metrics(res.best_step, "test", res.test);
    write_long_short_plot(ls_svg.string(), res.test, panel, "test, best checkpoint (step " + std::to_string(res.best_step) + "),");
    wrote_ls = true;
  } else if (!best_eval.portfolios.empty()) {
    write_long_short_plot(ls_svg.string(), best_eval, panel, "validation, best step " + std::to_string(res.best_step) + ",");
    wrote_ls = true;
  }
  RunEvent e;
  e.kind = RunEvent::Kind::fold_end;
  e.fold = plan.fold;
  e.folds = folds;
  e.step = res.steps;
  e.split = split;
  e.message = "wrote " + (out / "metrics.jsonl").string() + ", " + (out / "curves.svg").string() + ", " +
              (wrote_ls ? ls_svg.string() + ", " : std::string()) +
              (best_params.empty() ? std::string() : (out / "best.safetensors").string() + ", ") +
              (out / "last.safetensors").string() +
              (best_params.empty() ? " (no validation ran, so there is no best checkpoint)" : "");
  rep.emit(e);
  return res;
}

bool is_processing_key(const std::string& key) {
  return key == "data.feature_norm" || key == "data.robust_clip" || key == "data.target_norm" || key == "data.nan_fill";
}
// The pooled out-of-sample predictions of a walk-forward run: each fold's test block, predicted by that
// fold's best weights, copied into one (N, T, K) array; the fold of each time step is remembered.
class OosPool {
 public:
  OosPool(const Panel& p, const RunConfig& cfg)
      : p_(p), cfg_(cfg), pred_(size_t(p.N) * p.T * p.K, NAN), fold_(size_t(p.T), -1), base_(size_t(p.T) * p.K, NAN) {}
  // pred (N, T, K): the fold's predictions, used over its test block.
  void add(const FoldPlan& plan, const std::vector<float>& pred) {
    const Split& s = plan.split;
    const std::vector<double> mean = target_means(p_.y, p_.N, p_.T, p_.K, s.train_begin, s.train_end);
    for (int t = s.test_begin; t < s.test_end; ++t) {
      fold_[size_t(t)] = plan.fold;
      for (int k = 0; k < p_.K; ++k) base_[size_t(t) * p_.K + k] = mean[size_t(k)];
      for (int i = 0; i < p_.N; ++i)
        for (int k = 0; k < p_.K; ++k) {
          const size_t at = (size_t(i) * p_.T + t) * p_.K + k;
          pred_[at] = pred[at];
        }
    }
    t0_ = std::min(t0_, s.test_begin);
    t1_ = std::max(t1_, s.test_end);
  }
  bool any() const { return t0_ < t1_; }
  // Writes <prefix>.csv / .npy and scores the pooled predictions; mse_mean uses each time step's own
  // fold's training mean.
  OosSummary write(const fs::path& prefix) const {
    const PredictionFiles f = write_predictions(prefix.string(), p_, pred_, {t0_, t1_}, fold_);
    OosSummary o;
    o.file = f.csv;
    ScoreOptions so;
    so.quantiles = cfg_.run.quantiles;
    so.periods_per_year = cfg_.run.periods_per_year;
    o.metrics = score(pred_, p_, {t0_, t1_}, so);
    for (int k = 0; k < p_.K; ++k) {  // the training-mean baseline, fold by fold
      double ss = 0;
      int64_t n = 0;
      for (int i = 0; i < p_.N; ++i)
        for (int t = t0_; t < t1_; ++t) {
          const size_t at = (size_t(i) * p_.T + t) * p_.K + k;
          const double y = p_.y[at], b = base_[size_t(t) * p_.K + k];
          if (std::isnan(pred_[at]) || std::isnan(y) || std::isnan(b)) continue;
          ss += (b - y) * (b - y), ++n;
        }
      o.metrics.per_target[size_t(k)].mse_mean = n ? ss / double(n) : NAN;
    }
    double s = 0;
    int n = 0;
    for (const Metrics& m : o.metrics.per_target)
      if (!std::isnan(m.mse_mean)) s += m.mse_mean, ++n;
    o.metrics.mean.mse_mean = n ? s / n : NAN;
    return o;
  }

 private:
  const Panel& p_;
  const RunConfig& cfg_;
  std::vector<float> pred_;  // (N, T, K)
  std::vector<int> fold_;    // (T): the fold whose test block holds t; -1 outside every test block
  std::vector<double> base_;  // (T, K): that fold's training mean
  int t0_ = INT_MAX, t1_ = 0;  // the pooled range [first test step, last test end)
};

// Train settings a resume may change when the caller sets them explicitly; the rest must match.
const char* const kResumeMayChange[] = {"train.steps", "train.lr", "train.min_lr_ratio", "train.warmup",
                                        "train.schedule", "train.weight_decay", "train.clip", "train.log_every"};

}  // namespace

RunConfig resolve_run_config(const RunConfig& config, const std::string& resume, std::vector<std::string>* changes) {
  if (resume.empty()) return config;
  const CheckpointWeights ck = load_checkpoint_weights(resume);
  const RunRecord rec = decode_run_record(ck.meta.data_json, resume);
  RunConfig base = config;  // run settings stay the caller's
  base.model = ck.meta.model;
  base.train = ck.meta.train;
  if (rec.present) {
    if (rec.described) base.data = rec.settings.data;
    base.split = rec.settings.split;
    // How the data is processed is the checkpoint's even for a panel built in memory (the fingerprint
    // covers the raw values only).
    base.data.feature_norm = rec.settings.data.feature_norm;
    base.data.robust_clip = rec.settings.data.robust_clip;
    base.data.target_norm = rec.settings.data.target_norm;
    base.data.nan_fill = rec.settings.data.nan_fill;
  }
  const auto want = run_config_values(config), have = run_config_values(base);
  RunConfig out = base;
  for (const std::string& key : config.given) {
    const std::string section = key.substr(0, key.find('.'));
    if (section == "run" || want.at(key) == have.at(key)) continue;
    // An old checkpoint, or one trained on a panel built in memory: the caller's data (the fingerprint decides).
    if (section == "data" && !(rec.present && (rec.described || is_processing_key(key)))) continue;
    if (section == "split" && !rec.present) continue;
    const bool may = std::find(std::begin(kResumeMayChange), std::end(kResumeMayChange), key) != std::end(kResumeMayChange);
    require(may, "--resume " + resume + ": " + key + " = " + want.at(key) + " but the checkpoint was trained with " +
                     have.at(key) + "; a resume continues the checkpoint's model, data, split, batch and seed " +
                     "(drop that setting, or train a new run into another run.out_dir)");
    if (changes) changes->push_back(key + ": " + have.at(key) + " -> " + want.at(key) + " (set explicitly)");
  }
  // Apply the allowed explicit changes.
  if (config.was_given("train.steps")) out.train.steps = config.train.steps;
  if (config.was_given("train.lr")) out.train.lr = config.train.lr;
  if (config.was_given("train.min_lr_ratio")) out.train.min_lr_ratio = config.train.min_lr_ratio;
  if (config.was_given("train.warmup")) out.train.warmup = config.train.warmup;
  if (config.was_given("train.schedule")) out.train.schedule = config.train.schedule;
  if (config.was_given("train.weight_decay")) out.train.weight_decay = config.train.weight_decay;
  if (config.was_given("train.clip")) out.train.clip = config.train.clip;
  if (config.was_given("train.log_every")) out.train.log_every = config.train.log_every;
  require(ck.step < out.train.steps,
          "--resume " + resume + ": the checkpoint has trained " + std::to_string(ck.step) + " of train.steps = " +
              std::to_string(out.train.steps) + " steps, so the run is finished; to train longer set train.steps " +
              "above " + std::to_string(ck.step) + " explicitly (--steps N)");
  if (!(rec.present && rec.described) && changes)
    changes->push_back("the checkpoint does not record how to load its data: continuing on the given data");
  out.given = config.given;
  return out;
}

namespace {

// The run of an already resolved config (resolve_run_config reads the resume checkpoint once per run);
// `changes` are the settings the resume changed, for the log.
// load_seconds >= 0: the panel was read from the data settings in that time (reported with fold 0's start).
RunResult run_resolved(const RunConfig& resolved, const std::vector<std::string>& changes, const Panel& panel,
                       const RunOptions& options, double load_seconds = -1) {
  Reporter rep(options);
  RunResult result;
  result.config = resolved;
  RunConfig& cfg = result.config;
  panel.validate();
  cfg.model.F = panel.F;
  cfg.model.K = panel.K;
  cfg.validate();

  // Everything checked before any output exists: the splits, each fold's statistics and targets, the
  // resume checkpoint and the run folder.
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
    if (f == 0) p.read_seconds = load_seconds;
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
  const uint64_t fingerprint = panel_fingerprint(panel);
  std::unique_ptr<Checkpoint> resume;
  int first_fold = 0;
  if (!options.resume.empty()) {
    resume = std::make_unique<Checkpoint>(load_checkpoint(options.resume, cfg.model));
    const RunRecord rec = decode_run_record(resume->meta.data_json, options.resume);
    if (rec.present) {
      require(rec.fingerprint == fingerprint,
              "--resume " + options.resume + ": the data differs from the data the checkpoint was trained on (" +
                  cfg.data.source + " data, fingerprint " + hex64(fingerprint) + ", recorded " + hex64(rec.fingerprint) +
                  "); a resume must continue on the same data");
      require(rec.fold >= 0 && rec.fold < folds, "--resume " + options.resume + ": the checkpoint is from fold " +
                                                     std::to_string(rec.fold) + ", the split has " +
                                                     std::to_string(folds) + " folds");
      first_fold = rec.fold;
    }
  }
  const std::vector<fs::path> existing = run_files(out);
  if (!existing.empty() && !options.overwrite && options.resume.empty()) {
    std::string list;
    for (size_t i = 0; i < existing.size() && i < 3; ++i) list += (i ? ", " : "") + existing[i].filename().string();
    throw Error("run.out_dir '" + out.string() + "' already holds a run (" + list + (existing.size() > 3 ? ", ..." : "") +
                "): pass --overwrite to replace it, --resume " + (out / "last.safetensors").string() +
                " to continue it, or choose another run.out_dir");
  }
  if (options.overwrite && options.resume.empty())
    for (const fs::path& f : existing) fs::remove(f);

  for (const std::string& c : changes) rep.message("resume: " + c, first_fold, 0);
  if (resume) {
    rep.message("resumed from " + options.resume + " at step " + std::to_string(resume->state.step), first_fold,
                resume->state.step);
  }
  CreatedDirs dirs;
  dirs.create(out);
  std::vector<FoldReport> summary = folds > 1 ? earlier_folds(out / "folds.json", first_fold) : std::vector<FoldReport>{};
  // The pooled predictions are scored against the processed targets, as each fold's test is; per-date
  // target processing does not depend on the fold, so any fold's preparation gives them.
  const Panel processed = cfg.data.target_norm == "none" ? Panel{} : prepared(panel, cfg.data, plans[0].stats);
  OosPool oos(cfg.data.target_norm == "none" ? panel : processed, cfg);
  for (const FoldReport& r : summary)  // folds an earlier invocation finished: their best checkpoints predict again
    if (r.has_test && fs::exists(plans[r.fold].dir / "best.safetensors"))
      oos.add(plans[r.fold], Model::load((plans[r.fold].dir / "best.safetensors").string())
                                 .predict(panel, {plans[r.fold].split.test_begin, plans[r.fold].split.test_end},
                                          cfg.run.device, cfg.run.tf32));
  for (int f = first_fold; f < folds; ++f) {
    dirs.create(plans[f].dir);
    std::vector<float> test_pred;
    result.folds.push_back(train_fold(cfg, panel, plans[f], folds, f == first_fold ? resume.get() : nullptr,
                                     options.panel_from_config, fingerprint, rep, &test_pred));
    if (folds > 1) {  // after every fold, so an interrupted walk-forward keeps what it finished
      summary.push_back(report_of(result.folds.back()));
      if (result.folds.back().has_test) oos.add(plans[f], test_pred);
      write_folds_csv(out / "folds.csv", summary, panel.times, cfg.run.metric);
      OosSummary pooled;
      if (oos.any()) {
        pooled = oos.write(out / "oos_pred");
        result.has_oos = true;
        result.oos = pooled.metrics;
        result.oos_file = pooled.file;
      }
      write_folds_json(out / "folds.json", summary, panel.times, cfg.run.metric, oos.any() ? &pooled : nullptr);
      result.fold_test_mean = mean_test_metrics(summary);
      result.fold_test_std = std_test_metrics(summary);
    }
    if (result.folds.back().stopped || rep.stop_requested()) {
      result.stopped = true;
      break;
    }
    if (result.folds.back().paused) break;
  }
  return result;
}

}  // namespace

RunResult run_training(const RunConfig& config, const RunOptions& options) {
  std::vector<std::string> changes;
  const RunConfig cfg = resolve_run_config(config, options.resume, &changes);
  cfg.validate();  // every setting before the data is read (F and K are checked again against the data)
  const auto t0 = std::chrono::steady_clock::now();
  const Panel panel = load_panel(cfg.data);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RunOptions o = options;
  o.panel_from_config = true;
  return run_resolved(cfg, changes, panel, o, load_seconds);
}

RunResult run_training(const RunConfig& config, const Panel& panel, const RunOptions& options) {
  std::vector<std::string> changes;
  const RunConfig cfg = resolve_run_config(config, options.resume, &changes);
  return run_resolved(cfg, changes, panel, options);
}

}  // namespace mlalpha
