// Cross-sectional processing (src/data/normalize.h; docs/data.md, "Normalisation"): each per-date mode on
// hand-checkable panels, ties, NaN fills, clipping, thread-count independence, the [data] keys, and the
// checkpoint round trip (a loaded model processes and predicts exactly as the run did).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "compute_util.h"
#include "data/normalize.h"
#include "mlalpha/model.h"
#include "mlalpha/run.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

using test::contains;
using test::error_of;

// N instruments × T dates × F features, K = 1 target, from per-(date, feature) columns over instruments:
// cols[t][f][i].
Panel panel_of(const std::vector<std::vector<std::vector<float>>>& cols, std::vector<std::vector<float>> y = {}) {
  Panel p;
  p.T = int(cols.size());
  p.F = int(cols[0].size());
  p.N = int(cols[0][0].size());
  p.K = 1;
  p.x.resize(size_t(p.N) * p.T * p.F);
  p.y.assign(size_t(p.N) * p.T, 0.0f);
  for (int t = 0; t < p.T; ++t)
    for (int f = 0; f < p.F; ++f)
      for (int i = 0; i < p.N; ++i) p.x[(size_t(i) * p.T + t) * p.F + f] = cols[t][f][i];
  for (size_t t = 0; t < y.size(); ++t)
    for (int i = 0; i < p.N; ++i) p.y[size_t(i) * p.T + t] = y[t][i];
  return p;
}

// Feature f at date t over the instruments.
std::vector<float> column(const Panel& p, int t, int f) {
  std::vector<float> v(p.N);
  for (int i = 0; i < p.N; ++i) v[i] = p.x[(size_t(i) * p.T + t) * p.F + f];
  return v;
}
std::vector<float> targets_at(const Panel& p, int t) {
  std::vector<float> v(p.N);
  for (int i = 0; i < p.N; ++i) v[i] = p.y[size_t(i) * p.T + t];
  return v;
}

DataConfig mode(const std::string& feature_norm, const std::string& nan_fill = "zero", const std::string& target_norm = "none") {
  DataConfig d;
  d.feature_norm = feature_norm;
  d.nan_fill = nan_fill;
  d.target_norm = target_norm;
  return d;
}

void expect_floats(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "] = " << got[i];
      continue;
    }
    EXPECT_EQ(got[i], float(want[i])) << what << " [" << i << "]";
  }
}

TEST(CrossSection, ZScorePerDate) {
  // Date 0: {1, 2, 3, 6} → mean 3, population std √3.5; date 1: one value; date 2: all equal.
  Panel p = panel_of({{{1, 2, 3, 6}}, {{NAN, 5, NAN, NAN}}, {{4, 4, 4, 4}}});
  prepare_panel(p, mode("zscore"), {}, 1);
  const double sd = std::sqrt(3.5);
  expect_floats(column(p, 0, 0), {-2 / sd, -1 / sd, 0, 3 / sd}, "date 0");
  expect_floats(column(p, 1, 0), {0, 0, 0, 0}, "date 1: < 2 values → 0, NaN → 0");
  expect_floats(column(p, 2, 0), {0, 0, 0, 0}, "date 2: zero spread → 0");
}

TEST(CrossSection, RankMapsToMinusOneOneWithTiesAveraged) {
  // {3, 1, 3, 2, NaN}: n = 4, 1-based ranks 3.5, 1, 3.5, 2 → 2(r − 1)/3 − 1.
  Panel p = panel_of({{{3, 1, 3, 2, NAN}}, {{7, 7, 7, 7, 7}}, {{10, 20, 30, 40, 50}}});
  prepare_panel(p, mode("rank"), {}, 1);
  expect_floats(column(p, 0, 0), {2 * 2.5 / 3 - 1, -1, 2 * 2.5 / 3 - 1, 2 * 1.0 / 3 - 1, 0}, "ties");
  expect_floats(column(p, 1, 0), {0, 0, 0, 0, 0}, "all tied");
  expect_floats(column(p, 2, 0), {-1, -0.5, 0, 0.5, 1}, "uniform");
  // Without a fill the NaN stays missing.
  std::vector<float> v = {3, 1, NAN, 3, 2};
  CrossScratch s;
  cross_normalize(v.data(), 5, CrossNorm::rank, 0, s);
  expect_floats(v, {2 * 2.5 / 3 - 1, -1, NAN, 2 * 2.5 / 3 - 1, 2 * 1.0 / 3 - 1}, "NaN kept");
}

TEST(CrossSection, RobustUsesMedianAndMadAndClips) {
  // {1, 2, 3, 4, 100}: median 3, |x − 3| = {2, 1, 0, 1, 97} → MAD 1, scale 1.4826; 97 / 1.4826 clips to 3.
  // {5, 5, 5, 9}: MAD 0 → scale 1.2533 · mean |x − 5| = 1.2533 · 1.
  // {1, 2, 3, 4}: even count, median 2.5, MAD = median {1.5, 0.5, 0.5, 1.5} = 1.
  Panel p = panel_of({{{1, 2, 3, 4, 100}}, {{5, 5, 5, 9, NAN}}, {{1, 2, 3, 4, NAN}}});
  DataConfig d = mode("robust");
  prepare_panel(p, d, {}, 1);
  expect_floats(column(p, 0, 0), {-2 / 1.4826, -1 / 1.4826, 0, 1 / 1.4826, 3}, "clipped at 3");
  expect_floats(column(p, 1, 0), {0, 0, 0, 3, 0}, "MAD 0: 4 / 1.2533 = 3.19 clips to 3");
  expect_floats(column(p, 2, 0), {-1.5 / 1.4826, -0.5 / 1.4826, 0.5 / 1.4826, 1.5 / 1.4826, 0}, "even count");
  Panel q = panel_of({{{1, 2, 3, 4, 100}}, {{5, 5, 5, 9, NAN}}});
  d.robust_clip = 100;
  prepare_panel(q, d, {}, 1);
  expect_floats(column(q, 0, 0), {-2 / 1.4826, -1 / 1.4826, 0, 1 / 1.4826, 97 / 1.4826}, "clip 100");
  expect_floats(column(q, 1, 0), {0, 0, 0, 4 / 1.2533, 0}, "MAD 0, clip 100");
}

TEST(CrossSection, NanFillModes) {
  // Instrument 0: 1, NaN, NaN, 4; instrument 1: NaN, 2, NaN, NaN; instrument 2: 3, 3, 9, 6.
  const std::vector<std::vector<std::vector<float>>> cols = {{{1, NAN, 3}}, {{NAN, 2, 3}}, {{NAN, NAN, 9}}, {{4, NAN, 6}}};
  {  // ffill before the per-date z-score: date 2 is {1, 2, 9} (instruments 0 and 1 carried forward).
    Panel p = panel_of(cols);
    prepare_panel(p, mode("zscore", "ffill"), {}, 1);
    const double m = 4, sd = std::sqrt((9 + 4 + 25) / 3.0);
    expect_floats(column(p, 2, 0), {(1 - m) / sd, (2 - m) / sd, (9 - m) / sd}, "date 2 filled");
    expect_floats(column(p, 0, 0), {(1 - 2.0) / 1, 0, (3 - 2.0) / 1}, "date 0: nothing before instrument 1's first value");
  }
  {  // mean fill after the global normalisation: mean 2, stdev 1 → date 0 is {−1, NaN, 1} → NaN ← 0;
     // date 3 is {2, NaN, 4} → NaN ← 3.
    Panel p = panel_of(cols);
    prepare_panel(p, mode("global", "mean"), FeatureStats{{2}, {1}}, 1);
    expect_floats(column(p, 0, 0), {-1, 0, 1}, "date 0");
    expect_floats(column(p, 3, 0), {2, 3, 4}, "date 3");
    expect_floats(column(p, 2, 0), {7, 7, 7}, "date 2: one value, the others take it");
  }
  {  // zero fill: today's rule.
    Panel p = panel_of(cols);
    prepare_panel(p, mode("global", "zero"), FeatureStats{{2}, {1}}, 1);
    expect_floats(column(p, 3, 0), {2, 0, 4}, "date 3");
  }
  {  // ffill under global statistics: the statistics are fitted on the filled values.
    Panel p = panel_of(cols);
    const FeatureStats s = compute_feature_stats(p, 0, 4, true, 1);
    // Filled values: instrument 0: 1, 1, 1, 4; instrument 1: 2, 2, 2 (from t = 1); instrument 2: 3, 3, 9, 6.
    const std::vector<double> v = {1, 1, 1, 4, 2, 2, 2, 3, 3, 9, 6};
    double m = 0, q = 0;
    for (double x : v) m += x;
    m /= double(v.size());
    for (double x : v) q += (x - m) * (x - m);
    EXPECT_FLOAT_EQ(s.mean[0], float(m));
    EXPECT_FLOAT_EQ(s.stdev[0], float(std::sqrt(q / double(v.size()))));
    const FeatureStats plain = compute_feature_stats(p, 0, 4, false, 1);
    EXPECT_FLOAT_EQ(plain.mean[0], float((1 + 3 + 2 + 3 + 9 + 4 + 6) / 7.0));
  }
}

TEST(CrossSection, TargetsPerDateNaNStaysMasked) {
  Panel p = panel_of({{{0, 0, 0, 0}}, {{0, 0, 0, 0}}}, {{0.01f, 0.03f, NAN, 0.02f}, {NAN, 0.5f, NAN, NAN}});
  Panel z = p;
  prepare_panel(z, mode("global", "zero", "zscore"), FeatureStats{{0}, {1}}, 1);
  const double m = 0.02, sd = std::sqrt((0.0001 + 0.0001) / 3);
  const std::vector<float> y0 = targets_at(z, 0);
  EXPECT_NEAR(y0[0], (0.01 - m) / sd, 1e-5);
  EXPECT_NEAR(y0[1], (0.03 - m) / sd, 1e-5);
  EXPECT_TRUE(std::isnan(y0[2]));
  EXPECT_NEAR(y0[3], 0, 1e-5);
  expect_floats(targets_at(z, 1), {NAN, 0, NAN, NAN}, "one target at a date → 0");
  Panel r = p;
  prepare_panel(r, mode("global", "zero", "rank"), FeatureStats{{0}, {1}}, 1);
  expect_floats(targets_at(r, 0), {-1, 1, NAN, 0}, "rank");
  Panel none = p;
  prepare_panel(none, mode("global"), FeatureStats{{0}, {1}}, 1);
  EXPECT_TRUE(test::same_bits(none.y, p.y));  // target_norm = none leaves the targets alone
}

TEST(CrossSection, SameBitsForAnyThreadCount) {
  std::mt19937_64 rng(5);
  const int N = 37, T = 53, F = 5;
  Panel p;
  p.N = N, p.T = T, p.F = F, p.K = 2;
  p.x.resize(size_t(N) * T * F);
  p.y.resize(size_t(N) * T * 2);
  std::uniform_real_distribution<float> u(-3, 3);
  for (size_t j = 0; j < p.x.size(); ++j) {
    p.x[j] = j % 7 == 0 ? NAN : j % 5 == 0 ? std::round(u(rng)) : u(rng) * 1e3f;  // NaN, ties, spread
    if (j % 997 < 40) p.x[j] = NAN;                                               // runs of NaN
  }
  for (size_t j = 0; j < p.y.size(); ++j) p.y[j] = j % 9 == 0 ? NAN : u(rng);
  for (const char* norm : {"global", "zscore", "rank", "robust"})
    for (const char* fill : {"zero", "ffill", "mean"}) {
      const DataConfig d = mode(norm, fill, std::string(norm) == "rank" ? "rank" : "zscore");
      const FeatureStats s1 = compute_feature_stats(p, 0, 30, d.nan_fill == "ffill", 1);
      Panel a = p;
      prepare_panel(a, d, s1, 1);
      for (int threads : {2, 3, 8, 64}) {
        const FeatureStats sk = compute_feature_stats(p, 0, 30, d.nan_fill == "ffill", threads);
        EXPECT_TRUE(test::same_bits(sk.mean, s1.mean) && test::same_bits(sk.stdev, s1.stdev)) << norm << threads;
        Panel b = p;
        prepare_panel(b, d, s1, threads);
        EXPECT_TRUE(test::same_bits(a.x, b.x)) << norm << " " << fill << " threads " << threads;
        EXPECT_TRUE(test::same_bits(a.y, b.y)) << norm << " " << fill << " threads " << threads;
        // A borrowed panel (as from a memory-mapped file) is copied once before the threads write, and the
        // lender's floats are left alone.
        const std::vector<float> lent_x = p.x.to_vector(), lent_y = p.y.to_vector();
        Panel c = p;
        c.x = FloatValues::borrow(lent_x.data(), lent_x.size(), nullptr);
        c.y = FloatValues::borrow(lent_y.data(), lent_y.size(), nullptr);
        prepare_panel(c, d, s1, threads);
        EXPECT_FALSE(c.x.borrowed() || c.y.borrowed());
        EXPECT_TRUE(test::same_bits(a.x, c.x) && test::same_bits(a.y, c.y)) << norm << " " << fill << " borrowed";
        EXPECT_TRUE(test::same_bits(lent_x, p.x) && test::same_bits(lent_y, p.y)) << "the lent floats changed";
      }
      for (float v : a.x) ASSERT_FALSE(std::isnan(v)) << norm << " " << fill;  // every NaN filled
    }
}

TEST(CrossSection, SettingsAreCheckedAndErrorsLeaveThePanel) {
  Panel p = panel_of({{{1, 2}}, {{3, INFINITY}}});
  p.instruments = {"A", "B"};
  const std::vector<float> before = p.x.to_vector();
  EXPECT_TRUE(contains(error_of([&] { prepare_panel(p, mode("rank"), {}, 2); }), "+inf at instrument 1 ('B'), time 1"));
  EXPECT_TRUE(test::same_bits(p.x, before));
  EXPECT_TRUE(contains(error_of([&] { prepare_panel(p, mode("ranks"), {}); }),
                       "data.feature_norm must be one of 'global', 'zscore', 'rank', 'robust', got 'ranks'"));
  DataConfig d = mode("robust");
  d.robust_clip = 0;
  EXPECT_TRUE(contains(error_of([&] { check_preprocessing(d); }), "data.robust_clip must be > 0"));
  EXPECT_TRUE(contains(error_of([&] { prepare_panel(p, mode("global"), {}); }), "the panel has F = 1"));
}

TEST(CrossSection, ConfigKeysParseAndRoundTrip) {
  const RunConfig c = parse_run_config(
      "[data]\nfeature_norm = \"robust\"\nrobust_clip = 2.5\ntarget_norm = \"rank\"\nnan_fill = \"ffill\"\n", "cfg.toml");
  EXPECT_EQ(c.data.feature_norm, "robust");
  EXPECT_EQ(c.data.robust_clip, 2.5f);
  EXPECT_EQ(c.data.target_norm, "rank");
  EXPECT_EQ(c.data.nan_fill, "ffill");
  const RunConfig back = parse_run_config(to_toml(c, {"data"}), "back");
  EXPECT_EQ(back.data.feature_norm, "robust");
  EXPECT_EQ(back.data.robust_clip, 2.5f);
  EXPECT_EQ(back.data.target_norm, "rank");
  EXPECT_EQ(back.data.nan_fill, "ffill");
  const RunConfig dflt = parse_run_config("", "d");
  EXPECT_EQ(dflt.data.feature_norm, "global");
  EXPECT_EQ(dflt.data.target_norm, "none");
  EXPECT_EQ(dflt.data.nan_fill, "zero");
  EXPECT_EQ(dflt.data.robust_clip, 3.0f);
  EXPECT_TRUE(contains(error_of([] { parse_run_config("[data]\nnan_fill = \"bfill\"\n", "cfg.toml"); }),
                       "cfg.toml:2: data.nan_fill: must be one of 'zero', 'ffill', 'mean', got 'bfill'"));
  EXPECT_TRUE(contains(error_of([] { parse_run_config("[data]\nrobust_clip = -1.0\n", "cfg.toml").validate(); }),
                       "data.robust_clip must be > 0"));
  const auto& keys = run_config_keys();
  for (const char* k : {"data.feature_norm", "data.robust_clip", "data.target_norm", "data.nan_fill"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
}

// A run with per-date processing on a panel with missing values: the checkpoint carries the settings, and
// the loaded model scores the validation range exactly as the run's last evaluation did.
TEST(CrossSection, CheckpointPredictsAsAtTheEndOfTraining) {
  const fs::path dir = fs::temp_directory_path() / ("mlalpha_xs_" + std::to_string(std::random_device{}()));
  for (const char* norm : {"rank", "robust", "global"}) {
    RunConfig c = parse_run_config(
        "", "test",
        {"run.device=\"cpu\"", "data.instruments=6", "data.timesteps=200", "data.n_features=3", "model.d_model=16",
         "model.head_dim=8", "train.batch=4", "train.seq_len=16", "train.steps=6", "train.warmup=1",
         "run.eval_every=0", std::string("data.feature_norm=\"") + norm + "\"", "data.target_norm=\"zscore\"",
         "data.nan_fill=\"ffill\"", "run.out_dir=\"" + (dir / norm).string() + "\""});
    Panel p = load_panel(c.data);
    for (size_t j = 0; j < p.x.size(); j += 5) p.x[j] = NAN;
    p.x[7] *= 1e3f;  // an outlier for the robust clip
    const RunResult r = run_training(c, p);
    ASSERT_EQ(r.folds.size(), 1u);
    const Model m = Model::load(r.folds[0].dir + "/last.safetensors");
    EXPECT_EQ(m.data_config().feature_norm, norm);
    EXPECT_EQ(m.data_config().target_norm, "zscore");
    EXPECT_EQ(m.data_config().nan_fill, "ffill");
    EXPECT_EQ(m.feature_stats().mean.size(), std::string(norm) == "global" ? 3u : 0u);
    const Split& s = r.folds[0].split;
    const MetricsResult e = m.evaluate(p, {s.valid_begin, s.valid_end}, test::on_cpu());
    const Metrics& last = r.folds[0].evaluations.back().metrics.mean;
    EXPECT_DOUBLE_EQ(e.mean.mse, last.mse) << norm;
    EXPECT_DOUBLE_EQ(e.mean.ic, last.ic) << norm;
    EXPECT_EQ(e.mean.points, last.points);
    // The metrics are on the processed targets: against the raw ones the mse differs.
    const std::vector<float> pred = m.predict(p, {s.valid_begin, s.valid_end}, test::on_cpu());
    EXPECT_NE(score(pred, p, {s.valid_begin, s.valid_end}).mean.mse, e.mean.mse);
    EXPECT_EQ(score(pred, m.prepare(p), {s.valid_begin, s.valid_end}).mean.mse, e.mean.mse);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mlalpha

namespace mlalpha {
namespace {

// A resume keeps the run's processing, also for a panel built in memory, and refuses another one.
TEST(CrossSection, ResumeKeepsTheProcessing) {
  const fs::path dir = fs::temp_directory_path() / ("mlalpha_xs_resume_" + std::to_string(std::random_device{}()));
  auto config = [&](int steps, std::vector<std::string> extra) {
    std::vector<std::string> ov = {"run.device=\"cpu\"", "data.instruments=5", "data.timesteps=120", "data.n_features=2",
                                   "model.d_model=16", "model.head_dim=8", "train.batch=4", "train.seq_len=16",
                                   "train.warmup=1", "run.eval_every=0", "train.steps=" + std::to_string(steps),
                                   "run.out_dir=\"" + (dir / "r").string() + "\""};
    ov.insert(ov.end(), extra.begin(), extra.end());
    return parse_run_config("", "test", ov);
  };
  const RunConfig first = config(4, {"data.feature_norm=\"rank\"", "data.nan_fill=\"mean\""});
  Panel p = load_panel(first.data);
  for (float& x : p.x) x *= 3;  // a panel built in memory: the record does not describe how to load it
  run_training(first, p);
  const std::string ck = (dir / "r/last.safetensors").string();
  const RunConfig again = resolve_run_config(config(6, {}), ck, nullptr);
  EXPECT_EQ(again.data.feature_norm, "rank");
  EXPECT_EQ(again.data.nan_fill, "mean");
  EXPECT_TRUE(contains(error_of([&] { resolve_run_config(config(6, {"data.feature_norm=\"zscore\""}), ck, nullptr); }),
                       "data.feature_norm = 'zscore' but the run was trained with 'rank'"));
  RunOptions opt;
  opt.resume = ck;
  EXPECT_EQ(run_training(config(6, {}), p, opt).folds.at(0).steps, 6);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mlalpha
