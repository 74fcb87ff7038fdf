// Runs that would train nothing or choose their best checkpoint by a metric that is never defined are refused
// before the run folder is touched, with what to change (src/run/data_checks.cpp); legitimate but suspicious
// settings are warned about; a run whose run.metric was NaN at every validation ends with an error. Also the
// settings around them: train.init, data.target_scale, the warm-up default.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "compute_util.h"
#include "checkpoint/checkpoint.h"
#include "mlalpha/model.h"
#include "mlalpha/run.h"
#include "test_files.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

// N × T panel, F = 2 features, one target 0.5·x0 + noise; business-day dates when `dates`, else numbers.
Panel make_panel(int N, int T, uint64_t salt, bool dates = true) {
  std::mt19937_64 rng = test::make_rng(salt);
  std::normal_distribution<float> g(0.0f, 1.0f);
  Panel p;
  p.N = N, p.T = T, p.F = 2, p.K = 1;
  std::vector<float> x(size_t(N) * T * 2), y(size_t(N) * T);
  for (size_t r = 0; r < y.size(); ++r) {
    x[2 * r] = g(rng), x[2 * r + 1] = g(rng);
    y[r] = 0.5f * x[2 * r] + 0.1f * g(rng);
  }
  p.x = FloatValues(std::move(x));
  p.y = FloatValues(std::move(y));
  for (int i = 0; i < N; ++i) p.instruments.push_back("S" + std::to_string(i));
  for (int t = 0; t < T; ++t) {
    if (!dates) {
      p.times.push_back(std::to_string(t));
      continue;
    }
    char buf[16];  // consecutive days from 2020-01-01 (the calendar does not matter here)
    const int d = t % 28 + 1, m = (t / 28) % 12 + 1, yr = 2020 + t / (28 * 12);
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", yr, m, d);
    p.times.push_back(buf);
  }
  parse_panel_times(p);
  return p;
}

class Degenerate : public ::testing::Test {
 protected:
  RunConfig config(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> ov = {"run.device=\"cpu\"", "model.d_model=16", "model.head_dim=8", "model.chunk=16",
                                   "train.batch=4", "train.seq_len=16", "train.steps=12", "train.log_every=4",
                                   "run.eval_every=4", "run.out_dir=\"" + (tmp_.path / name).string() + "\""};
    ov.insert(ov.end(), extra.begin(), extra.end());
    return parse_run_config("", "test", ov);
  }
  // The error of a run that must be refused before it touches its folder.
  std::string refused(const RunConfig& cfg, const Panel& p) {
    try {
      run_training(cfg, p);
    } catch (const Error& e) {
      EXPECT_FALSE(fs::exists(cfg.run.out_dir)) << "a refused run left " << cfg.run.out_dir;
      return e.what();
    }
    ADD_FAILURE() << "the run was not refused";
    return "";
  }
  // The warnings ("warning: ...") a run reports.
  std::vector<std::string> warnings_of(const RunConfig& cfg, const Panel& p) {
    std::vector<std::string> w;
    RunOptions o;
    o.callback = [&](const RunEvent& e) {
      if (e.kind == RunEvent::Kind::message && e.message.rfind("warning: ", 0) == 0) w.push_back(e.message);
      return true;
    };
    run_training(cfg, p, o);
    return w;
  }
  test::TempDir tmp_;
};

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST_F(Degenerate, TheIcLossNeedsThreeInstrumentsWithDifferentTargetsOnADate) {
  const std::vector<std::string> ic = {"train.loss=\"ic\"", "train.batch=\"time\"", "train.dates=2", "run.metric=\"mse\""};
  std::string e = refused(config("one", ic), make_panel(1, 120, 1));
  EXPECT_HAS(e, "train.loss = 'ic' needs >= 3 instruments with finite targets on a date");
  EXPECT_HAS(e, "the panel has N = 1 (a single series)");
  EXPECT_HAS(e, "use train.loss = 'mse'");
  e = refused(config("two", ic), make_panel(2, 120, 2));
  EXPECT_HAS(e, "the panel has N = 2 instruments");

  std::vector<std::string> capped = ic;
  capped.push_back("train.instruments=2");
  e = refused(config("capped", capped), make_panel(5, 120, 3));
  EXPECT_HAS(e, "train.instruments = 2 makes each cross-section 2 instruments: set train.instruments >= 3");

  Panel same = make_panel(5, 120, 4);  // every instrument has the date's target: nothing to rank
  float* y = same.y.make_owned();
  for (int i = 1; i < 5; ++i)
    for (int t = 0; t < 120; ++t) y[size_t(i) * 120 + t] = y[t];
  e = refused(config("same", ic), same);
  EXPECT_HAS(e, "the targets are equal across the instruments of every date (e.g. target 0 is ");
  EXPECT_HAS(e, "for all 5 instruments on '2020-01-01'), so the correlation and its gradient are 0");
  EXPECT_NO_THROW(run_training(config("five", ic), make_panel(5, 120, 5)));  // and a real cross-section trains
}

TEST_F(Degenerate, PerDateProcessingOfOneSeriesIsRefusedAndOfTwoWarned) {
  const std::vector<std::string> mse = {"run.metric=\"mse\""};
  for (const char* mode : {"zscore", "rank", "robust"}) {
    std::vector<std::string> s = mse;
    s.push_back(std::string("data.feature_norm=\"") + mode + "\"");
    const std::string e = refused(config(std::string("f_") + mode, s), make_panel(1, 120, 6));
    EXPECT_HAS(e, std::string("data.feature_norm = '") + mode + "' processes each feature across the instruments");
    EXPECT_HAS(e, "N = 1 instrument: every feature would become 0");
    EXPECT_HAS(e, "Use data.feature_norm = 'global'");
  }
  std::vector<std::string> t = mse;
  t.push_back("data.target_norm=\"zscore\"");
  EXPECT_HAS(refused(config("t", t), make_panel(1, 120, 7)), "every target would become 0");
  std::vector<std::string> two = mse;
  two.push_back("data.feature_norm=\"rank\"");
  const auto w = warnings_of(config("two", two), make_panel(2, 120, 8));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_HAS(w[0], "warning: data.feature_norm = 'rank' across N = 2 instruments maps each feature of a date to -1, 0 or +1");
}

TEST_F(Degenerate, ASelectionMetricTheDataCannotGiveIsRefused) {
  // The IC across two instruments: NaN on every date.
  std::string e = refused(config("ic2"), make_panel(2, 120, 9));
  EXPECT_HAS(e, "run.metric = 'ic' correlates the predictions with the targets across the instruments of a date");
  EXPECT_HAS(e, "has N = 2 instruments, so it is NaN at every validation and no best checkpoint can be chosen");
  EXPECT_HAS(e, "choose a run.metric this data defines (mse, dir_acc, ts_mean)");
  // One series: the IC is its correlation over time (defined), the ICIR and the portfolios are not.
  EXPECT_NO_THROW(run_training(config("ic1"), make_panel(1, 120, 10)));
  e = refused(config("icir1", {"run.metric=\"icir\""}), make_panel(1, 120, 11));
  EXPECT_HAS(e, "a single series (N = 1) has one IC over time, no spread");
  e = refused(config("ls1", {"run.metric=\"ls_mean\""}), make_panel(1, 120, 12));
  EXPECT_HAS(e, "run.metric = 'ls_mean' needs quantile portfolios, formed across the instruments of a date, and a "
                "single series (N = 1) has none: choose run.metric = 'ts_sharpe' or 'ts_mean'");
  // Fewer instruments than quantiles: no portfolio on any date.
  e = refused(config("q", {"run.metric=\"turnover\""}), make_panel(3, 120, 13));
  EXPECT_HAS(e, "run.metric = 'turnover' ranks the instruments of each date into run.quantiles = 5 groups, but the "
                "validation range");
  EXPECT_HAS(e, "has at most 3 instruments with a finite target on a date, so it is NaN at every validation: set "
                "run.quantiles = 3 (or fewer, >= 2)");
  EXPECT_NO_THROW(run_training(config("q3", {"run.metric=\"turnover\"", "run.quantiles=3"}), make_panel(3, 120, 14)));
  // A Sharpe ratio without periods per year.
  e = refused(config("sharpe", {"run.metric=\"ts_sharpe\""}), make_panel(6, 120, 15, false));
  EXPECT_HAS(e, "run.metric = 'ts_sharpe' is annualised with the periods per year, which the time labels do not give");
  EXPECT_HAS(e, "set run.periods_per_year (e.g. 252 for trading days), or choose ts_mean");
  EXPECT_NO_THROW(run_training(config("sharpe252", {"run.metric=\"ts_sharpe\"", "run.periods_per_year=252"}),
                               make_panel(1, 120, 16, false)));
}

TEST_F(Degenerate, ARunWhoseMetricWasNaNAtEveryValidationEndsWithAnError) {
  // Every instrument sees the same features, so the model predicts the same for all of them: the IC of each
  // date has a constant side. The targets differ, so the checks before the run cannot know.
  Panel p = make_panel(4, 120, 17);
  float* x = p.x.make_owned();
  for (int i = 1; i < 4; ++i)
    for (int k = 0; k < 120 * 2; ++k) x[size_t(i) * 240 + k] = x[k];
  const RunConfig cfg = config("nan");
  std::string e;
  try {
    run_training(cfg, p);
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_HAS(e, "run.metric = 'ic' was NaN at every validation of the model, so no best checkpoint could be chosen");
  EXPECT_HAS(e, "its files stay in " + cfg.run.out_dir);
  EXPECT_TRUE(fs::exists(fs::path(cfg.run.out_dir) / "last.safetensors"));  // kept for inspection
  EXPECT_TRUE(fs::exists(fs::path(cfg.run.out_dir) / "metrics.jsonl"));
  // The same data scored by mse is a run like any other.
  const RunConfig mse = config("mse", {"run.metric=\"mse\""});
  EXPECT_NO_THROW(run_training(mse, p));
  // Over that run with --overwrite, the failing run leaves the old one exactly as it was.
  const fs::path old(mse.run.out_dir);
  const std::string old_weights = test::read_bytes(old / "best.safetensors"), old_log = test::read_bytes(old / "metrics.jsonl");
  RunConfig over = cfg;
  over.run.out_dir = mse.run.out_dir;
  RunOptions o;
  o.overwrite = true;
  e.clear();
  try {
    run_training(over, p, o);
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_HAS(e, "the old run in " + old.string() + " is restored and this run's files are removed");
  EXPECT_EQ(test::read_bytes(old / "best.safetensors"), old_weights);
  EXPECT_EQ(test::read_bytes(old / "metrics.jsonl"), old_log);
  EXPECT_HAS(test::read_bytes(old / "run.json"), "metric = 'mse'");
  for (const auto& entry : fs::directory_iterator(old))
    EXPECT_NE(entry.path().filename().string().rfind('.', 0), 0u) << entry.path() << " is left behind";
}

TEST_F(Degenerate, SettingsThatDoNothingAreRefusedOrWarned) {
  std::string e;
  try {
    config("pf", {"run.parallel_folds=true", "train.models=2"}).validate();
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_HAS(e, "run.parallel_folds = true trains walk-forward folds together, but split.walk_forward_folds = 0 gives a "
                "single split, so it would do nothing");
  try {
    config("chunk", {"model.chunk=1000000"}).validate();
    e.clear();
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_HAS(e, "model.chunk = 1000000 is beyond 1024");
  const auto w = warnings_of(config("long", {"model.chunk=128", "run.metric=\"mse\""}), make_panel(3, 120, 18));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_HAS(w[0], "warning: model.chunk = 128 is longer than a training window (train.seq_len = 16)");
}

TEST_F(Degenerate, TheWarmUpFollowsTheStepsUnlessSet) {
  EXPECT_EQ(parse_run_config("", "t", {"train.steps=15"}).train.warmup, 1);
  EXPECT_EQ(parse_run_config("", "t", {"train.steps=150"}).train.warmup, 15);
  EXPECT_EQ(parse_run_config("", "t", {"train.steps=5000"}).train.warmup, 20);
  EXPECT_EQ(parse_run_config("", "t", {"train.steps=9"}).train.warmup, 0);
  EXPECT_EQ(parse_run_config("", "t", {"train.steps=15", "train.warmup=3"}).train.warmup, 3);
  EXPECT_NO_THROW(parse_run_config("", "t", {"train.steps=15"}).validate());  // was an error with the old 20
}

TEST_F(Degenerate, TrainInitStartsFromACheckpointsWeights) {
  const Panel p = make_panel(3, 120, 19);
  run_training(config("a", {"run.metric=\"mse\""}), p);
  const std::string init = (tmp_.path / "a/best.safetensors").string();
  // One step with a learning rate far below the weights' rounding leaves them exactly the initial ones.
  run_training(config("b", {"run.metric=\"mse\"", "train.steps=1", "train.warmup=0", "train.lr=1e-30",
                            "train.init=\"" + init + "\""}),
               p);
  EXPECT_EQ(load_checkpoint_weights((tmp_.path / "b/last.safetensors").string()).params,
            load_checkpoint_weights(init).params);
  const std::string e = refused(config("c", {"run.metric=\"mse\"", "model.d_model=32", "train.init=\"" + init + "\""}), p);
  EXPECT_HAS(e, "train.init = '" + init + "' cannot start this model");
}

TEST_F(Degenerate, TargetScaleTrainsOnUnitTargetsAndPredictsInTheTargetsUnits) {
  Panel small = make_panel(3, 120, 20);
  float* y = small.y.make_owned();
  for (size_t i = 0; i < small.y.size(); ++i) y[i] *= 0.01f;  // returns of size 1e-2
  const RunResult a = run_training(config("scaled", {"run.metric=\"mse\"", "data.target_scale=\"std\""}), small);
  const Model m = Model::load((tmp_.path / "scaled/last.safetensors").string());
  ASSERT_EQ(m.feature_stats().target_scale.size(), 1u);
  const float sigma = m.feature_stats().target_scale[0];
  EXPECT_GT(sigma, 0.003f);
  EXPECT_LT(sigma, 0.008f);
  // The same run on the targets divided by hand trains the same weights, bit for bit.
  Panel unit = small;
  float* u = unit.y.make_owned();
  for (size_t i = 0; i < unit.y.size(); ++i) u[i] /= sigma;
  const RunResult b = run_training(config("unit", {"run.metric=\"mse\""}), unit);
  EXPECT_EQ(load_checkpoint_weights((tmp_.path / "scaled/last.safetensors").string()).params,
            load_checkpoint_weights((tmp_.path / "unit/last.safetensors").string()).params);
  // Predictions come back in the targets' units; validation metrics are in them too.
  const Model mb = Model::load((tmp_.path / "unit/last.safetensors").string());
  const std::vector<float> pa = m.predict(small, {60, 120}, test::on_cpu()), pb = mb.predict(unit, {60, 120}, test::on_cpu());
  for (size_t i = 0; i < pa.size(); ++i)
    if (!std::isnan(pb[i])) ASSERT_EQ(pa[i], pb[i] * sigma) << i;
  ASSERT_EQ(a.folds[0].evaluations.size(), b.folds[0].evaluations.size());
  const Metrics& ma = a.folds[0].evaluations.back().metrics.mean;
  const Metrics& mb_ = b.folds[0].evaluations.back().metrics.mean;
  EXPECT_NEAR(ma.mse, mb_.mse * double(sigma) * sigma, 1e-6 * ma.mse);
  EXPECT_NEAR(ma.ic, mb_.ic, 1e-6);
  // A constant target has no scale; two rescalings of the targets are one too many.
  Panel flat = small;
  float* f = flat.y.make_owned();
  for (size_t i = 0; i < flat.y.size(); ++i) f[i] = 0.5f;
  EXPECT_HAS(refused(config("flat", {"run.metric=\"mse\"", "data.target_scale=\"std\""}), flat),
             "data.target_scale = 'std': target 0 is constant over the training range");
  std::string e;
  try {
    config("both", {"data.target_scale=\"std\"", "data.target_norm=\"zscore\""}).validate();
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_HAS(e, "data.target_scale = 'std' and data.target_norm = 'zscore' both rescale the targets");
}

}  // namespace
}  // namespace mlalpha
