// The public run API (include/mlalpha/run.h, model.h, config.h) on the CPU backend: events and the
// stopping callback, walk-forward summaries, refusals before any output, Model round trips, and the
// config's suggestions and relative paths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "compute_util.h"
#include "mlalpha/model.h"
#include "mlalpha/run.h"
#include "test_files.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

class Run : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mlalpha_run_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A small CPU run into dir_/name.
  RunConfig config(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> ov = {"run.device=\"cpu\"", "data.instruments=4", "data.timesteps=300", "data.n_features=3",
                                   "model.d_model=16", "model.head_dim=8", "train.batch=4", "train.seq_len=32",
                                   "train.steps=30", "train.warmup=2", "train.log_every=10", "run.eval_every=10",
                                   "run.out_dir=\"" + (dir_ / name).string() + "\""};
    ov.insert(ov.end(), extra.begin(), extra.end());
    return parse_run_config("", "test", ov);
  }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(Run, EventsArriveAndTheCallbackStops) {
  std::vector<RunEvent::Kind> kinds;
  int64_t logged = 0;
  RunOptions opt;
  opt.callback = [&](const RunEvent& e) {
    kinds.push_back(e.kind);
    if (e.kind == RunEvent::Kind::log) logged += int64_t(e.points.size());
    return !(e.kind == RunEvent::Kind::eval && e.step == 20);  // stop at the second evaluation
  };
  const RunResult r = run_training(config("a"), opt);
  ASSERT_EQ(r.folds.size(), 1u);
  EXPECT_TRUE(r.stopped);
  EXPECT_TRUE(r.folds[0].stopped);
  EXPECT_EQ(r.folds[0].steps, 20);
  EXPECT_EQ(logged, 20);
  EXPECT_EQ(r.folds[0].history.size(), 20u);
  EXPECT_EQ(r.folds[0].evaluations.size(), 2u);
  ASSERT_GE(kinds.size(), 2u);
  EXPECT_EQ(kinds[0], RunEvent::Kind::start);  // the settings resolved and the data read, before the fold
  EXPECT_EQ(kinds[1], RunEvent::Kind::fold_start);
  EXPECT_EQ(kinds.back(), RunEvent::Kind::fold_end);
  const Model last = Model::load((dir_ / "a/last.safetensors").string());
  EXPECT_EQ(last.step(), 20);
  EXPECT_TRUE(last.has_optimizer_state());
  ASSERT_TRUE(last.has_data_config());
  EXPECT_EQ(last.data_config().synth.T, 300);
}

TEST_F(Run, ModelPredictsAndScoresTheRecordedData) {
  const RunResult r = run_training(config("b"));
  const Model m = Model::load(r.folds[0].dir + "/best.safetensors");
  const Panel p = load_panel(m.data_config());
  const TimeRange test = split_range(r.folds[0].split, "test", p.T);
  const MetricsResult s = m.evaluate(p, test, test::on_cpu());
  ASSERT_TRUE(r.folds[0].has_test);
  EXPECT_DOUBLE_EQ(s.mean.mse, r.folds[0].test.mean.mse);  // the run's test score of its best weights
  EXPECT_GT(s.mean.points, 0);
  // Saved and reloaded, the model predicts the same numbers.
  m.save((dir_ / "copy.safetensors").string());
  const std::vector<float> a = m.predict(p, test, test::on_cpu()), b = Model::load((dir_ / "copy.safetensors").string()).predict(p, test, test::on_cpu());
  ASSERT_EQ(a.size(), b.size());
  size_t finite = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) continue;
    ++finite;
    EXPECT_EQ(a[i], b[i]);
  }
  EXPECT_EQ(finite, size_t(p.N) * (test.t1 - test.t0));
  // Another panel shape is refused.
  Panel other = p;
  other.F = 2;
  other.x.resize(size_t(other.N) * other.T * 2);
  EXPECT_NE(error_of([&] { m.predict(other, test, test::on_cpu()); }).find("the model takes 3 features"), std::string::npos);
}

TEST_F(Run, CorruptedCheckpointIsRefused) {
  run_training(config("c", {"train.steps=10", "run.eval_every=0"}));
  const std::string path = (dir_ / "c/last.safetensors").string();
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-8, std::ios::end);
  f.put('\x7f');
  f.close();
  EXPECT_NE(error_of([&] { Model::load(path); }).find("checksum mismatch"), std::string::npos);
}

TEST_F(Run, WalkForwardWritesOneSummaryNumberedFromZero) {
  const RunResult r = run_training(config("wf", {"split.walk_forward_folds=3", "split.walk_forward_train_size=60",
                                                  "train.steps=10", "run.eval_every=0"}));
  ASSERT_EQ(r.folds.size(), 3u);
  for (int f = 0; f < 3; ++f) {
    EXPECT_EQ(r.folds[f].fold, f);
    EXPECT_EQ(r.folds[f].split.train_end - r.folds[f].split.train_begin, 60);  // a rolling window
    EXPECT_TRUE(fs::exists(dir_ / ("wf/fold-" + std::to_string(f)) / "last.safetensors"));
  }
  std::ifstream csv(dir_ / "wf/folds.csv");
  std::string header, row0;
  std::getline(csv, header);
  std::getline(csv, row0);
  EXPECT_EQ(header.rfind("fold,", 0), 0u) << header;
  EXPECT_EQ(row0.rfind("0,", 0), 0u) << row0;
  EXPECT_TRUE(fs::exists(dir_ / "wf/folds.json"));
}

TEST_F(Run, WalkForwardPoolsOutOfSamplePredictionsFoldByFold) {
  const RunResult r = run_training(config("oos", {"split.walk_forward_folds=3", "split.walk_forward_train_size=60",
                                                   "train.steps=10", "run.eval_every=5", "run.quantiles=2"}));
  ASSERT_EQ(r.folds.size(), 3u);
  ASSERT_TRUE(r.has_oos);
  const auto rows = test::read_csv_rows(dir_ / "oos/oos_pred.csv");
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0], (std::vector<std::string>{"time", "instrument", "fold", "observed", "context", "pred_0", "target_0"}));
  // Each fold's best checkpoint predicts its own test block again; the pooled file holds exactly those
  // numbers, every (test time, instrument) once.
  const Model m0 = Model::load(r.folds[0].dir + "/best.safetensors");
  const Panel panel = load_panel(m0.data_config());
  std::map<std::pair<int, int>, float> want;  // (time, instrument) → prediction
  std::map<int, int> fold_of;
  for (const FoldResult& f : r.folds) {
    const TimeRange test{f.split.test_begin, f.split.test_end};
    const std::vector<float> pred = Model::load(f.dir + "/best.safetensors").predict(panel, test, test::on_cpu());
    for (int t = test.t0; t < test.t1; ++t) {
      fold_of[t] = f.fold;
      for (int i = 0; i < panel.N; ++i) want[{t, i}] = pred[size_t(i) * panel.T + t];
    }
  }
  std::map<std::pair<int, int>, int> seen;
  for (size_t k = 1; k < rows.size(); ++k) {
    ASSERT_EQ(rows[k].size(), 7u);
    const int t = std::stoi(rows[k][0]), i = std::stoi(rows[k][1]);
    ++seen[{t, i}];
    ASSERT_TRUE(want.count({t, i})) << "time " << t << " is in no test block";
    EXPECT_EQ(std::stoi(rows[k][2]), fold_of[t]);
    EXPECT_EQ(rows[k][3], "1");
    EXPECT_EQ(rows[k][4], "32");  // the rows behind the prediction: train.seq_len, the whole window
    const float got = std::strtof(rows[k][5].c_str(), nullptr);
    EXPECT_EQ(std::memcmp(&got, &want[{t, i}], sizeof got), 0) << rows[k][5];  // shortest text, same bits
  }
  EXPECT_EQ(seen.size(), want.size());
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1);
  // The pooled metrics are those of the pooled predictions; the fold summary is in folds.json.
  std::vector<float> pooled(panel.y.size(), std::nanf(""));
  for (const auto& [key, v] : want) pooled[size_t(key.second) * panel.T + key.first] = v;
  ScoreOptions so;
  so.quantiles = 2;
  const MetricsResult direct = score(pooled, panel, {r.folds.front().split.test_begin, r.folds.back().split.test_end}, so);
  EXPECT_DOUBLE_EQ(r.oos.mean.mse, direct.mean.mse);
  EXPECT_DOUBLE_EQ(r.oos.mean.ls_mean, direct.mean.ls_mean);
  EXPECT_DOUBLE_EQ(r.oos.mean.mse_zero, direct.mean.mse_zero);
  EXPECT_TRUE(std::isfinite(r.oos.mean.mse_mean));
  std::ifstream js(dir_ / "oos/folds.json");
  std::stringstream ss;
  ss << js.rdbuf();
  EXPECT_NE(ss.str().find("\"oos_pred\": \"oos_pred.csv\""), std::string::npos);
  EXPECT_NE(ss.str().find("\"std_test_metrics\""), std::string::npos);
  EXPECT_NE(ss.str().find("\"oos_metrics\""), std::string::npos);
  double mse_sum = 0;
  for (const FoldResult& f : r.folds) mse_sum += f.test.mean.mse;
  EXPECT_DOUBLE_EQ(r.fold_test_mean.mse, mse_sum / 3);
  EXPECT_TRUE(fs::exists(dir_ / "oos/fold-2/long_short.svg"));
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(Run, AResumedWalkForwardPoolsTheEarlierFoldsAgain) {
  const std::vector<std::string> wf = {"split.walk_forward_folds=3", "split.walk_forward_train_size=60", "train.steps=10",
                                       "run.eval_every=5", "train.log_every=1"};
  run_training(config("straight", wf));
  // Stopped at the first step of fold 1: fold 0 is finished, fold 1 continues from its last checkpoint.
  RunOptions stop;
  stop.callback = [](const RunEvent& e) { return !(e.kind == RunEvent::Kind::log && e.fold == 1); };
  const RunResult first = run_training(config("split", wf), stop);
  ASSERT_TRUE(first.stopped);
  ASSERT_EQ(first.folds.size(), 2u);
  RunOptions resume;
  resume.resume = (dir_ / "split/fold-1/last.safetensors").string();
  const RunResult rest = run_training(config("split", wf), resume);
  ASSERT_EQ(rest.folds.size(), 2u);  // folds 1 and 2; fold 0 came from folds.json and its best checkpoint
  ASSERT_TRUE(rest.has_oos);
  const std::string a = file_text(dir_ / "straight/oos_pred.csv"), b = file_text(dir_ / "split/oos_pred.csv");
  EXPECT_GT(a.size(), 100u);
  EXPECT_EQ(a, b) << "the resumed walk-forward pooled different out-of-sample predictions";
}

TEST(Predictions, ObservedColumnAndShortestFloatsRoundTrip) {
  // N = 2, T = 3, F = 2, K = 1. (i1, t1) is a missing row (all NaN); (i0, t2) has a NaN target only.
  Panel p;
  p.N = 2, p.T = 3, p.F = 2, p.K = 1;
  const float nan = std::nanf("");
  p.x = {1, 2, 3, 4, 5, 6, 7, 8, nan, nan, 9, 10};
  p.y = {0.5f, -1, nan, 2, nan, 3};
  const std::vector<float> pred{0.1f, 1.0f / 3, -2.5e-7f, 123456.79f, 0.7f, std::nextafter(1.0f, 2.0f)};
  const fs::path dir = fs::temp_directory_path() / ("mlalpha_pred_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const PredictionFiles f = write_predictions((dir / "pred").string(), p, pred, {0, 3});
  EXPECT_EQ(f.rows, 6u);
  const auto rows = test::read_csv_rows(dir / "pred.csv");
  fs::remove_all(dir);
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"time", "instrument", "observed", "pred_0", "target_0"}));
  // Time-major: t0 i0, t0 i1, t1 i0, t1 i1, t2 i0, t2 i1.
  const int inst[6] = {0, 1, 0, 1, 0, 1}, time[6] = {0, 0, 1, 1, 2, 2};
  const char* observed[6] = {"1", "1", "1", "0", "1", "1"};
  for (int r = 0; r < 6; ++r) {
    const size_t at = size_t(inst[r]) * 3 + time[r];
    EXPECT_EQ(rows[r + 1][2], observed[r]) << r;
    const float back = std::strtof(rows[r + 1][3].c_str(), nullptr);
    EXPECT_EQ(std::memcmp(&back, &pred[at], sizeof back), 0) << rows[r + 1][3];
    if (std::isnan(p.y[at])) {
      EXPECT_EQ(rows[r + 1][4], "") << r;
    } else {
      const float y = std::strtof(rows[r + 1][4].c_str(), nullptr);
      EXPECT_EQ(y, p.y[at]);
    }
  }
  EXPECT_EQ(rows[1][3], "0.1");  // the shortest form, not 0.100000001
}

TEST_F(Run, APanelBuiltInMemoryIsRecordedByItsFingerprintOnly) {
  RunConfig c = config("mem", {"train.steps=10", "run.eval_every=0"});
  Panel p = load_panel(c.data);
  for (float& x : p.x) x *= 2;  // no longer what c.data loads
  run_training(c, p);
  const Model m = Model::load((dir_ / "mem/last.safetensors").string());
  EXPECT_FALSE(m.has_data_config());  // eval / predict must be given the data
  // A resume on other data is refused by the fingerprint, on the same panel it continues.
  RunConfig more = config("mem", {"train.steps=12", "run.eval_every=0"});
  RunOptions opt;
  opt.resume = (dir_ / "mem/last.safetensors").string();
  EXPECT_NE(error_of([&] { run_training(more, load_panel(more.data), opt); }).find("the data differs"), std::string::npos);
  EXPECT_EQ(run_training(more, p, opt).folds.at(0).steps, 12);
}

TEST_F(Run, NoValidTargetIsRefusedBeforeAnyOutput) {
  RunConfig c = config("nan");
  Panel p = load_panel(c.data);
  for (float& y : p.y) y = NAN;
  const std::string e = error_of([&] { run_training(c, p); });
  EXPECT_NE(e.find("the training range [0, 210) has no finite value"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir_ / "nan"));
}

TEST(RunConfigKeys, SuggestionsAreRankedBySimilarity) {
  EXPECT_EQ(suggest_run_config_key("train.lerning_rate"), "train.lr");  // the README's example
  EXPECT_EQ(suggest_run_config_key("train.learning_rate"), "train.lr");
  EXPECT_EQ(suggest_run_config_key("train.batch_size"), "train.batch");
  EXPECT_EQ(suggest_run_config_key("train.d_state"), "model.d_state");  // the right key in another section
  EXPECT_EQ(suggest_run_config_key("model.d_stat"), "model.d_state");
  EXPECT_EQ(suggest_run_config_key("model.headdim"), "model.head_dim");
  EXPECT_EQ(suggest_run_config_key("run.patince"), "run.patience");
  EXPECT_EQ(suggest_run_config_key("train.zzzzzz"), "");
  std::string e;
  try {
    parse_run_config("[train]\nbatch = 4\nlerning_rate = 0.1\n", "cfg.toml");
  } catch (const Error& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("cfg.toml:3: unknown key 'train.lerning_rate'; did you mean 'train.lr'?"), std::string::npos) << e;
}

TEST_F(Run, PathsInATomlFileResolveAgainstItsFolder) {
  fs::create_directories(dir_ / "cfg");
  std::ofstream(dir_ / "cfg/run.toml") << "[data]\nsource = \"npy\"\nfeatures = \"x.npy\"\ntargets = \"../y.npy\"\n";
  const RunConfig c = load_run_config((dir_ / "cfg/run.toml").string(), {"data.csv=\"rel.csv\""});
  EXPECT_EQ(c.data.features, (dir_ / "cfg/x.npy").lexically_normal().string());
  EXPECT_EQ(c.data.targets, (dir_ / "y.npy").lexically_normal().string());
  // An override resolves against the working directory, and every data path is kept absolute (a run's records
  // name its data wherever they are read).
  EXPECT_EQ(c.data.csv, (fs::current_path() / "rel.csv").lexically_normal().string());
  EXPECT_TRUE(c.was_given("data.features"));
  EXPECT_FALSE(c.was_given("train.lr"));
}

TEST(RunConfigChecks, ATargetThatIsAFeatureIsALeak) {
  const std::string csv = "[data]\nsource = \"csv\"\ncsv = \"p.csv\"\nfeature_columns = [\"f0\", \"y0\"]\n"
                          "target_columns = [\"y0\"]\n";
  const std::string e = error_of([&] { parse_run_config(csv, "t").validate(); });
  EXPECT_NE(e.find("data.target_columns: 'y0' is also in data.feature_columns"), std::string::npos) << e;
  EXPECT_NO_THROW(parse_run_config(csv + "allow_target_features = true\n", "t").validate());
}

TEST(RunConfigChecks, NumbersInMessagesAreAsWritten) {
  EXPECT_NE(error_of([] { parse_run_config("", "t", {"train.lr=-1e-9"}).validate(); }).find("got -1e-09"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_run_config("[split]\ntrain_end = 1.0000001\n", "t"); }).find("got 1.0000001"),
            std::string::npos);
  // A recorded float reads back as written (a resume names 0.1, not 0.10000000149011612).
  EXPECT_NE(to_toml(parse_run_config("", "t", {"data.noise=0.1"}), {"data"}).find("noise = 0.1\n"), std::string::npos);
}

TEST(RunConfigChecks, PortfolioSettings) {
  const RunConfig c = parse_run_config("[run]\nquantiles = 10\nperiods_per_year = 252\nmetric = \"q10\"\n", "t");
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.run.quantiles, 10);
  EXPECT_EQ(c.run.periods_per_year, 252.0);
  const RunConfig back = parse_run_config(to_toml(c, {"run"}), "round trip");
  EXPECT_EQ(back.run.quantiles, 10);
  EXPECT_EQ(back.run.periods_per_year, 252.0);
  EXPECT_NE(error_of([] { parse_run_config("", "t", {"run.quantiles=1"}).validate(); }).find("run.quantiles must be >= 2"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_run_config("", "t", {"run.periods_per_year=-1"}).validate(); })
                .find("run.periods_per_year must be a finite number >= 0"),
            std::string::npos);
  // q6 does not exist with the default 5 quantiles; ls_sharpe drives early stopping like any metric.
  EXPECT_NE(error_of([] { parse_run_config("", "t", {"run.metric=\"q6\""}).validate(); }).find("q1 .. q5, got 'q6'"),
            std::string::npos);
  EXPECT_NO_THROW(parse_run_config("", "t", {"run.metric=\"ls_sharpe\""}).validate());
  EXPECT_NE(error_of([] { parse_run_config("", "t", {"run.periods_per_year=\"daily\""}); }).find("expected a number"),
            std::string::npos);
}

TEST(RunConfigText, RoundTripsThroughToml) {
  RunConfig c = parse_run_config("[data]\nsource = \"csv\"\ncsv = \"a b.csv\"\nfeature_columns = [\"x\", \"y\"]\n"
                                 "target_columns = [\"r\"]\ndelimiter = \";\"\n[split]\ntrain_end = 500\nvalid_end = \"2020-01-01\"\n"
                                 "[train]\nlr = 0.0003\n",
                                 "t");
  const RunConfig back = parse_run_config(to_toml(c), "round trip");
  EXPECT_EQ(back.data.csv, (fs::current_path() / "a b.csv").lexically_normal().string());
  EXPECT_EQ(back.data.feature_columns, c.data.feature_columns);
  EXPECT_EQ(back.data.delimiter, ";");
  EXPECT_EQ(back.split.spec.train_end.index, 500);
  EXPECT_EQ(back.split.spec.valid_end.time, "2020-01-01");
  EXPECT_EQ(back.train.lr, c.train.lr);
  EXPECT_EQ(std::isinf(back.model.dt_limit_hi), true);
}

}  // namespace
}  // namespace mlalpha
