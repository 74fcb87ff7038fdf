// run_training (include/mlalpha/run.h): the settings resolved once, the data read once, every check before
// the run folder is touched, then one fold loop for a solo run and a population alike (a solo run is a
// population of one whose model folder is the fold's), and the summary chosen at the start.
#include "mlalpha/run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "checkpoint/run_record.h"
#include "checkpoint/run_records.h"
#include "config/members.h"
#include "core/error.h"
#include "core/temp_dir.h"
#include "run/data_checks.h"
#include "run/folds.h"
#include "run/reporter.h"
#include "run/resume.h"
#include "run/run_folder.h"
#include "run/summary.h"
#include "run/train_loop.h"
#include "train/engine.h"

namespace mlalpha {

namespace fs = std::filesystem;

RunConfig resolve_run_config(const RunConfig& config, const std::string& resume, std::vector<std::string>* changes) {
  if (resume.empty()) return config;
  return resolve_resume(config, resume, locate_resume(resume), changes);
}

namespace {

// The engines of the run, fold by fold or (run.parallel_folds) every fold's members in one: indices into the
// members of every fold.
std::vector<std::vector<size_t>> engine_groups(const RunConfig& cfg, const std::vector<MemberSpec>& members, int folds) {
  const bool together = cfg.run.parallel_folds && folds > 1 && is_population(cfg);
  std::vector<std::vector<size_t>> groups(together ? 1 : size_t(folds));
  for (int f = 0; f < folds; ++f)
    for (size_t i = 0; i < members.size(); ++i) {
      if (together && members[i].fold != f) continue;
      groups[together ? 0 : size_t(f)].push_back(i);
    }
  return groups;
}

// Member i of `members` as trained in fold f (the members are listed once; in turn each fold trains them all).
MemberSpec member_in_fold(const RunConfig& cfg, const MemberSpec& m, int f, int folds) {
  MemberSpec out = m;
  if (!(cfg.run.parallel_folds && folds > 1)) out.fold = f;
  return out;
}

// Where each model of a resumed run stands. Format 0 (a solo run recorded in its checkpoints only): the folds
// before the checkpoint's are finished, the checkpoint's continues from it, the later ones start afresh.
ModelSlot slot_of(const RunContext& c, const ResumeSource* src, MemberSpec spec, const FoldData* data) {
  ModelSlot s;
  s.spec = std::move(spec);
  s.data = data;
  const fs::path dir = model_dir(c, s);
  s.checkpoint = (dir / "last.safetensors").string();
  if (!src) return s;
  const int fold = data->plan->fold;
  if (src->format != 0) {
    s.state = read_model_state(dir);
    return s;
  }
  if (fold > src->fold) return s;
  s.state = read_model_state(dir);
  if (fold < src->fold) {
    s.state.present = s.finished = true;
    s.state.step = load_checkpoint_weights(s.checkpoint, c.cfg.model).step;
    return s;
  }
  if (s.state.step != src->step) s.state.best_known = false, s.state.bad_evals = 0;
  s.state.present = true;
  s.state.step = src->step;
  s.checkpoint = src->checkpoint;
  return s;
}

RunResult run_resolved(const RunConfig& resolved, const std::vector<std::string>& changes, const Panel& panel,
                       const RunOptions& options, const ResumeSource* resumed, double read_seconds) {
  const ResumeSource* src = resumed;
  ResumeSource worker_src;
  Reporter rep(options);
  RunResult result;
  result.config = resolved;
  RunConfig& cfg = result.config;
  panel.validate();
  cfg.model.F = panel.F;
  cfg.model.K = panel.K;
  cfg.validate();
  {
    RunEvent e;
    e.kind = RunEvent::Kind::start;
    e.config = &cfg;
    e.N = panel.N, e.T = panel.T, e.F = panel.F, e.K = panel.K;
    e.read_seconds = read_seconds;
    rep.emit(e);
  }
  // Data-parallel: rank r > 0 runs the whole run in a private folder, removed at the end: its evaluations and
  // early stops see the same weights as rank 0's, so all ranks take the same steps; only rank 0's files stay.
  // A resume copies the run folder there first, before this rank joins the communicator: rank 0 writes
  // nothing before every rank has joined.
  DistSessionPtr dist;
  std::unique_ptr<TempDir> worker;
  if (options.world > 1 || options.data_parallel) {
    require(options.rank >= 0 && options.rank < options.world && options.local_rank >= 0,
            "data-parallel run: rank " + std::to_string(options.rank) + " of world " + std::to_string(options.world) +
                " (local rank " + std::to_string(options.local_rank) + ") is not a rank of it");
    if (options.rank > 0) {
      worker = std::make_unique<TempDir>("ml-alpha-rank" + std::to_string(options.rank) + "-",
                                         "data-parallel rank " + std::to_string(options.rank) + "'s run folder");
      cfg.run.out_dir = worker->path().string();
      if (src) {
        std::error_code ec;
        fs::copy(src->dir, worker->path(), fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
        require(!ec, "data-parallel rank " + std::to_string(options.rank) + ": cannot copy the run folder " +
                         src->dir.string() + " to resume it in " + worker->path().string() + ": " + ec.message());
        worker_src = *src;
        worker_src.dir = worker->path();
        src = &worker_src;
      }
    }
    dist = open_dist_session(options.rank, options.world, options.local_rank);
  }

  // Every check before the run folder is touched: the splits, each fold's statistics and targets, the members,
  // the resumed run's data and every engine's settings and memory.
  const std::vector<FoldPlan> plans = plan_folds(cfg, panel);
  const int folds = int(plans.size());
  const bool population = is_population(cfg);
  const std::vector<MemberSpec> members = expand_population(cfg, folds);
  const std::vector<std::string> warnings = check_run_data(cfg, panel, plans, src == nullptr);
  const uint64_t fingerprint = panel_fingerprint(panel);
  if (src && src->has_record)
    require(src->fingerprint == fingerprint,
            "--resume " + options.resume + ": the data differs from the data the run was trained on (" +
                cfg.data.source + " data, fingerprint " + hex64(fingerprint) + ", recorded " + hex64(src->fingerprint) +
                " in " + src->record_file + "); a resume must continue on the same data");
  if (src && src->format == 0)
    require(src->fold >= 0 && src->fold < folds, "--resume " + options.resume + ": the checkpoint is from fold " +
                                                     std::to_string(src->fold) + ", the split has " +
                                                     std::to_string(folds) + " folds");
  require(!src || src->population == population,
          "--resume " + options.resume + ": the run in " + (src ? src->dir.string() : "") + " is " +
              (population ? "a solo run" : "a population") + " but the settings describe " +
              (population ? "a population (train.models, [sweep])" : "one model"));
  // The compute settings, decided once for the whole run (mlalpha/compute.h): every engine, validation and test of
  // every fold reads this value.
  EngineOptions engine{resolve(cfg.compute()), cfg.run.graph, dist.get()};
  const std::vector<std::vector<size_t>> groups = engine_groups(cfg, members, folds);
  std::vector<std::vector<Member>> checked(groups.size());  // each engine's members, checked once, here
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<EngineMember> em;
    std::vector<std::string> names;
    for (size_t i : groups[g]) {
      const int f = groups.size() > 1 ? int(g) : members[i].fold;
      const Split& s = plans[size_t(f)].split;
      em.push_back({members[i].train, &panel, {s.train_begin, s.train_end}});
      names.push_back(members[i].name);
    }
    checked[g] = check_engine(cfg.model, em, names, engine);  // the prepared panels have the raw panel's shape
  }

  // The run folder: locked for the whole run, refused when it holds another run, cleared by --overwrite.
  const fs::path out(cfg.run.out_dir);
  CreatedDirs dirs;
  dirs.create(out);
  const RunLock lock(out);
  RunOptions claim = options;
  if (src) claim.resume = src->dir.string();
  // A killed run's commits completed and its temporary files removed; a killed --overwrite's old run moved back,
  // or deleted once the new one had saved.
  if (const auto done = recover_run_folder(out); !done.empty())
    rep.message("completed what a killed run left in " + out.string() + ": " + std::to_string(done.size()) +
                    " files renamed or removed (the saves it had committed kept, its unfinished writes dropped)",
                0, 0);
  settle_old_runs(out);
  check_run_folder(out, claim);
  std::optional<OldRunAside> aside;  // --overwrite: the old run, moved back unless this run ends normally
  if (options.overwrite && !src) aside.emplace(out);
  result.run_dir = out.string();

  RunContext c{cfg, panel, folds, fingerprint, options.panel_from_config, population, rep, dirs, engine, lock};
  std::vector<std::vector<ModelSlot>> slots(groups.size());  // the resume's states, read before anything is written
  std::vector<FoldData> data(static_cast<size_t>(folds));
  for (int f = 0; f < folds; ++f) data[size_t(f)].plan = &plans[size_t(f)];
  bool unfinished = false;
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t i : groups[g]) {
      const int f = groups.size() > 1 ? int(g) : members[i].fold;
      slots[g].push_back(slot_of(c, src, member_in_fold(cfg, members[i], f, folds), &data[size_t(f)]));
      slots[g].back().member = checked[g][slots[g].size() - 1];
      unfinished = unfinished || !slot_finished(cfg, slots[g].back());
    }
  // Every model finished, but a kill came before the run's last outputs (test records, summaries): the resume
  // tests the models again and writes them.
  require(unfinished || (src && !src->complete),
          "--resume " + options.resume + ": every model has finished (train.steps = " +
              std::to_string(cfg.train.steps) + " reached, or stopped early by run.patience), so the run " +
              "is finished; to train longer set train.steps above " + std::to_string(cfg.train.steps) +
              " explicitly (--steps N)");
  write_run_record(out, cfg, options.panel_from_config, fingerprint, population, false);
  for (const std::string& line : changes) rep.message("resume: " + line, 0, 0);
  for (const std::string& line : warnings) rep.message(line, 0, 0);

  std::unique_ptr<Summary> summary = population ? make_population_summary(c, plans, members, result)
                                                : make_solo_summary(c, plans, result);
  bool stopped = false, paused = false;
  for (size_t g = 0; g < groups.size() && !stopped && !paused; ++g) {
    std::vector<int> fold_ids;
    for (const ModelSlot& s : slots[g])
      if (std::find(fold_ids.begin(), fold_ids.end(), s.data->plan->fold) == fold_ids.end())
        fold_ids.push_back(s.data->plan->fold);
    for (int f : fold_ids) {
      data[size_t(f)] = prepare_fold(cfg, panel, plans[size_t(f)]);
      dirs.create(plans[size_t(f)].dir);
    }
    std::vector<Trained> trained = train_models(c, slots[g], stopped, paused);
    stopped = stopped || rep.stop_requested();
    lock.check();
    summary->add(fold_ids, trained, g + 1 == groups.size() || stopped || paused);
    for (int f : fold_ids) data[size_t(f)].norm = Panel{};  // a long walk-forward holds one fold's panel at a time
  }
  result.stopped = stopped;
  if (!stopped && !paused) {
    require_selection_metric(cfg, result, aside.has_value());
    lock.check();
    write_run_record(out, cfg, options.panel_from_config, fingerprint, population, true);
  }
  // The run finished, or was stopped after saving its checkpoints: the old run it replaces goes.
  if (aside) aside->keep_new();
  return result;
}

// The settings a run uses: the caller's, or a resume's (its run's record with the caller's allowed changes).
struct Resolved {
  std::optional<ResumeSource> src;
  std::vector<std::string> changes;
  RunConfig cfg;
};
Resolved resolve(const RunConfig& config, const RunOptions& options) {
  require(options.resume.empty() || !options.overwrite,
          "--resume " + options.resume + " with --overwrite (Python: overwrite=True): a resume continues the run, "
          "--overwrite replaces it; give one of them");
  Resolved r;
  r.cfg = config;
  if (options.resume.empty()) return r;
  r.src = locate_resume(options.resume);
  r.cfg = resolve_resume(config, options.resume, *r.src, &r.changes);
  return r;
}

}  // namespace

RunResult run_training(const RunConfig& config, const RunOptions& options) {
  const Resolved r = resolve(config, options);
  const RunConfig& cfg = r.cfg;
  cfg.validate();  // every setting before the data is read (F and K are checked again against the data)
  const auto t0 = std::chrono::steady_clock::now();
  const Panel panel = load_panel(cfg.data);
  const double read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RunOptions o = options;
  o.panel_from_config = true;
  return run_resolved(cfg, r.changes, panel, o, r.src ? &*r.src : nullptr, read_seconds);
}

RunResult run_training(const RunConfig& config, const Panel& panel, const RunOptions& options) {
  const Resolved r = resolve(config, options);
  return run_resolved(r.cfg, r.changes, panel, options, r.src ? &*r.src : nullptr, -1);
}

}  // namespace mlalpha
