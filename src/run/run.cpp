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

#include "checkpoint/checkpoint.h"
#include "checkpoint/population_record.h"
#include "checkpoint/run_record.h"
#include "config/members.h"
#include "config/run_config.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/temp_dir.h"
#include "data/fileio.h"
#include "eval/folds.h"
#include "mlalpha/model.h"
#include "model/layout.h"
#include "run/population_resume.h"
#include "run/run_common.h"
#include "run/run_population.h"
#include "train/backend.h"
#include "train/population.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

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

FoldResult train_fold(const RunConfig& cfg, const Panel& panel, const FoldPlan& plan, int folds, const Checkpoint* resume,
                      bool described, uint64_t fingerprint, Reporter& rep, std::vector<float>* test_pred,
                      DistSession* dist) {
  const Split& split = plan.split;
  const auto t_prepare = std::chrono::steady_clock::now();
  const Panel norm = prepared(panel, cfg.data, plan.stats);
  const Panel train = slice_panel(norm, split.train_begin, split.train_end);
  const auto t_setup = std::chrono::steady_clock::now();
  const ModelLayout layout(cfg.model);
  auto be = make_backend(cfg, train, dist);
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

  const ScoreSpec sc = score_spec(cfg, panel, split);
  ModelRecorder::Access access{[&](int64_t s) { return be->point(s); },
                               [&](const PredictSpec& spec, const std::vector<float>* params) {
                                 return be->predict(norm, spec, params);
                               },
                               [&] { return be->state(); }};
  ModelRecorder rec(cfg, cfg.train, norm, sc, {&plan, &panel, plan.dir, folds, -1, ""}, meta, access, start);
  FoldResult& res = rec.res();
  if (std::isnan(sc.periods_per_year))
    rep.message("ls_sharpe is NaN: the time labels are not dates, so the periods per year are unknown "
                "(set run.periods_per_year, e.g. 252 for trading days)",
                plan.fold, start);
  const int64_t eval_every = cfg.run.eval_every > 0 ? cfg.run.eval_every : cfg.train.steps;
  int64_t s = start;
  for (s = start + 1; s <= cfg.train.steps; ++s) {
    be->step();
    const bool eval_now = s % eval_every == 0 || s == cfg.train.steps;
    const bool pause = cfg.run.stop_after > 0 && s - start >= cfg.run.stop_after;
    const bool save_now = cfg.run.save_every > 0 && s % cfg.run.save_every == 0 && s < cfg.train.steps;
    bool stop = rep.stop_requested() || pause;
    if (s % cfg.train.log_every == 0 || eval_now || stop || save_now || s == cfg.train.steps) {
      rec.log(s, rep);
      stop = stop || rep.stop_requested();
    }
    if (eval_now) {
      const bool out_of_patience = rec.validate(s, rep);
      stop = stop || rep.stop_requested();
      if (out_of_patience) break;
    }
    if (save_now && !stop) rec.save(s);  // a stop saves below, as the end of the invocation
    if (stop && s < cfg.train.steps) {
      res.stopped = rep.stop_requested();
      res.paused = !res.stopped;
      rep.message((res.paused ? "stopping after " + std::to_string(cfg.run.stop_after) + " steps"
                              : std::string("interrupted")) +
                      " at step " + std::to_string(s) + ": saving the last checkpoint (continue with --resume " +
                      (plan.dir / "last.safetensors").string() + ")",
                  plan.fold, s);
      break;
    }
  }
  const std::string wrote = rec.finish(std::min<int64_t>(s, cfg.train.steps), test_pred);
  RunEvent e;
  e.kind = RunEvent::Kind::fold_end;
  e.fold = plan.fold;
  e.folds = folds;
  e.step = res.steps;
  e.split = split;
  e.message = "wrote " + wrote;
  rep.emit(e);
  return res;
}

bool is_processing_key(const std::string& key) {
  return key == "data.feature_norm" || key == "data.robust_clip" || key == "data.target_norm" || key == "data.nan_fill";
}
// Train settings a resume may change when the caller sets them explicitly; the rest must match.
const char* const kResumeMayChange[] = {"train.steps", "train.lr", "train.min_lr_ratio", "train.warmup",
                                        "train.schedule", "train.weight_decay", "train.clip", "train.log_every",
                                        "train.precision"};

}  // namespace

bool resume_may_change(const std::string& key) {
  return std::find(std::begin(kResumeMayChange), std::end(kResumeMayChange), key) != std::end(kResumeMayChange);
}

RunConfig resolve_run_config(const RunConfig& config, const std::string& resume, std::vector<std::string>* changes) {
  if (resume.empty()) return config;
  const std::string population = population_dir_of(resume);
  if (!population.empty()) return resolve_population_resume(config, resume, population, changes);
  require(!is_population(config),
          "--resume " + resume + " is not in a population's run folder; a population (train.models = " +
              std::to_string(config.train.models) + " / [sweep]) resumes from its run.out_dir (--resume <run.out_dir>)");
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
  if (config.was_given("train.precision")) out.train.precision = config.train.precision;
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
  DistSessionPtr dist;
  // Rank r > 0 runs the whole run in a private folder, removed at the end: its evaluations and early stops
  // see the same weights as rank 0's, so all ranks take the same steps; only rank 0's files are kept.
  std::unique_ptr<TempDir> worker;
  if (options.world > 1 || options.data_parallel) {
    require(options.rank >= 0 && options.rank < options.world && options.local_rank >= 0,
            "data-parallel run: rank " + std::to_string(options.rank) + " of world " + std::to_string(options.world) +
                " (local rank " + std::to_string(options.local_rank) + ") is not a rank of it");
    require(!is_population(cfg), "data-parallel training of a population (train.models = " +
                                     std::to_string(cfg.train.models) +
                                     " or [sweep]) is not supported yet: train it on one GPU, or one model per run");
    if (options.rank > 0) {
      worker = std::make_unique<TempDir>("ml-alpha-rank" + std::to_string(options.rank) + "-",
                                         "data-parallel rank " + std::to_string(options.rank) + "'s run folder");
      cfg.run.out_dir = worker->path().string();
    }
    dist = open_dist_session(options.rank, options.world, options.local_rank);
  }

  // Everything checked before any output exists: the splits, each fold's statistics and targets, the
  // resume checkpoint and the run folder.
  std::vector<FoldPlan> plans = plan_folds(cfg, panel, load_seconds);
  const int folds = int(plans.size());
  const fs::path out(cfg.run.out_dir);
  const uint64_t fingerprint = panel_fingerprint(panel);
  if (is_population(cfg)) {
    const std::vector<MemberSpec> members = expand_population(cfg, folds);
    for (const MemberSpec& m : members) m.train.validate();
    const bool resume = !options.resume.empty();
    if (resume) {
      const PopulationRecord rec = read_population_record(out);
      require(rec.fingerprint == fingerprint,
              "--resume " + options.resume + ": the data differs from the data the population was trained on (" +
                  cfg.data.source + " data, fingerprint " + hex64(fingerprint) + ", recorded " + hex64(rec.fingerprint) +
                  " in " + (out / kPopulationFile).string() + "); a resume must continue on the same data");
    }
    claim_out_dir(out, options);
    for (const std::string& c : changes) rep.message("resume: " + c, 0, 0);
    run_population(cfg, panel, plans, members, fingerprint, options.panel_from_config, resume, rep, result);
    return result;
  }
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
  claim_out_dir(out, options);

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
                                          cfg.run.device, cfg.train.precision));
  for (int f = first_fold; f < folds; ++f) {
    dirs.create(plans[f].dir);
    std::vector<float> test_pred;
    result.folds.push_back(train_fold(cfg, panel, plans[f], folds, f == first_fold ? resume.get() : nullptr,
                                     options.panel_from_config, fingerprint, rep, &test_pred, dist.get()));
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
