// The run loop (include/mlalpha/run.h): folds, evaluation cadence, early stopping, the best-checkpoint
// policy, resume, and the files a run leaves. Everything the user sees leaves as a RunEvent.
#include "mlalpha/run.h"

#include <nlohmann/json.hpp>

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

const char* const kRunFiles[] = {"metrics.jsonl",    "curves.svg",      "best.json",
                                 "best.safetensors", "last.safetensors", "folds.csv", "folds.json"};

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
      Metrics& t = r.test.mean;
      t.mse = num(m.value("mse", nlohmann::json()), NAN), t.ic = num(m.value("ic", nlohmann::json()), NAN);
      t.rank_ic = num(m.value("rank_ic", nlohmann::json()), NAN), t.icir = num(m.value("icir", nlohmann::json()), NAN);
      t.dir_acc = num(m.value("dir_acc", nlohmann::json()), NAN);
      t.points = m.value("points", int64_t(0)), t.steps = m.value("steps", int64_t(0));
      r.test.per_target = {t};
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

MetricsResult evaluate(Backend& be, const Panel& norm, const TrainConfig& tc, int t0, int t1,
                       const std::vector<float>* params) {
  const PredictSpec spec{tc.L, tc.burn_in, tc.windows_per_step(norm.N), t0, t1};
  const std::vector<float> pred = be.predict(norm, spec, params);
  MetricsInput in;
  in.pred = pred;
  in.y = norm.y;
  in.N = norm.N;
  in.T = norm.T;
  in.K = norm.K;
  in.t0 = t0;
  in.t1 = t1;
  return compute_metrics(in);
}

struct FoldPlan {
  int fold = 0;
  Split split;
  FeatureStats stats;
  fs::path dir;
};

FoldResult train_fold(const RunConfig& cfg, const Panel& panel, const FoldPlan& plan, int folds, const Checkpoint* resume,
                      bool described, uint64_t fingerprint, Reporter& rep) {
  const Split& split = plan.split;
  const fs::path& out = plan.dir;
  const Panel norm = normalized(panel, plan.stats);
  const Panel train = slice_panel(norm, split.train_begin, split.train_end);
  const ModelLayout layout(cfg.model);
  auto be = make_backend(cfg, train);
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

  JsonlWriter jsonl(out / "metrics.jsonl", start > 0 ? JsonlWriter::Mode::append : JsonlWriter::Mode::truncate);
  CurvesPlot plot;
  plot.metric = cfg.run.metric;
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
      ev.metrics = evaluate(*be, norm, cfg.train, split.valid_begin, split.valid_end, nullptr);
      ev.value = metric_by_name(ev.metrics.mean, cfg.run.metric);
      ev.best = is_improvement(cfg.run.metric, ev.value, res.best_value) || best_params.empty();
      jsonl.metrics(s, "valid", ev.metrics);
      plot.valid.push_back({double(s), ev.value});
      if (ev.best) {
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
  if (split.has_test() && !best_params.empty()) {
    res.test = evaluate(*be, norm, cfg.train, split.test_begin, split.test_end, &best_params);
    res.has_test = true;
    jsonl.metrics(res.best_step, "test", res.test);
  }
  RunEvent e;
  e.kind = RunEvent::Kind::fold_end;
  e.fold = plan.fold;
  e.folds = folds;
  e.step = res.steps;
  e.split = split;
  e.message = "wrote " + (out / "metrics.jsonl").string() + ", " + (out / "curves.svg").string() + ", " +
              (best_params.empty() ? std::string() : (out / "best.safetensors").string() + ", ") +
              (out / "last.safetensors").string() +
              (best_params.empty() ? " (no validation ran, so there is no best checkpoint)" : "");
  rep.emit(e);
  return res;
}

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
  }
  const auto want = run_config_values(config), have = run_config_values(base);
  RunConfig out = base;
  for (const std::string& key : config.given) {
    const std::string section = key.substr(0, key.find('.'));
    if (section == "run" || want.at(key) == have.at(key)) continue;
    // An old checkpoint, or one trained on a panel built in memory: the caller's data (the fingerprint decides).
    if (section == "data" && !(rec.present && rec.described)) continue;
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
RunResult run_resolved(const RunConfig& resolved, const std::vector<std::string>& changes, const Panel& panel,
                       const RunOptions& options) {
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
    const std::string where = folds > 1 ? "walk-forward fold " + std::to_string(f) + ": " : std::string();
    const int train_len = p.split.train_end - p.split.train_begin;
    require(cfg.train.L <= train_len, where + "train.seq_len = " + std::to_string(cfg.train.L) +
                                          " is longer than the training range (" + std::to_string(train_len) +
                                          " steps: " + p.split.to_string() + "); lower train.seq_len or move split.train_end");
    require_finite_targets(panel, p.split.train_begin, p.split.train_end, where + "the training range", source);
    require_finite_targets(panel, p.split.valid_begin, p.split.valid_end, where + "the validation range", source);
    if (p.split.has_test())
      require_finite_targets(panel, p.split.test_begin, p.split.test_end, where + "the test range", source);
    p.stats = feature_stats(panel, p.split.train_begin, p.split.train_end);
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
  for (int f = first_fold; f < folds; ++f) {
    dirs.create(plans[f].dir);
    result.folds.push_back(train_fold(cfg, panel, plans[f], folds, f == first_fold ? resume.get() : nullptr,
                                     options.panel_from_config, fingerprint, rep));
    if (folds > 1) {  // after every fold, so an interrupted walk-forward keeps what it finished
      summary.push_back(report_of(result.folds.back()));
      write_folds_csv(out / "folds.csv", summary, panel.times, cfg.run.metric);
      write_folds_json(out / "folds.json", summary, panel.times, cfg.run.metric);
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
  const Panel panel = load_panel(cfg.data);
  RunOptions o = options;
  o.panel_from_config = true;
  return run_resolved(cfg, changes, panel, o);
}

RunResult run_training(const RunConfig& config, const Panel& panel, const RunOptions& options) {
  std::vector<std::string> changes;
  const RunConfig cfg = resolve_run_config(config, options.resume, &changes);
  return run_resolved(cfg, changes, panel, options);
}

}  // namespace mlalpha
