// The run loop of a population (run_population.h). Each member keeps a solo run's records through its own
// ModelRecorder (run_common.h); what is new here is the stepping of all members together, freezing a member
// whose patience ran out, and the comparison of the members: leaderboard.csv and the mean-ensemble.
#include "run/run_population.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <memory>

#include "checkpoint/population_record.h"
#include "checkpoint/run_record.h"
#include "core/error.h"
#include "data/fileio.h"
#include "eval/folds.h"
#include "mlalpha/metrics.h"
#include "mlalpha/model.h"
#include "model/layout.h"
#include "predict/prediction_mean.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

// A fold prepared for training: the processed panel, its training slice and how it is scored.
struct FoldData {
  const FoldPlan* plan = nullptr;
  Panel norm, train;
  ScoreSpec sc;
};

FoldData prepare_fold(const RunConfig& cfg, const Panel& panel, const FoldPlan& plan) {
  FoldData d;
  d.plan = &plan;
  d.norm = prepared(panel, cfg.data, plan.stats);
  d.train = slice_panel(d.norm, plan.split.train_begin, plan.split.train_end);
  d.sc = score_spec(cfg, panel, plan.split);
  return d;
}

// The range a fold's ensemble and leaderboard score: its test range, or the validation range without one.
TimeRange scored_range(const Split& s) {
  return s.has_test() ? TimeRange{s.test_begin, s.test_end} : TimeRange{s.valid_begin, s.valid_end};
}

// One trained member and its best weights' predictions (N, T, K) over its fold's scored_range (empty
// when no validation ran, so there are no best weights).
struct Trained {
  MemberSpec spec;
  const FoldData* data = nullptr;
  FoldResult res;
  std::vector<float> best_pred;
};

struct PopulationRun {
  const RunConfig& cfg;
  const Panel& panel;
  int folds;
  uint64_t fingerprint;
  bool described;
  Reporter& rep;
  CreatedDirs& dirs;
};

// One line per validation round: the spread of run.metric over the members that validated at step s,
// "step 100: valid ic of 16 members: best 0.912 (member-03), median 0.871, worst 0.803; 2 stopped early".
std::string validation_summary(const RunConfig& cfg, const std::vector<MemberSpec>& members,
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
                     " members: best " + v(best.first) + " (" + members[size_t(best.second)].name + ")";
  if (scored.size() > 2) line += ", median " + v(scored[scored.size() / 2].first);
  if (scored.size() > 1) line += ", worst " + v(scored.back().first);
  if (stopped > 0) line += "; " + std::to_string(stopped) + " stopped early";
  return line;
}

// Trains members[i] on data[i] in one population; stopped is set when the callback or the stop flag ended it,
// paused when run.stop_after did. states[i].present: member i continues from its folder's last.safetensors
// (a resume; all such members that still train stand at the same step), or trains no step when it had
// finished (run.patience froze it, or it reached train.steps) and is only tested again.
std::vector<Trained> train_population(PopulationRun& c, const std::vector<MemberSpec>& members,
                                      const std::vector<const FoldData*>& data, const std::vector<MemberState>& states,
                                      bool& stopped, bool& paused) {
  const RunConfig& cfg = c.cfg;
  const auto t_setup = std::chrono::steady_clock::now();
  std::vector<const Panel*> train;
  for (const FoldData* d : data) train.push_back(&d->train);
  auto be = make_population_backend(cfg, members, train);
  const int E = int(members.size());
  const int first_fold = data.front()->plan->fold;
  auto member_dir = [&](int m) { return data[size_t(m)]->plan->dir / members[size_t(m)].name; };

  // A resume: the members that still train continue from their last checkpoints; the finished ones stay.
  std::vector<int64_t> frozen_at(size_t(E), 0);  // > 0: the step member m stopped at (early, or at train.steps)
  int64_t start = 0;  // the step the members that still train stand at
  int live = E, resumed = 0;
  for (int m = 0; m < E; ++m) {
    const MemberState& st = states[size_t(m)];
    if (!st.present) continue;
    ++resumed;
    if (st.early_stopped || st.step >= cfg.train.steps) {
      be->freeze(m);
      frozen_at[size_t(m)] = st.step;
      --live;
      continue;
    }
    const fs::path last = member_dir(m) / "last.safetensors";
    const Checkpoint ck = load_checkpoint(last.string(), cfg.model);
    require(ck.state.step == st.step, last.string() + " is at step " + std::to_string(ck.state.step) + " but " +
                                          (member_dir(m) / kMemberStateFile).string() + " says step " +
                                          std::to_string(st.step) + "; the member's folder was changed by hand");
    require(start == 0 || st.step == start, "--resume: " + members[size_t(m)].name + " stands at step " +
                                                std::to_string(st.step) + ", the population's other members at step " +
                                                std::to_string(start) + "; a population resumes from one step");
    start = st.step;
    be->load_state(m, ck.state);
  }
  {
    RunEvent e;
    e.kind = RunEvent::Kind::fold_start;
    e.fold = first_fold;
    e.folds = c.folds;
    e.split = data.front()->plan->split;
    e.device = be->name();
    e.params = ModelLayout(cfg.model).table.count();
    e.start_step = start;
    e.step = start;
    c.rep.emit(e);
  }
  const bool all_folds = data.front()->plan != data.back()->plan;
  c.rep.message("population of " + std::to_string(E) + " members" +
                    (all_folds ? " (every walk-forward fold at once)" : std::string()) + "; " + be->name() +
                    " engine set up in " + seconds_text(t_setup, std::chrono::steady_clock::now()),
                first_fold, start);
  if (resumed > 0)
    c.rep.message(live == 0 ? "every member finished in an earlier invocation: their best weights are tested again"
                            : "resumed " + std::to_string(live) + " members at step " + std::to_string(start) +
                                  (live < E ? " (" + std::to_string(E - live) + " finished earlier: tested again)"
                                            : std::string()),
                  first_fold, start);
  if (std::isnan(data.front()->sc.periods_per_year))
    c.rep.message("ls_sharpe is NaN: the time labels are not dates, so the periods per year are unknown "
                  "(set run.periods_per_year, e.g. 252 for trading days)",
                  first_fold, start);

  std::vector<std::unique_ptr<ModelRecorder>> rec;
  for (int m = 0; m < E; ++m) {
    const FoldData& d = *data[size_t(m)];
    const fs::path dir = member_dir(m);
    c.dirs.create(dir);
    CheckpointMeta meta{cfg.model, members[size_t(m)].train, d.plan->stats, c.panel.feature_names, c.panel.target_names, {}};
    meta.data_json = encode_run_record(cfg, c.described, d.plan->fold, c.fingerprint);
    PopulationBackend* b = be.get();
    ModelRecorder::Access access{[b, m](int64_t s) { return b->point(m, s); },
                                 [b, m, &d](const PredictSpec& spec, const std::vector<float>* params) {
                                   return b->predict(m, d.norm, spec, params);
                                 },
                                 [b, m] { return b->state(m); }};
    const MemberState& st = states[size_t(m)];
    rec.push_back(std::make_unique<ModelRecorder>(
        cfg, members[size_t(m)].train, d.norm, d.sc,
        ModelRecorder::Where{d.plan, &c.panel, dir, c.folds, m, members[size_t(m)].name}, std::move(meta),
        std::move(access), st.present ? st.step : 0));
    if (st.present) {
      rec.back()->continue_patience(st.bad_evals);
      rec.back()->res().early_stopped = st.early_stopped;
    }
  }

  const int64_t eval_every = cfg.run.eval_every > 0 ? cfg.run.eval_every : cfg.train.steps;
  // run.save_every: a member frozen in this invocation is finished (its files written, as at the end) by
  // the first periodic save after it froze, so a resume after a crash finds it complete.
  std::vector<char> finished(size_t(E), 0);
  std::vector<std::vector<float>> finished_pred(static_cast<size_t>(E));  // (N, T, K) each: finish's test predictions
  std::string wrote;  // the first written member's files, as the fold_end message says them
  int64_t last = start;  // the last step taken
  for (int64_t s = start + 1; s <= cfg.train.steps && live > 0; ++s) {
    be->step();
    last = s;
    const bool eval_now = s % eval_every == 0 || s == cfg.train.steps;
    const bool pause = cfg.run.stop_after > 0 && s - start >= cfg.run.stop_after;
    const bool save_now = cfg.run.save_every > 0 && s % cfg.run.save_every == 0 && s < cfg.train.steps;
    const bool stop = c.rep.stop_requested() || pause;
    std::vector<std::pair<double, int>> scored;  // this step's validation value of each member that ran one
    for (int m = 0; m < E; ++m) {
      if (frozen_at[size_t(m)] > 0) continue;
      if (s % cfg.train.log_every == 0 || eval_now || stop || save_now || s == cfg.train.steps)
        rec[size_t(m)]->log(s, c.rep);
      if (!eval_now) continue;
      const bool out_of_patience = rec[size_t(m)]->validate(s, c.rep);
      scored.emplace_back(rec[size_t(m)]->res().evaluations.back().value, m);
      if (out_of_patience) {
        be->freeze(m);
        frozen_at[size_t(m)] = s;
        --live;
      }
    }
    if (E > 1 && !scored.empty()) c.rep.message(validation_summary(cfg, members, scored, E - live, s), first_fold, s);
    if (save_now && live > 0 && !(stop || c.rep.stop_requested())) {  // a stop saves below, at the end
      for (int m = 0; m < E; ++m) {
        ModelRecorder& r = *rec[size_t(m)];
        const int64_t at = frozen_at[size_t(m)];
        if (at == 0) {
          r.save(s);
          write_member_state(member_dir(m), {true, s, false, r.bad_evals()});
        } else if (!finished[size_t(m)] && !(states[size_t(m)].present && at == states[size_t(m)].step)) {
          const std::string files = r.finish(at, &finished_pred[size_t(m)]);
          if (wrote.empty()) wrote = files;
          write_member_state(member_dir(m), {true, at, r.res().early_stopped, r.bad_evals()});
          finished[size_t(m)] = 1;
        }
      }
    }
    if ((stop || c.rep.stop_requested()) && s < cfg.train.steps && live > 0) {
      stopped = c.rep.stop_requested();
      paused = !stopped;
      c.rep.message((paused ? "stopping after " + std::to_string(cfg.run.stop_after) + " steps"
                            : std::string("interrupted")) +
                        " at step " + std::to_string(s) + ": saving every member's last checkpoint (continue with --resume " +
                        c.cfg.run.out_dir + ")",
                    first_fold, s);
      break;
    }
  }

  std::vector<Trained> out;
  for (int m = 0; m < E; ++m) {
    const FoldData& d = *data[size_t(m)];
    Trained t;
    t.spec = members[size_t(m)];
    t.data = &d;
    const bool frozen = frozen_at[size_t(m)] > 0;
    const int64_t steps = frozen ? frozen_at[size_t(m)] : last;
    ModelRecorder& r = *rec[size_t(m)];
    r.res().stopped = stopped && !frozen;
    std::vector<float> test_pred;
    if (finished[size_t(m)]) {
      test_pred = std::move(finished_pred[size_t(m)]);  // finished by a periodic save
    } else if (states[size_t(m)].present && frozen && steps == states[size_t(m)].step) {
      r.retest(steps, &test_pred);  // finished in an earlier invocation: its files stay as they are
    } else {
      const std::string files = r.finish(steps, &test_pred);
      if (wrote.empty()) wrote = files;
      write_member_state(member_dir(m), {true, steps, r.res().early_stopped, r.bad_evals()});
    }
    t.res = rec[size_t(m)]->res();
    const std::vector<float>& best = rec[size_t(m)]->best_params();
    if (t.res.has_test) {
      t.best_pred = std::move(test_pred);
    } else if (!best.empty()) {
      const TimeRange r = scored_range(d.plan->split);
      t.best_pred = be->predict(m, d.norm, predict_spec(t.spec.train, d.norm, r.t0, r.t1), &best);
    }
    out.push_back(std::move(t));
  }
  RunEvent e;
  e.kind = RunEvent::Kind::fold_end;
  e.fold = first_fold;
  e.folds = c.folds;
  e.step = last;
  e.split = data.front()->plan->split;
  e.message = wrote.empty() ? "every member's files stay as an earlier invocation left them (" + out.front().res.dir +
                                  (E > 1 ? " .. " + out.back().res.dir : std::string()) + ")"
                            : "wrote " + std::to_string(E) + " member folders (" + out.front().res.dir +
                                  (E > 1 ? " .. " + out.back().res.dir : std::string()) + "), the first written: " + wrote;
  c.rep.emit(e);
  return out;
}

// ---- leaderboard.csv

std::string num(double v) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string csv_cell(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

// A ranked table: `header` and one row of cells per member (best first), the ensemble row last.
struct Board {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// One member's line before ranking: the value it is ranked by, then its cells.
struct Entry {
  double key = NAN;
  std::vector<std::string> cells;  // without the rank
};

// Ranks entries by key on cfg.run.metric (best first, NaN last; ties keep member order) and adds the
// ensemble's cells (may be empty) with an empty rank.
Board rank(const RunConfig& cfg, std::vector<std::string> header, std::vector<Entry> entries,
           const std::vector<std::string>& ensemble) {
  const bool higher = higher_is_better(cfg.run.metric);
  std::stable_sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    if (std::isnan(a.key) || std::isnan(b.key)) return !std::isnan(a.key) && std::isnan(b.key);
    return higher ? a.key > b.key : a.key < b.key;
  });
  Board board;
  board.header = std::move(header);
  for (size_t i = 0; i < entries.size(); ++i) {
    std::vector<std::string> row{std::to_string(i + 1)};
    row.insert(row.end(), entries[i].cells.begin(), entries[i].cells.end());
    board.rows.push_back(std::move(row));
  }
  if (!ensemble.empty()) {
    std::vector<std::string> row{""};
    row.insert(row.end(), ensemble.begin(), ensemble.end());
    board.rows.push_back(std::move(row));
  }
  return board;
}

void write_board(const fs::path& path, const Board& b) {
  std::string text;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) text += (i ? "," : "") + csv_cell(cells[i]);
    text += "\n";
  };
  line(b.header);
  for (const auto& r : b.rows) line(r);
  write_file_atomic(path.string(), text);
}

// The board's first rows and the ensemble as aligned text, in the columns a reader compares first.
std::string board_text(const Board& b, const std::vector<std::string>& columns, size_t top) {
  std::vector<size_t> at;
  for (const std::string& name : columns)
    for (size_t i = 0; i < b.header.size(); ++i)
      if (b.header[i] == name) at.push_back(i);
  std::vector<const std::vector<std::string>*> rows{&b.header};
  for (size_t r = 0; r < b.rows.size(); ++r)
    if (r < top || b.rows[r][0].empty()) rows.push_back(&b.rows[r]);
  // The cells as shown (numbers to 5 significant digits, the ensemble named), then the widths.
  std::vector<std::vector<std::string>> shown;
  for (const auto* r : rows) {
    std::vector<std::string> line;
    for (size_t j = 0; j < at.size(); ++j) {
      std::string cell = (*r)[at[j]];
      char* end = nullptr;
      const double v = cell.empty() || r == &b.header ? NAN : std::strtod(cell.c_str(), &end);
      if (!std::isnan(v) && end && *end == '\0' && cell.find('.') != std::string::npos) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.5g", v);
        cell = buf;
      }
      if (r != &b.header && (*r)[0].empty() && j == 1) cell = "ensemble";
      line.push_back(cell);
    }
    shown.push_back(std::move(line));
  }
  std::vector<size_t> width(at.size(), 0);
  for (const auto& r : shown)
    for (size_t j = 0; j < at.size(); ++j) width[j] = std::max(width[j], r[j].size());
  std::string text;
  for (const auto& r : shown) {
    std::string line;
    for (size_t j = 0; j < at.size(); ++j) line += (j ? "  " : "") + r[j] + std::string(width[j] - r[j].size(), ' ');
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += "\n  " + line;
  }
  return text;
}

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

void add_metrics(std::vector<std::string>& cells, bool has, const Metrics& m) {
  for (const std::string& name : metric_names()) cells.push_back(has ? num(metric_by_name(m, name)) : "");
}

// The mean over members of their best-weight predictions (N, T, K), in member order: NaN where any member
// has NaN; members without best weights (no validation ran) are left out.
std::vector<float> mean_prediction(const std::vector<const Trained*>& members) {
  PredictionMean mean;
  for (const Trained* t : members)
    if (!t->best_pred.empty()) mean.add(t->best_pred);
  return mean.empty() ? std::vector<float>{} : mean.mean();
}

// A fold's leaderboard and ensemble (fold-k/ for walk-forward runs, out_dir for one split).
struct FoldSummary {
  bool has_ensemble = false;
  MetricsResult ensemble;
  std::vector<float> ensemble_pred;  // (N, T, K)
  Board board;
  std::string file;
};

FoldSummary summarise_fold(PopulationRun& c, const FoldData& d, const std::vector<const Trained*>& members,
                           const std::vector<std::string>& keys, const Panel& out_panel) {
  const RunConfig& cfg = c.cfg;
  const Split& split = d.plan->split;
  const bool test = split.has_test();
  std::vector<std::string> header{"rank", "member"};
  header.insert(header.end(), keys.begin(), keys.end());
  header.push_back("best_step");
  header.push_back("valid_" + cfg.run.metric);
  for (const std::string& name : metric_names()) header.push_back("test_" + name);
  header.push_back("dir");
  std::vector<Entry> entries;
  for (const Trained* t : members) {
    Entry e;
    e.key = t->res.best_step > 0 ? t->res.best_value : NAN;
    e.cells.push_back(t->spec.name);
    for (const std::string& k : keys) e.cells.push_back(setting_of(t->spec, k));
    e.cells.push_back(t->res.best_step > 0 ? std::to_string(t->res.best_step) : "");
    e.cells.push_back(num(e.key));
    add_metrics(e.cells, t->res.has_test, t->res.test.mean);
    e.cells.push_back(t->res.dir);
    entries.push_back(std::move(e));
  }
  FoldSummary s;
  s.ensemble_pred = mean_prediction(members);
  std::vector<std::string> ens;
  if (!s.ensemble_pred.empty()) {
    const TimeRange r = scored_range(split);
    s.has_ensemble = true;
    s.ensemble = score_range(s.ensemble_pred, d.norm, d.sc, r.t0, r.t1);
    const fs::path dir = d.plan->dir / "ensemble";
    c.dirs.create(dir);
    write_predictions((dir / "pred").string(), out_panel, s.ensemble_pred, r);
    ens.push_back("ensemble");
    ens.insert(ens.end(), keys.size() + 1, "");
    ens.push_back(test ? "" : num(metric_by_name(s.ensemble.mean, cfg.run.metric)));
    add_metrics(ens, test, s.ensemble.mean);
    ens.push_back(dir.string());
  }
  s.board = rank(cfg, header, std::move(entries), ens);
  s.file = (d.plan->dir / "leaderboard.csv").string();
  write_board(s.file, s.board);
  return s;
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

}  // namespace

void run_population(const RunConfig& cfg, const Panel& panel, const std::vector<FoldPlan>& plans,
                    const std::vector<MemberSpec>& members, uint64_t fingerprint, bool described, bool resume,
                    Reporter& rep, RunResult& result) {
  const int folds = int(plans.size());
  const fs::path out(cfg.run.out_dir);
  const bool together = cfg.run.parallel_folds && folds > 1;
  // states[f][i]: member i of fold f (members[i], trained on fold f) as an earlier invocation left it.
  std::vector<std::vector<MemberState>> states(size_t(folds), std::vector<MemberState>(members.size()));
  if (resume) {
    bool unfinished = false;
    for (int f = 0; f < folds; ++f) {
      std::vector<fs::path> dirs_of;
      for (const MemberSpec& m : members)
        if (!together || m.fold == f) dirs_of.push_back(plans[size_t(f)].dir / m.name);
      bool started = false;
      for (const fs::path& d : dirs_of) started = started || fs::exists(d / kMemberStateFile) || fs::exists(d / "last.safetensors");
      if (!started) {
        unfinished = true;
        continue;
      }
      for (size_t i = 0, k = 0; i < members.size(); ++i) {
        if (together && members[i].fold != f) continue;
        const fs::path& d = dirs_of[k++];
        require(fs::exists(d / "last.safetensors"),
                "--resume " + out.string() + ": " + (d / "last.safetensors").string() + " is missing, so " +
                    members[i].name + (folds > 1 ? " of fold " + std::to_string(f) : std::string()) +
                    " cannot continue (an invocation that ended without saving, e.g. killed, leaves none); train "
                    "the population again with --overwrite");
        MemberState st = read_member_state(d);
        require(st.present, "--resume " + out.string() + ": " + (d / kMemberStateFile).string() + " is missing, so " +
                                members[i].name + " cannot continue (the folder was not left by a population run)");
        unfinished = unfinished || !(st.early_stopped || st.step >= cfg.train.steps);
        states[size_t(f)][i] = st;
      }
    }
    require(unfinished, "--resume " + out.string() + ": every member has finished (train.steps = " +
                            std::to_string(cfg.train.steps) + " reached, or stopped early by run.patience), so the "
                            "population is finished; to train longer set train.steps above " +
                            std::to_string(cfg.train.steps) + " explicitly (--steps N)");
  }
  CreatedDirs dirs;
  dirs.create(out);
  for (const FoldPlan& p : plans) dirs.create(p.dir);
  write_population_record(out, cfg, described, fingerprint);
  PopulationRun c{cfg, panel, folds, fingerprint, described, rep, dirs};
  const std::vector<std::string> keys = setting_keys(members);
  // Predictions are written and pooled against the processed targets, as they are scored (run.cpp).
  const Panel processed = cfg.data.target_norm == "none" ? Panel{} : prepared(panel, cfg.data, plans[0].stats);
  const Panel& out_panel = cfg.data.target_norm == "none" ? panel : processed;

  // Walk-forward: each member's test blocks and the ensemble's, pooled over the folds.
  std::vector<std::string> names;  // the members of one fold, in order
  for (const MemberSpec& m : members)
    if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
  std::vector<std::unique_ptr<OosPool>> member_oos;
  for (size_t i = 0; i < names.size(); ++i) member_oos.push_back(std::make_unique<OosPool>(out_panel, cfg));
  OosPool ensemble_oos(out_panel, cfg);
  std::vector<Trained> trained;
  trained.reserve(members.size() * size_t(cfg.run.parallel_folds ? 1 : folds));
  std::vector<FoldData> data;
  data.reserve(size_t(folds));

  // The leaderboards and ensembles of the folds just trained (each fold once), then (walk-forward) the run's
  // leaderboard over the folds pooled so far.
  auto summarise = [&](const std::vector<int>& fold_ids, bool final) {
    for (int f : fold_ids) {
      std::vector<const Trained*> of_fold;
      for (const Trained& t : trained)
        if (t.data->plan->fold == f) of_fold.push_back(&t);
      const FoldData& d = *of_fold.front()->data;
      const FoldSummary s = summarise_fold(c, d, of_fold, keys, out_panel);
      for (const Trained* t : of_fold) {
        result.members.push_back(member_result(*t));
        if (folds > 1 && t->res.has_test) {
          const size_t i = size_t(std::find(names.begin(), names.end(), t->spec.name) - names.begin());
          member_oos[i]->add(*d.plan, t->best_pred);
        }
      }
      if (folds == 1) {
        result.leaderboard_file = s.file;
        result.has_ensemble = s.has_ensemble;
        result.ensemble = s.ensemble;
        rep.message("leaderboard (" + s.file + ", by validation " + cfg.run.metric + "):" +
                        board_text(s.board, [&] {
                          std::vector<std::string> cols{"rank", "member"};
                          cols.insert(cols.end(), keys.begin(), keys.end());
                          cols.insert(cols.end(), {"best_step", "valid_" + cfg.run.metric, "test_" + cfg.run.metric});
                          return cols;
                        }(), 10),
                    f, 0);
      } else if (s.has_ensemble && d.plan->split.has_test()) {
        ensemble_oos.add(*d.plan, s.ensemble_pred);
      }
      for (Trained& t : trained)  // pooled now: a long walk-forward keeps one fold's predictions at a time
        if (t.data->plan->fold == f) std::vector<float>().swap(t.best_pred);
    }
    if (folds == 1) return;
    // The run's leaderboard: members by their pooled out-of-sample metrics.
    std::vector<std::string> header{"rank", "member"};
    header.insert(header.end(), keys.begin(), keys.end());
    header.push_back("folds");
    for (const std::string& name : metric_names()) header.push_back("oos_" + name);
    header.push_back("dir");
    std::vector<Entry> entries;
    for (size_t i = 0; i < names.size(); ++i) {
      const MemberSpec* spec = nullptr;
      int n = 0;
      for (const Trained& t : trained)
        if (t.spec.name == names[i]) spec = &t.spec, n += t.res.has_test ? 1 : 0;
      if (!spec) continue;
      Entry e;
      e.cells.push_back(names[i]);
      for (const std::string& k : keys) e.cells.push_back(setting_of(*spec, k));
      e.cells.push_back(std::to_string(n));
      const fs::path dir = out / names[i];
      if (member_oos[i]->any()) {
        dirs.create(dir);
        const OosSummary o = member_oos[i]->write(dir / "oos_pred");
        e.key = metric_by_name(o.metrics.mean, cfg.run.metric);
        add_metrics(e.cells, true, o.metrics.mean);
        for (MemberResult& m : result.members)
          if (m.name == names[i]) m.has_oos = true, m.oos = o.metrics, m.oos_file = o.file;
      } else {
        add_metrics(e.cells, false, Metrics{});
      }
      e.cells.push_back(dir.string());
      entries.push_back(std::move(e));
    }
    std::vector<std::string> ens;
    if (ensemble_oos.any()) {
      dirs.create(out / "ensemble");
      const OosSummary o = ensemble_oos.write(out / "ensemble" / "pred");
      result.has_ensemble = true;
      result.ensemble = o.metrics;
      ens.push_back("ensemble");
      ens.insert(ens.end(), keys.size(), "");
      ens.push_back(std::to_string(folds));
      add_metrics(ens, true, o.metrics.mean);
      ens.push_back((out / "ensemble").string());
    }
    const Board board = rank(cfg, header, std::move(entries), ens);
    result.leaderboard_file = (out / "leaderboard.csv").string();
    write_board(result.leaderboard_file, board);
    if (!final) return;
    std::vector<std::string> cols{"rank", "member"};
    cols.insert(cols.end(), keys.begin(), keys.end());
    cols.insert(cols.end(), {"folds", "oos_" + cfg.run.metric, "oos_ic", "oos_ls_sharpe"});
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    rep.message("leaderboard (" + result.leaderboard_file + ", by pooled out-of-sample " + cfg.run.metric + "):" +
                    board_text(board, cols, 10),
                fold_ids.back(), 0);
  };

  bool stopped = false, paused = false;
  if (together) {
    for (const FoldPlan& p : plans) data.push_back(prepare_fold(cfg, panel, p));
    std::vector<const FoldData*> of;
    std::vector<MemberState> st;
    for (size_t i = 0; i < members.size(); ++i) {
      of.push_back(&data[size_t(members[i].fold)]);
      st.push_back(states[size_t(members[i].fold)][i]);
    }
    for (Trained& t : train_population(c, members, of, st, stopped, paused)) trained.push_back(std::move(t));
    std::vector<int> all;
    for (int f = 0; f < folds; ++f) all.push_back(f);
    summarise(all, true);
  } else {
    for (int f = 0; f < folds && !stopped && !paused; ++f) {
      data.push_back(prepare_fold(cfg, panel, plans[size_t(f)]));
      std::vector<MemberSpec> of_fold = members;
      for (MemberSpec& m : of_fold) m.fold = f;
      const std::vector<const FoldData*> of(of_fold.size(), &data.back());
      for (Trained& t : train_population(c, of_fold, of, states[size_t(f)], stopped, paused)) trained.push_back(std::move(t));
      stopped = stopped || rep.stop_requested();
      // After every fold, so an interrupted walk-forward keeps what it finished.
      summarise({f}, f + 1 == folds || stopped || paused);
    }
  }
  result.stopped = stopped;
}

}  // namespace mlalpha
