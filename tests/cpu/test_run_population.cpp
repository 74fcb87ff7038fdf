// Populations on the CPU backend (src/run/run_population.cpp): every member's files, leaderboard.csv,
// the mean-ensemble, and the defining property: a member's weights are bitwise those of the same model
// trained alone (seeds, swept settings, walk-forward folds in turn or at once, early stopping).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "compute_util.h"
#include "mlalpha/model.h"
#include "mlalpha/run.h"
#include "population_fixture.h"
#include "test_files.h"
#include "checkpoint/checkpoint.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

class Population : public test::PopulationFixture {};

std::vector<float> weights(const fs::path& p) { return load_checkpoint_weights(p.string()).params; }


size_t column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  ADD_FAILURE() << "no column " << name;
  return 0;
}

TEST_F(Population, SeedsTrainAsTheirSoloRunsAndTheLeaderboardRanksThem) {
  RunConfig cfg = config("pop");
  cfg.train.models = 3;
  std::vector<RunEvent> events;
  RunOptions opt;
  opt.callback = [&](const RunEvent& e) {
    events.push_back(e);
    return true;
  };
  const RunResult r = run_training(cfg, opt);
  ASSERT_EQ(r.members.size(), 3u);
  EXPECT_TRUE(r.folds.empty());
  EXPECT_EQ(r.leaderboard_file, (dir_ / "pop/leaderboard.csv").string());
  int starts = 0, member_logs = 0;
  for (const RunEvent& e : events) {
    starts += e.kind == RunEvent::Kind::fold_start;
    if (e.kind == RunEvent::Kind::log) {
      EXPECT_GE(e.member, 0);
      EXPECT_EQ(e.member_name, "member-0" + std::to_string(e.member));
      ++member_logs;
    }
  }
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(member_logs, 3 * 3);  // log_every 10 of 30 steps, per member
  EXPECT_NE(events.back().message.find("leaderboard"), std::string::npos);

  for (int m = 0; m < 3; ++m) {
    const fs::path d = dir_ / "pop" / ("member-0" + std::to_string(m));
    for (const char* f : {"metrics.jsonl", "curves.svg", "best.safetensors", "best.json", "last.safetensors", "long_short.svg"})
      EXPECT_TRUE(fs::exists(d / f)) << d / f;
    EXPECT_EQ(r.members[size_t(m)].dir, d.string());
    EXPECT_TRUE(r.members[size_t(m)].has_test);
    // The member's checkpoint records its own settings, so eval / predict treat it as a solo run's.
    const Model best = Model::load((d / "best.safetensors").string());
    EXPECT_EQ(best.train_config().seed, cfg.train.seed + uint64_t(m));
    EXPECT_EQ(best.train_config().models, 1);
  }
  EXPECT_TRUE(fs::exists(dir_ / "pop/ensemble/pred.csv"));

  // Member r is the solo run with seed train.seed + r, bit for bit.
  for (int m = 0; m < 3; ++m) {
    RunConfig solo = config("solo" + std::to_string(m));
    solo.train.seed = cfg.train.seed + uint64_t(m);
    const RunResult s = run_training(solo);
    EXPECT_EQ(weights(dir_ / ("solo" + std::to_string(m)) / "last.safetensors"),
              weights(dir_ / "pop" / ("member-0" + std::to_string(m)) / "last.safetensors"))
        << "member " << m;
    EXPECT_EQ(s.folds[0].best_step, r.members[size_t(m)].best_step);
    EXPECT_EQ(s.folds[0].test.mean.ic, r.members[size_t(m)].test.mean.ic);
  }

  // leaderboard.csv: the members best first by validation ic, then the ensemble.
  const auto rows = test::read_csv_rows(dir_ / "pop/leaderboard.csv");
  ASSERT_EQ(rows.size(), 5u);
  const auto& h = rows[0];
  for (const char* c : {"rank", "member", "seed", "best_step", "valid_ic", "test_ic", "test_rank_ic", "test_ls_sharpe",
                        "test_mse", "dir"})
    column(h, c);
  for (const auto& row : rows) EXPECT_EQ(row.size(), h.size());
  double prev = INFINITY;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(rows[size_t(i)][column(h, "rank")], std::to_string(i));
    const double v = std::stod(rows[size_t(i)][column(h, "valid_ic")]);
    EXPECT_LE(v, prev);
    prev = v;
    const int m = std::stoi(rows[size_t(i)][column(h, "seed")]) - int(cfg.train.seed);  // the seed column: train.seed + r
    EXPECT_EQ(v, r.members[size_t(m)].best_value);
  }
  EXPECT_EQ(rows[4][column(h, "rank")], "");
  EXPECT_EQ(rows[4][column(h, "member")], "ensemble");

  // The ensemble is the members' best-weight test predictions averaged.
  const Panel panel = load_panel(cfg.data);
  const TimeRange test = split_range(make_splits(cfg.split, panel)[0], "test", panel.T);
  std::vector<double> sum;
  for (int m = 0; m < 3; ++m) {
    const std::vector<float> p = Model::load(r.members[size_t(m)].dir + "/best.safetensors").predict(panel, test, test::on_cpu());
    if (sum.empty()) sum.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) sum[i] += p[i];
  }
  std::vector<float> mean(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) mean[i] = float(sum[i] / 3.0);
  ScoreOptions so;
  const MetricsResult want = score(mean, panel, test, so);
  ASSERT_TRUE(r.has_ensemble);
  EXPECT_EQ(r.ensemble.mean.points, want.mean.points);
  EXPECT_DOUBLE_EQ(r.ensemble.mean.ic, want.mean.ic);
  EXPECT_DOUBLE_EQ(r.ensemble.mean.rank_ic, want.mean.rank_ic);
  EXPECT_DOUBLE_EQ(r.ensemble.mean.mse, want.mean.mse);
  EXPECT_EQ(std::stod(rows[4][column(h, "test_ic")]), r.ensemble.mean.ic);

  // A second run into the same folder is refused: it holds a run.
  EXPECT_THROW(run_training(cfg), Error);
}

TEST_F(Population, ASweptLearningRateTrainsAsTheSoloRunWithThatRate) {
  RunConfig cfg = config("sweep");
  cfg.sweep.lr = {1e-3f, 3e-3f};
  const RunResult r = run_training(cfg);
  ASSERT_EQ(r.members.size(), 2u);
  ASSERT_FALSE(r.members[1].settings.empty());
  EXPECT_EQ(r.members[1].settings[0], (std::pair<std::string, std::string>{"lr", "0.003"}));
  RunConfig solo = config("solo", {"train.lr=3e-3"});
  run_training(solo);
  EXPECT_EQ(weights(dir_ / "solo/last.safetensors"), weights(fs::path(r.members[1].dir) / "last.safetensors"));
}

TEST_F(Population, WalkForwardFoldsAtOnceOrInTurnGiveTheSameMembers) {
  const std::vector<std::string> wf = {"split.walk_forward_folds=2", "split.walk_forward_test_size=30"};
  RunConfig in_turn = config("turn", wf), at_once = config("once", wf);
  in_turn.train.models = at_once.train.models = 2;
  at_once.run.parallel_folds = true;
  const RunResult a = run_training(in_turn), b = run_training(at_once);
  ASSERT_EQ(a.members.size(), 4u);
  ASSERT_EQ(b.members.size(), 4u);
  for (int f = 0; f < 2; ++f)
    for (int m = 0; m < 2; ++m) {
      const fs::path rel = fs::path("fold-" + std::to_string(f)) / ("member-0" + std::to_string(m));
      EXPECT_EQ(weights(dir_ / "turn" / rel / "last.safetensors"), weights(dir_ / "once" / rel / "last.safetensors")) << rel;
      EXPECT_TRUE(fs::exists(dir_ / "turn" / rel / "best.safetensors"));
      EXPECT_EQ(Model::load((dir_ / "once" / rel / "best.safetensors").string()).fold(), f);
    }
  // Fold 1's member 1 is the solo walk-forward run with seed + 1.
  RunConfig solo = config("solo", wf);
  solo.train.seed += 1;
  run_training(solo);
  EXPECT_EQ(weights(dir_ / "solo/fold-1/last.safetensors"), weights(dir_ / "once/fold-1/member-01/last.safetensors"));
  for (const char* run : {"turn", "once"}) {
    const fs::path d = dir_ / run;
    EXPECT_TRUE(fs::exists(d / "fold-0/leaderboard.csv"));
    EXPECT_TRUE(fs::exists(d / "fold-1/ensemble/pred.csv"));
    EXPECT_TRUE(fs::exists(d / "member-00/oos_pred.csv"));
    EXPECT_TRUE(fs::exists(d / "ensemble/pred.csv"));
    const auto rows = test::read_csv_rows(d / "leaderboard.csv");
    ASSERT_EQ(rows.size(), 4u);  // header, 2 members, ensemble
    // Ranked by the pooled validation run.metric (no test block chose the order), the pooled test beside it.
    const size_t valid = column(rows[0], "valid_ic");
    EXPECT_EQ(valid, column(rows[0], "folds") + 1);
    EXPECT_GT(column(rows[0], "oos_ic"), valid);
    EXPECT_GE(std::stod(rows[1][valid]), std::stod(rows[2][valid]));
    EXPECT_EQ(rows[3][valid], "");  // the ensemble is not ranked
    EXPECT_EQ(rows[3][column(rows[0], "member")], "ensemble");
  }
  EXPECT_TRUE(a.has_ensemble && b.has_ensemble);
  EXPECT_EQ(a.ensemble.mean.ic, b.ensemble.mean.ic);
  EXPECT_TRUE(a.members[0].has_oos);
  EXPECT_EQ(a.members[0].oos.mean.ic, b.members[0].oos.mean.ic);
}

TEST_F(Population, AMemberOutOfPatienceFreezesAsItsSoloRunStops) {
  const std::vector<std::string> es = {"run.patience=1", "run.eval_every=5", "train.steps=40", "train.lr=0.02"};
  RunConfig cfg = config("pop", es);
  cfg.train.models = 3;
  const RunResult r = run_training(cfg);
  ASSERT_EQ(r.members.size(), 3u);
  int frozen = 0;
  for (int m = 0; m < 3; ++m) {
    RunConfig solo = config("solo" + std::to_string(m), es);
    solo.train.seed = cfg.train.seed + uint64_t(m);
    const RunResult s = run_training(solo);
    EXPECT_EQ(s.folds[0].early_stopped, r.members[size_t(m)].early_stopped) << m;
    EXPECT_EQ(s.folds[0].steps, r.members[size_t(m)].steps) << m;
    EXPECT_EQ(weights(dir_ / ("solo" + std::to_string(m)) / "last.safetensors"),
              weights(fs::path(r.members[size_t(m)].dir) / "last.safetensors"))
        << m;
    frozen += r.members[size_t(m)].early_stopped;
  }
  EXPECT_GE(frozen, 1);  // the property is only tested when a member froze
}

TEST_F(Population, AStopSavesEveryMemberAndTheLeaderboard) {
  RunConfig cfg = config("pop");
  cfg.train.models = 2;
  RunOptions opt;
  opt.callback = [](const RunEvent& e) { return !(e.kind == RunEvent::Kind::eval && e.step == 20); };
  const RunResult r = run_training(cfg, opt);
  EXPECT_TRUE(r.stopped);
  ASSERT_EQ(r.members.size(), 2u);
  for (const MemberResult& m : r.members) EXPECT_EQ(Model::load(m.dir + "/last.safetensors").step(), 20);
  EXPECT_EQ(test::read_csv_rows(dir_ / "pop/leaderboard.csv").size(), 4u);
}

TEST_F(Population, ALowerIsBetterMetricRanksTheSmallestFirst) {
  RunConfig cfg = config("pop", {"run.metric=\"mse\"", "train.steps=10"});
  cfg.train.models = 3;
  const RunResult r = run_training(cfg);
  const auto rows = test::read_csv_rows(dir_ / "pop/leaderboard.csv");
  ASSERT_EQ(rows.size(), 5u);
  const size_t v = column(rows[0], "valid_mse");
  EXPECT_LT(std::stod(rows[1][v]), std::stod(rows[2][v]));
  EXPECT_LT(std::stod(rows[2][v]), std::stod(rows[3][v]));
  EXPECT_EQ(rows[4][v], "");  // the ensemble is scored on the test range
  EXPECT_EQ(std::stod(rows[4][column(rows[0], "test_mse")]), r.ensemble.mean.mse);
}

// The bytes of a file ("" when it is missing).
std::string file_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

size_t lines_with(const fs::path& p, const std::string& what) {
  std::ifstream f(p);
  size_t n = 0;
  for (std::string line; std::getline(f, line);) n += line.find(what) != std::string::npos;
  return n;
}

// The error text of f(), "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(Population, StopAfterThenResumeEndsAsTheUninterruptedRunWithFrozenMembersKeptFrozen) {
  // Patience 2: at the stop (step 22) a member may be frozen already, or one evaluation short of it.
  const std::vector<std::string> es = {"run.patience=2", "run.eval_every=5", "train.lr=0.1", "train.models=6"};
  const RunResult full = run_training(config("full", es));

  RunConfig part = config("part", es);
  part.run.stop_after = 22;
  std::vector<std::string> messages;
  RunOptions opt;
  opt.callback = [&](const RunEvent& e) {
    if (e.kind == RunEvent::Kind::message) messages.push_back(e.message);
    return true;
  };
  const RunResult first = run_training(part, opt);
  EXPECT_FALSE(first.stopped);
  ASSERT_EQ(first.members.size(), 6u);
  bool told = false;
  for (const std::string& m : messages) told = told || m.find("--resume " + (dir_ / "part").string()) != std::string::npos;
  EXPECT_TRUE(told) << "the stop message says how to continue";
  int frozen_before = 0;
  for (const MemberResult& m : first.members) {
    frozen_before += m.early_stopped;
    EXPECT_EQ(Model::load(m.dir + "/last.safetensors").step(), m.early_stopped ? m.steps : 22) << m.name;
    EXPECT_TRUE(fs::exists(fs::path(m.dir) / "state.json"));
  }
  EXPECT_GE(frozen_before, 1) << "the property that a frozen member stays frozen is only tested when one froze";
  EXPECT_TRUE(fs::exists(dir_ / "part/run.json"));
  std::map<std::string, std::string> frozen_jsonl;  // a frozen member's files stay as they were
  for (const MemberResult& m : first.members)
    if (m.early_stopped) frozen_jsonl[m.dir] = file_text(fs::path(m.dir) / "metrics.jsonl");

  // The resume takes its settings from the run folder: the caller's config need not repeat them.
  RunConfig again = parse_run_config("", "test", {"run.device=\"cpu\""});
  RunOptions ro;
  ro.resume = (dir_ / "part").string();
  const RunResult second = run_training(again, ro);
  EXPECT_FALSE(second.stopped);
  ASSERT_EQ(second.members.size(), full.members.size());
  for (size_t m = 0; m < full.members.size(); ++m) {
    const MemberResult &a = full.members[m], &b = second.members[m];
    EXPECT_EQ(weights(fs::path(a.dir) / "last.safetensors"), weights(fs::path(b.dir) / "last.safetensors")) << a.name;
    EXPECT_EQ(weights(fs::path(a.dir) / "best.safetensors"), weights(fs::path(b.dir) / "best.safetensors")) << a.name;
    EXPECT_EQ(a.steps, b.steps) << a.name;
    EXPECT_EQ(a.early_stopped, b.early_stopped) << a.name;
    EXPECT_EQ(a.best_step, b.best_step) << a.name;
    EXPECT_EQ(a.test.mean.ic, b.test.mean.ic) << a.name;
    // Validations of both invocations in one metrics.jsonl.
    EXPECT_EQ(lines_with(fs::path(a.dir) / "metrics.jsonl", "valid"), lines_with(fs::path(b.dir) / "metrics.jsonl", "valid"))
        << a.name;
  }
  for (const auto& [dir, text] : frozen_jsonl) EXPECT_EQ(file_text(fs::path(dir) / "metrics.jsonl"), text) << dir;
  EXPECT_EQ(second.ensemble.mean.ic, full.ensemble.mean.ic);
  const auto a = test::read_csv_rows(dir_ / "full/leaderboard.csv"), b = test::read_csv_rows(dir_ / "part/leaderboard.csv");
  ASSERT_EQ(a.size(), b.size());
  for (size_t r = 1; r < a.size(); ++r)
    for (const char* col : {"member", "best_step", "valid_ic", "test_ic"})
      EXPECT_EQ(a[r][column(a[0], col)], b[r][column(b[0], col)]) << r << " " << col;

  // Finished: a further resume is refused unless train.steps grows.
  const std::string done = error_of([&] { run_training(again, ro); });
  EXPECT_NE(done.find("train.steps"), std::string::npos) << done;
}

TEST_F(Population, WalkForwardPopulationsResumeAtTheFoldThatWasRunning) {
  const std::vector<std::string> wf = {"split.walk_forward_folds=2", "split.walk_forward_test_size=30",
                                       "sweep.lr=[0.001, 0.003]"};
  RunConfig cfg = config("full", wf);
  const RunResult full = run_training(cfg);
  ASSERT_EQ(full.members.size(), 4u);

  // In turn: interrupted by the callback in fold 1, resumed from a member's checkpoint there.
  RunConfig turn = config("turn", wf);
  RunOptions stop;
  stop.callback = [](const RunEvent& e) { return !(e.kind == RunEvent::Kind::log && e.fold == 1 && e.step == 10); };
  EXPECT_TRUE(run_training(turn, stop).stopped);
  const std::string fold0 = file_text(dir_ / "turn/fold-0/member-01/last.safetensors");
  RunOptions ro;
  ro.resume = (dir_ / "turn/fold-1/member-00/last.safetensors").string();
  const RunResult r = run_training(turn, ro);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(file_text(dir_ / "turn/fold-0/member-01/last.safetensors"), fold0) << "a finished fold is only read";

  // At once: every fold's members stop at step 10 and resume together.
  RunConfig once = config("once", wf);
  once.run.parallel_folds = true;
  once.run.stop_after = 10;
  run_training(once);
  RunConfig once_again = config("once", wf);
  once_again.run.parallel_folds = true;
  ro.resume = (dir_ / "once").string();
  const RunResult o = run_training(once_again, ro);

  for (const RunResult* res : {&r, &o}) {
    ASSERT_EQ(res->members.size(), 4u);
    for (size_t m = 0; m < 4; ++m) {
      const fs::path rel = fs::relative(full.members[m].dir, dir_ / "full");
      EXPECT_EQ(res->members[m].fold, full.members[m].fold);
      EXPECT_EQ(weights(full.members[m].dir + "/last.safetensors"),
                weights(dir_ / fs::relative(res->members[m].dir, dir_).begin()->string() / rel / "last.safetensors"))
          << rel;
      EXPECT_EQ(res->members[m].test.mean.ic, full.members[m].test.mean.ic) << rel;
      EXPECT_TRUE(res->members[m].has_oos);
      EXPECT_EQ(res->members[m].oos.mean.ic, full.members[m].oos.mean.ic) << rel;
    }
    EXPECT_EQ(res->ensemble.mean.ic, full.ensemble.mean.ic);
  }
  for (const char* run : {"turn", "once"}) {
    const auto a = test::read_csv_rows(dir_ / "full/leaderboard.csv"), b = test::read_csv_rows(dir_ / run / "leaderboard.csv");
    ASSERT_EQ(a.size(), b.size());
    for (size_t row = 1; row < a.size(); ++row)
      EXPECT_EQ(a[row][column(a[0], "oos_ic")], b[row][column(b[0], "oos_ic")]) << run << " " << row;
  }
}

TEST_F(Population, AResumeSaysWhatIsWrong) {
  RunConfig cfg = config("pop", {"run.stop_after=10"});
  cfg.train.models = 2;
  const Panel panel = load_panel(cfg.data);
  run_training(cfg, panel);
  RunOptions ro;

  // A folder without a run.
  fs::create_directories(dir_ / "empty");
  ro.resume = (dir_ / "empty").string();
  std::string e = error_of([&] { run_training(cfg, panel, ro); });
  EXPECT_NE(e.find("holds no run"), std::string::npos) << e;
  // A setting that would change the members.
  RunConfig more = cfg;
  more.train.models = 3;
  more.given.insert("train.models");
  ro.resume = (dir_ / "pop").string();
  e = error_of([&] { run_training(more, panel, ro); });
  EXPECT_NE(e.find("train.models"), std::string::npos) << e;
  // Other data.
  Panel other = panel;
  other.y[0] += 1.0f;
  e = error_of([&] { run_training(cfg, other, ro); });
  EXPECT_NE(e.find("fingerprint"), std::string::npos) << e;
  // A member without its last checkpoint, named.
  fs::remove(dir_ / "pop/member-01/last.safetensors");
  e = error_of([&] { run_training(cfg, panel, ro); });
  EXPECT_NE(e.find("member-01/last.safetensors"), std::string::npos) << e;
  // Nothing was written by the refused resumes: member-00 still stands at step 10.
  EXPECT_EQ(Model::load((dir_ / "pop/member-00/last.safetensors").string()).step(), 10);
}

}  // namespace
}  // namespace mlalpha
