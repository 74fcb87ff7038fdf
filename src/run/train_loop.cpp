// The one step loop of a run (train_loop.h).
#include "run/train_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "checkpoint/checkpoint.h"
#include "checkpoint/run_record.h"
#include "core/error.h"
#include "model/layout.h"
#include "run/recorder.h"

namespace mlalpha {

namespace fs = std::filesystem;

fs::path model_dir(const RunContext& c, const ModelSlot& slot) {
  return c.population ? slot.data->plan->dir / slot.spec.name : slot.data->plan->dir;
}

bool slot_finished(const RunConfig& cfg, const ModelSlot& slot) {
  return slot.state.present && (slot.finished || slot.state.early_stopped || slot.state.step >= cfg.train.steps);
}

namespace {

// One line per validation round of a population: the spread of run.metric over the members that validated at
// step s, "step 100: valid ic of 16 members: best 0.912 (member-03), median 0.871, worst 0.803; 2 stopped early".
std::string validation_summary(const RunConfig& cfg, const std::vector<ModelSlot>& slots,
                               std::vector<std::pair<double, int>> scored, int stopped, int64_t s) {
  const bool higher = higher_is_better(cfg.run.metric);
  std::stable_sort(scored.begin(), scored.end(), [&](const auto& a, const auto& b) {
    if (std::isnan(a.first) || std::isnan(b.first)) return !std::isnan(a.first) && std::isnan(b.first);
    return higher ? a.first > b.first : a.first < b.first;
  });
  auto v = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.5g", x);
    return std::string(b);
  };
  const auto& best = scored.front();
  std::string line = "step " + std::to_string(s) + ": valid " + cfg.run.metric + " of " + std::to_string(scored.size()) +
                     " members: best " + v(best.first) + " (" + slots[size_t(best.second)].spec.name + ")";
  if (scored.size() > 2) line += ", median " + v(scored[scored.size() / 2].first);
  if (scored.size() > 1) line += ", worst " + v(scored.back().first);
  if (stopped > 0) line += "; " + std::to_string(stopped) + " stopped early";
  return line;
}

// The models continue where their folders stand: those that still train from their checkpoints (all at one
// step), the finished ones frozen. Returns that step (0 for a fresh start); frozen_at[m] > 0 is the step a
// finished model stopped at.
int64_t resume_slots(const RunContext& c, std::vector<ModelSlot>& slots, Engine& engine, std::vector<int64_t>& frozen_at) {
  const RunConfig& cfg = c.cfg;
  bool any = false;
  for (const ModelSlot& s : slots) any = any || s.state.present;
  int64_t start = 0;
  for (size_t m = 0; m < slots.size(); ++m) {
    ModelSlot& slot = slots[m];
    const std::string who = c.population ? slot.spec.name + (c.folds > 1 ? " of fold " + std::to_string(slot.data->plan->fold) : "")
                                         : "fold " + std::to_string(slot.data->plan->fold);
    require(slot.state.present || !any,
            "--resume " + cfg.run.out_dir + ": " + (model_dir(c, slot) / "last.safetensors").string() +
                " is missing, so " + who + " cannot continue (an invocation that ended without saving, e.g. killed, "
                "leaves none); train the run again with --overwrite");
    if (!slot.state.present) continue;
    if (slot_finished(cfg, slot)) {
      engine.freeze(int(m));
      frozen_at[m] = slot.state.step;
      continue;
    }
    const Checkpoint ck = load_checkpoint(slot.checkpoint, cfg.model);
    if (ck.state.step != slot.state.step) {
      // A kill between the checkpoint's rename and its state file's: the checkpoint is the truth; the best
      // comes from best.json and run.patience counts afresh.
      c.rep.message("resume: " + (model_dir(c, slot) / kModelStateFile).string() + " is of step " +
                        std::to_string(slot.state.step) + ", " + slot.checkpoint + " of step " +
                        std::to_string(ck.state.step) + ": continuing from the checkpoint, run.patience counts again",
                    slot.data->plan->fold, ck.state.step);
      slot.state.step = ck.state.step;
      slot.state.best_known = false;
      slot.state.bad_evals = 0;
      slot.state.early_stopped = false;
    }
    require(start == 0 || slot.state.step == start,
            "--resume " + cfg.run.out_dir + ": " + who + " stands at step " + std::to_string(slot.state.step) +
                ", the others at step " + std::to_string(start) + "; models trained together resume from one step");
    start = slot.state.step;
    engine.load_state(int(m), ck.state);
  }
  return start;
}

// train.init: a fresh model's starting point, the checkpoint's weights with the optimiser and the schedule at
// step 0 (zero moments), as a state the engine loads before the first step.
TrainState initial_state(const std::string& path, const ModelConfig& mc, uint64_t seed) {
  TrainState s;
  s.params = load_checkpoint_weights(path, mc).params;
  s.m.assign(s.params.size(), 0.0f);
  s.v.assign(s.params.size(), 0.0f);
  s.seed = seed;
  return s;
}

}  // namespace

std::vector<Trained> train_models(RunContext& c, std::vector<ModelSlot> slots, bool& stopped, bool& paused) {
  const RunConfig& cfg = c.cfg;
  const auto t_setup = std::chrono::steady_clock::now();
  const int E = int(slots.size());
  std::vector<Member> members;  // checked on the raw panel before the folder was touched; trained on the fold's
  for (const ModelSlot& s : slots) {
    require(s.member.has_value(), "train_models: a model slot whose member was never checked");
    members.push_back(s.member->on(s.data->norm));
  }
  std::unique_ptr<Engine> engine = make_engine(members, c.engine);
  const auto t_ready = std::chrono::steady_clock::now();
  const int first_fold = slots.front().data->plan->fold;

  std::vector<int64_t> frozen_at(size_t(E), 0);  // > 0: the step model m stopped at (early, or at train.steps)
  const int64_t start = resume_slots(c, slots, *engine, frozen_at);
  for (int m = 0; m < E; ++m) {
    const ModelSlot& slot = slots[size_t(m)];
    if (slot.state.present || slot.spec.train.init.empty()) continue;
    engine->load_state(m, initial_state(slot.spec.train.init, cfg.model, slot.spec.train.seed));
    if (m == 0) c.rep.message("starting from the weights of train.init = " + slot.spec.train.init, first_fold, 0);
  }
  int live = 0, resumed = 0;
  for (int m = 0; m < E; ++m) live += frozen_at[size_t(m)] == 0, resumed += slots[size_t(m)].state.present;
  {
    RunEvent e;
    e.kind = RunEvent::Kind::fold_start;
    e.fold = first_fold;
    e.folds = c.folds;
    e.split = slots.front().data->plan->split;
    e.device = engine->name();
    e.params = ModelLayout(cfg.model).table.count();
    e.start_step = start;
    e.step = start;
    c.rep.emit(e);
  }
  const std::string detail = engine->detail();
  const std::string engine_note = std::string(engine->name()) + " engine" + (detail.empty() ? "" : " (" + detail + ")") +
                                  " set up in " + seconds_text(t_setup, t_ready);
  if (c.population) {
    const bool all_folds = slots.front().data->plan != slots.back().data->plan;
    c.rep.message("population of " + std::to_string(E) + " members" +
                      (all_folds ? " (every walk-forward fold at once)" : std::string()) + "; " + engine_note,
                  first_fold, start);
  } else {
    c.rep.message("data prepared in " + seconds_text(slots.front().data->prepare_seconds) +
                      " (processed as the data settings say, the whole time axis in the engine's memory); " + engine_note,
                  first_fold, start);
  }
  if (resumed > 0)
    c.rep.message(live == 0 ? std::string(c.population ? "every member" : "the model") +
                                  " finished in an earlier invocation: the best weights are tested again"
                            : "resumed " + (c.population ? std::to_string(live) + " members" : std::string("the model")) +
                                  " at step " + std::to_string(start) +
                                  (live < E ? " (" + std::to_string(E - live) + " finished earlier: tested again)"
                                            : std::string()),
                  first_fold, start);
  if (evaluation_mode(slots.front().spec.train) == PredictMode::carry)
    c.rep.message("train.state = 'carry': each lane of the batch carries its state from window to window along an "
                  "instrument's present rows; validation and test predict in mode carry (each instrument's state "
                  "carried from its first row)",
                  first_fold, start);
  if (std::isnan(slots.front().data->sc.periods_per_year))
    c.rep.message("ls_sharpe is NaN: the time labels are not dates, so the periods per year are unknown "
                  "(set run.periods_per_year, e.g. 252 for trading days)",
                  first_fold, start);

  std::vector<std::unique_ptr<ModelRecorder>> rec;
  for (int m = 0; m < E; ++m) {
    const ModelSlot& slot = slots[size_t(m)];
    const FoldData& d = *slot.data;
    const fs::path dir = model_dir(c, slot);
    c.dirs.create(dir);
    CheckpointMeta meta{cfg.model, slot.spec.train, d.plan->stats, c.panel.feature_names, c.panel.target_names, {}};
    meta.data_json = encode_run_record(cfg, c.described, d.plan->fold, c.fingerprint);
    Engine* en = engine.get();
    ModelRecorder::Access access{[en, m](int64_t s) { return en->point(m, s); },
                                 [en, m, &d, &slot](int t0, int t1, const std::vector<float>* params) {
                                   return evaluate_range(*en, m, slot.spec.train, d, t0, t1, params);
                                 },
                                 [en, m] { return en->state(m); },
                                 [&c] { c.lock.check(); }};
    rec.push_back(std::make_unique<ModelRecorder>(
        cfg, slot.spec.train, d.norm, d.sc,
        ModelRecorder::Where{d.plan, &c.panel, dir, c.population ? m : -1, c.population ? slot.spec.name : ""},
        std::move(meta), std::move(access), slot.state.present ? slot.state.step : 0, slot.state));
  }

  const int64_t eval_every = cfg.run.eval_every > 0 ? cfg.run.eval_every : cfg.train.steps;
  // The journal of the models' checkpoint commits, in the run folder above every model folder; a kill after
  // it is written is completed at the next start (run_folder.h, recover_run_folder).
  const std::string journal = (fs::path(cfg.run.out_dir) / "last.journal").string();
  // run.save_every: a model frozen in this invocation is finished (its files written, as at the end) by the
  // first periodic save after it froze, so a resume after a crash finds it complete.
  std::vector<char> finished(size_t(E), 0);
  std::vector<std::vector<float>> finished_pred(static_cast<size_t>(E));  // (N, T, K) each: finish's test predictions
  std::string wrote;  // the first written model's files, as the fold_end message says them
  int64_t last = start;  // the last step taken
  for (int64_t s = start + 1; s <= cfg.train.steps && live > 0; ++s) {
    engine->step();
    last = s;
    const bool eval_now = s % eval_every == 0 || s == cfg.train.steps;
    const bool pause = cfg.run.stop_after > 0 && s - start >= cfg.run.stop_after;
    const bool save_now = cfg.run.save_every > 0 && s % cfg.run.save_every == 0 && s < cfg.train.steps;
    const bool stop = c.rep.stop_requested() || pause;
    std::vector<std::pair<double, int>> scored;  // this step's validation value of each model that ran one
    for (int m = 0; m < E; ++m) {
      if (frozen_at[size_t(m)] > 0) continue;
      if (s % cfg.train.log_every == 0 || eval_now || stop || save_now || s == cfg.train.steps)
        rec[size_t(m)]->log(s, c.rep);
      if (!eval_now) continue;
      const bool out_of_patience = rec[size_t(m)]->validate(s, c.rep);
      scored.emplace_back(rec[size_t(m)]->res().evaluations.back().value, m);
      if (out_of_patience) {
        engine->freeze(m);
        frozen_at[size_t(m)] = s;
        --live;
      }
    }
    if (E > 1 && !scored.empty()) c.rep.message(validation_summary(cfg, slots, scored, E - live, s), first_fold, s);
    if (save_now && live > 0 && !(stop || c.rep.stop_requested())) {  // a stop saves below, at the end
      AtomicFileSet set(journal);  // every model's checkpoint of this step becomes current at once
      for (int m = 0; m < E; ++m) {
        ModelRecorder& r = *rec[size_t(m)];
        const int64_t at = frozen_at[size_t(m)];
        if (at == 0) {
          r.save(s, set);
        } else if (!finished[size_t(m)] && !slot_finished(cfg, slots[size_t(m)])) {
          const std::string files = r.finish(at, &finished_pred[size_t(m)], set);
          if (wrote.empty()) wrote = files;
          finished[size_t(m)] = 1;
        }
      }
      c.lock.check();
      set.commit();
    }
    if ((stop || c.rep.stop_requested()) && s < cfg.train.steps && live > 0) {
      stopped = c.rep.stop_requested();
      paused = !stopped;
      c.rep.message((paused ? "stopping after " + std::to_string(cfg.run.stop_after) + " steps"
                            : std::string("interrupted")) +
                        " at step " + std::to_string(s) + ": saving " +
                        (c.population ? "every member's last checkpoint" : "the last checkpoint") +
                        " (continue with --resume " + cfg.run.out_dir + ")",
                    first_fold, s);
      break;
    }
  }

  std::vector<Trained> out;
  AtomicFileSet final_set(journal);  // the models' last checkpoints of this invocation, current at once
  for (int m = 0; m < E; ++m) {
    const ModelSlot& slot = slots[size_t(m)];
    Trained t;
    t.spec = slot.spec;
    t.data = slot.data;
    const bool frozen = frozen_at[size_t(m)] > 0;
    const int64_t steps = frozen ? frozen_at[size_t(m)] : last;
    ModelRecorder& r = *rec[size_t(m)];
    r.res().stopped = stopped && !frozen;
    r.res().paused = paused && !frozen;
    std::vector<float> test_pred;
    t.trained = !slot_finished(cfg, slot);
    if (finished[size_t(m)]) {
      test_pred = std::move(finished_pred[size_t(m)]);  // finished by a periodic save
    } else if (!t.trained) {
      r.retest(steps, &test_pred);  // finished in an earlier invocation: its files stay as they are
    } else {
      const std::string files = r.finish(steps, &test_pred, final_set);
      if (wrote.empty()) wrote = files;
    }
    t.res = r.res();
    const std::vector<float>& best = r.best_params();
    if (t.res.has_test) {
      t.best_pred = std::move(test_pred);
    } else if (c.population && !best.empty()) {  // the ensemble scores the validation range without a test range
      const TimeRange sr = scored_range(slot.data->plan->split);
      t.best_pred = evaluate_range(*engine, m, t.spec.train, *slot.data, sr.t0, sr.t1, &best);
    }
    if (c.population && c.folds > 1 && !best.empty()) {
      const Split& sp = slot.data->plan->split;
      t.valid_pred = evaluate_range(*engine, m, t.spec.train, *slot.data, sp.valid_begin, sp.valid_end, &best);
    }
    out.push_back(std::move(t));
  }
  if (!final_set.empty()) {
    c.lock.check();
    final_set.commit();
  }
  RunEvent e;
  e.kind = RunEvent::Kind::fold_end;
  e.fold = first_fold;
  e.folds = c.folds;
  e.step = last;
  e.split = slots.front().data->plan->split;
  const std::string folders = out.front().res.dir + (E > 1 ? " .. " + out.back().res.dir : std::string());
  if (wrote.empty()) e.message = "the files stay as an earlier invocation left them (" + folders + ")";
  else if (c.population) e.message = "wrote " + std::to_string(E) + " member folders (" + folders + "), the first written: " + wrote;
  else e.message = "wrote " + wrote;
  c.rep.emit(e);
  return out;
}

}  // namespace mlalpha
