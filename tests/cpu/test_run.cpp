// The public run API (include/mlalpha/run.h, model.h, config.h) on the CPU backend: events and the
// stopping callback, walk-forward summaries, refusals before any output, Model round trips, and the
// config's suggestions and relative paths.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "mlalpha/model.h"
#include "mlalpha/run.h"

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
  EXPECT_EQ(kinds.front(), RunEvent::Kind::fold_start);
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
  const MetricsResult s = m.evaluate(p, test, "cpu");
  ASSERT_TRUE(r.folds[0].has_test);
  EXPECT_DOUBLE_EQ(s.mean.mse, r.folds[0].test.mean.mse);  // the run's test score of its best weights
  EXPECT_GT(s.mean.points, 0);
  // Saved and reloaded, the model predicts the same numbers.
  m.save((dir_ / "copy.safetensors").string());
  const std::vector<float> a = m.predict(p, test, "cpu"), b = Model::load((dir_ / "copy.safetensors").string()).predict(p, test, "cpu");
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
  EXPECT_NE(error_of([&] { m.predict(other, test, "cpu"); }).find("the model takes 3 features"), std::string::npos);
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
  EXPECT_EQ(c.data.csv, "rel.csv");  // an override resolves against the working directory
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

TEST(RunConfigText, RoundTripsThroughToml) {
  RunConfig c = parse_run_config("[data]\nsource = \"csv\"\ncsv = \"a b.csv\"\nfeature_columns = [\"x\", \"y\"]\n"
                                 "target_columns = [\"r\"]\ndelimiter = \";\"\n[split]\ntrain_end = 500\nvalid_end = \"2020-01-01\"\n"
                                 "[train]\nlr = 0.0003\n",
                                 "t");
  const RunConfig back = parse_run_config(to_toml(c), "round trip");
  EXPECT_EQ(back.data.csv, "a b.csv");
  EXPECT_EQ(back.data.feature_columns, c.data.feature_columns);
  EXPECT_EQ(back.data.delimiter, ";");
  EXPECT_EQ(back.split.spec.train_end.index, 500);
  EXPECT_EQ(back.split.spec.valid_end.time, "2020-01-01");
  EXPECT_EQ(back.train.lr, c.train.lr);
  EXPECT_EQ(std::isinf(back.model.dt_limit_hi), true);
}

}  // namespace
}  // namespace mlalpha
