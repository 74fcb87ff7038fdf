// What a date's prediction is (docs/data.md; DESIGN section 7), on the CPU: the per-date window plan; in mode
// `window` the last dates' scores are bitwise the same whether the input starts at row 0 or at any offset
// (predict, eval, every data processing but ffill); mode `carry` is the forward over each instrument's present
// rows; the context of each prediction; `observed` is 1 exactly for the rows of the raw input, in the
// prediction files of `predict` and of the walk-forward pooling; the run's validation, test and pooled
// predictions are `predict`'s of the same weights.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "compute_util.h"
#include "mlalpha/run.h"
#include "model/model_ref.h"
#include "predict/model_parts.h"
#include "predict/window_plan.h"
#include "predict_util.h"
#include "test_files.h"

namespace mlalpha::test {
namespace {

namespace fs = std::filesystem;

TEST(DateWindows, EachDateIsTheLastRowOfItsOwnWindow) {
  for (auto [N, T, C, t0, t1] : {std::tuple{3, 40, 8, 0, 40}, {2, 40, 8, 10, 30}, {2, 40, 8, 3, 5}, {1, 5, 8, 0, 5},
                                 {2, 20, 1, 0, 20}, {2, 20, 20, 19, 20}}) {
    const WindowPlan plan = date_windows(N, T, C, t0, t1);
    EXPECT_NO_THROW(check_plan(plan));
    const int L = std::min(C, T);
    EXPECT_EQ(plan.L, L);
    std::vector<int> hits(size_t(N) * T, 0);
    for (const PlanWindow& w : plan.windows) {
      if (w.start > 0) {  // a date with a full history: its own window, ending at it
        EXPECT_EQ(w.keep_to - w.keep_from, 1);
        EXPECT_EQ(w.start + L - 1, w.keep_from);
      } else {  // the dates t < L share the window of the first L rows
        EXPECT_LE(w.keep_to, L);
      }
      for (int t = w.keep_from; t < w.keep_to; ++t) ++hits[size_t(w.instrument) * T + t];
    }
    for (int i = 0; i < N; ++i)
      for (int t = 0; t < T; ++t) EXPECT_EQ(hits[size_t(i) * T + t], t >= t0 && t < t1 ? 1 : 0) << i << " " << t;
    EXPECT_EQ(window_context(C, 0), 1);
    EXPECT_EQ(window_context(C, C - 1), C);
    EXPECT_EQ(window_context(C, C + 5), C);
  }
  EXPECT_THROW(date_windows(2, 20, 8, 5, 21), Error);
  EXPECT_THROW(date_windows(2, 20, 0, 0, 20), Error);
}

// The bits of every prediction at times [from, T) of `a` (a panel of T steps) against those of `b` (the panel
// from `off` on); and whether some earlier date of b (a shorter history) differs from a's.
void expect_same_tail(const std::vector<float>& a, const std::vector<float>& b, int N, int T, int K, int off, int from,
                      const std::string& what) {
  const int Tb = T - off;
  size_t compared = 0;
  for (int i = 0; i < N; ++i)
    for (int t = from; t < T; ++t)
      for (int k = 0; k < K; ++k) {
        const float x = a[(size_t(i) * T + t) * K + k], y = b[(size_t(i) * Tb + t - off) * K + k];
        ASSERT_TRUE(same_bits(std::span<const float>(&x, 1), std::span<const float>(&y, 1)))
            << what << ": instrument " << i << ", time " << t << ", offset " << off << ": " << x << " vs " << y;
        compared += std::isfinite(x);
      }
  EXPECT_GT(compared, size_t(N) * (T - from) * K / 2) << what;
}

TEST(WindowMode, TheLastDatesDoNotDependOnWhereTheInputStarts) {
  TempDir tmp;
  auto rng = make_rng(1);
  const int N = 5, T = 48, F = 3, K = 2, C = 12;
  const Panel raw = raw_panel(N, T, F, K, rng);
  const FeatureStats stats = some_stats(F, rng);
  int case_no = 0;
  for (const DataConfig& d : {processing("global", "zero"), processing("zscore", "mean", "zscore"),
                              processing("rank", "zero", "rank"), processing("robust", "mean"), processing("global", "mean")}) {
    const Model m = write_model(tmp / ("m" + std::to_string(case_no++)), small_model(F, K), C, d, stats, rng(),
                                raw.feature_names, raw.target_names);
    const std::vector<float> full = m.predict(raw, {0, T}, test::on_cpu());
    for (int off : {1, 5, 12, 19}) {
      const Panel tail = slice_panel(raw, off, T);
      const std::vector<float> part = m.predict(tail, {0, T - off}, test::on_cpu());
      expect_same_tail(full, part, N, T, K, off, off + C - 1, d.feature_norm + "/" + d.nan_fill);
      // The dates with fewer than C rows in the shorter input are scored from a shorter window: they differ, so
      // the comparison above can fail.
      bool differs = false;
      for (int t = off; t < off + C - 1 && !differs; ++t)
        differs = full[(size_t(0) * T + t) * K] != part[(size_t(0) * (T - off) + t - off) * K];
      EXPECT_TRUE(differs) << "offset " << off;
      // eval over the same dates: the same metrics.
      const MetricsResult ea = m.evaluate(raw, {off + C - 1, T}, test::on_cpu());
      const MetricsResult eb = m.evaluate(tail, {C - 1, T - off}, test::on_cpu());
      EXPECT_EQ(ea.mean.mse, eb.mean.mse);
      EXPECT_EQ(ea.mean.ic, eb.mean.ic);
    }
  }
}

TEST(WindowMode, ADateIsTheForwardOverItsLastCRows) {
  TempDir tmp;
  auto rng = make_rng(2);
  const int N = 4, T = 30, F = 3, K = 1, C = 7;
  const Panel raw = raw_panel(N, T, F, K, rng);
  const Model m = write_model(tmp / "m", small_model(F, K), C, processing("global", "zero"), some_stats(F, rng), rng());
  const Panel norm = m.prepare(raw);
  // The reference CPU model on both sides: the definition is checked to the bit (the fast CPU model computes the
  // same function with other roundings; test_cpu_backend bounds the difference).
  const std::vector<float> pred =
      m.predict_prepared(norm, {3, T}, test::on_cpu_reference(), PredictMode::window);
  const ModelLayout lay(m.model_config());
  RefModel<float> ref(lay);
  for (int i = 0; i < N; ++i)
    for (int t = 0; t < T; ++t) {
      const float got = pred[size_t(i) * T + t];
      if (t < 3) {
        EXPECT_TRUE(std::isnan(got));
        continue;
      }
      const int start = std::max(0, t - C + 1), n = t - start + 1;
      const std::vector<float>& out =
          ref.forward(model_params(m).data(), norm.x.data() + (size_t(i) * T + start) * F, 1, n);
      EXPECT_EQ(got, out[size_t(n - 1)]) << "instrument " << i << ", time " << t;
    }
  // The context column: min(C, t + 1) in window mode; the present rows so far in carry mode.
  const std::vector<int> wc = m.context(norm, PredictMode::window), cc = m.context(norm, PredictMode::carry);
  EXPECT_EQ(wc[size_t(0) * T + 0], 1);
  EXPECT_EQ(wc[size_t(3) * T + C - 2], C - 1);
  EXPECT_EQ(wc[size_t(3) * T + T - 1], C);
  EXPECT_EQ(cc[size_t(2) * T + 12], 1) << "instrument 2 is listed at time 12";
  EXPECT_EQ(cc[size_t(1) * T + 7], 6) << "instrument 1 misses times 5 and 6";
  EXPECT_EQ(cc[size_t(3) * T + 15], 15) << "instrument 3's row at time 15 has a target but no feature";
}

// Mode carry: each instrument's output at a present row is the forward over its present rows up to there (a
// missing row, or one with a target but no feature, leaves the state alone and gets no prediction).
TEST(CarryMode, IsTheForwardOverEachInstrumentsPresentRows) {
  TempDir tmp;
  auto rng = make_rng(3);
  const int N = 5, T = 36, F = 3, K = 2, C = 8;
  const Panel raw = raw_panel(N, T, F, K, rng);
  for (const DataConfig& d : {processing("global", "zero"), processing("zscore", "ffill")}) {
    const Model m = write_model(tmp / "m", small_model(F, K), C, d, some_stats(F, rng), rng());
    const Panel norm = m.prepare(raw);
    const int t0 = 4;
    // The reference CPU model on both sides, so the definition is checked to the bit.
    const std::vector<float> pred =
        m.predict(raw, {t0, T}, test::on_cpu_reference(), PredictMode::carry);
    const ModelLayout lay(m.model_config());
    RefModel<float> ref(lay);
    size_t finite = 0;
    for (int i = 0; i < N; ++i) {
      std::vector<float> rows;
      std::vector<int> at;
      for (int t = 0; t < T; ++t)
        if (input_row(raw, i, t) & kRowFeatures) {
          at.push_back(t);
          rows.insert(rows.end(), norm.x.data() + (size_t(i) * T + t) * F, norm.x.data() + (size_t(i) * T + t + 1) * F);
        }
      const std::vector<float>& out = ref.forward(model_params(m).data(), rows.data(), 1, int(at.size()));
      std::vector<float> want(size_t(T) * K, std::numeric_limits<float>::quiet_NaN());
      for (size_t j = 0; j < at.size(); ++j)
        if (at[j] >= t0)
          for (int k = 0; k < K; ++k) want[size_t(at[j]) * K + k] = out[j * K + k];
      const std::vector<float> got(pred.begin() + ptrdiff_t(size_t(i) * T * K), pred.begin() + ptrdiff_t(size_t(i + 1) * T * K));
      EXPECT_TRUE(same_bits(got, want)) << d.feature_norm << "/" << d.nan_fill << ", instrument " << i;
      for (float v : got) finite += std::isfinite(v);
    }
    EXPECT_GT(finite, size_t(N - 1) * (T - t0) * K);
    EXPECT_TRUE(std::isnan(pred[(size_t(1) * T + 5) * K])) << "a missing row has no carry prediction";
    EXPECT_TRUE(std::isnan(pred[(size_t(3) * T + 15) * K])) << "nor a row without a feature";
  }
  EXPECT_TRUE(contains(error_of([] { parse_predict_mode("carried"); }), "'window'"));
}

// `observed` is 1 exactly where the raw input had a row, in the predictions file of `predict` (the prepared
// panel remembers it through the fill), whatever the target processing.
TEST(Observed, IsTheRawInputsRowsInThePredictionFiles) {
  TempDir tmp;
  auto rng = make_rng(4);
  const int N = 4, T = 24, F = 2, K = 1;
  const Panel raw = raw_panel(N, T, F, K, rng);
  for (const std::string& target_norm : {"none", "zscore"}) {
    const Model m = write_model(tmp / "m", small_model(F, K), 6, processing("global", "zero", target_norm),
                                some_stats(F, rng), rng());
    const Panel norm = m.prepare(raw);
    const std::vector<float> pred = m.predict_prepared(norm, {0, T}, test::on_cpu());
    write_predictions(tmp / "pred", norm, pred, {0, T}, {}, m.context(norm));
    const auto rows = read_csv_rows(tmp / "pred.csv");
    ASSERT_EQ(rows.size(), size_t(N) * T + 1);
    EXPECT_EQ(rows[0], (std::vector<std::string>{"time", "instrument", "observed", "context", "pred_y0", "target_y0"}));
    int missing = 0;
    for (size_t r = 1; r < rows.size(); ++r) {
      const int t = std::stoi(rows[r][0]) - 100, i = std::stoi(rows[r][1].substr(1));
      bool any = false;
      for (int f = 0; f < F; ++f) any |= !std::isnan(raw.x[(size_t(i) * T + t) * F + f]);
      for (int k = 0; k < K; ++k) any |= !std::isnan(raw.y[(size_t(i) * T + t) * K + k]);
      EXPECT_EQ(rows[r][2], any ? "1" : "0") << target_norm << ": " << rows[r][0] << " " << rows[r][1];
      EXPECT_EQ(rows[r][3], std::to_string(window_context(6, t)));
      missing += !any;
    }
    EXPECT_EQ(missing, 3 + 12) << "instrument 1's 3 missing rows and instrument 2's 12 before its listing";
  }
}

class RunPredictions : public ::testing::Test {
 protected:
  TempDir tmp;
};

// The pooled walk-forward predictions (oos_pred) and the test score of a run are `predict`'s, in window mode,
// of each fold's best weights on the same panel; oos_pred.csv marks missing rows unobserved (target_norm set).
TEST_F(RunPredictions, ThePooledOutOfSamplePredictionsArePredictsOfEachFold) {
  auto rng = make_rng(5);
  const int N = 5, T = 160, F = 3, K = 1;
  Panel raw = raw_panel(N, T, F, K, rng);
  const RunConfig cfg = parse_run_config(
      "", "test",
      {"run.device=\"cpu\"", "model.d_model=16", "model.head_dim=8", "model.d_state=8", "model.layers=1",
       "train.batch=4", "train.seq_len=16", "train.steps=6", "train.warmup=1", "train.log_every=3",
       "run.eval_every=3", "split.walk_forward_folds=2", "split.walk_forward_train_size=40",
       "data.target_norm=\"zscore\"", "run.out_dir=\"" + (tmp.path / "wf").string() + "\""});
  const RunResult r = run_training(cfg, raw);
  ASSERT_TRUE(r.has_oos);
  ASSERT_EQ(r.folds.size(), 2u);
  const std::string npy = read_bytes(tmp.path / "wf/oos_pred.npy");
  const auto rows = read_csv_rows(tmp.path / "wf/oos_pred.csv");
  ASSERT_EQ(rows[0], (std::vector<std::string>{"time", "instrument", "fold", "observed", "context", "pred_y0", "target_y0"}));
  std::map<std::pair<int, int>, std::string> pooled;  // (instrument, time) -> the pred cell
  for (size_t k = 1; k < rows.size(); ++k) {
    const int t = std::stoi(rows[k][0]) - 100, i = std::stoi(rows[k][1].substr(1));
    pooled[{i, t}] = rows[k][5];
    bool any = false;
    for (int f = 0; f < F; ++f) any |= !std::isnan(raw.x[(size_t(i) * T + t) * F + f]);
    any |= !std::isnan(raw.y[size_t(i) * T + t]);
    EXPECT_EQ(rows[k][3], any ? "1" : "0") << rows[k][0] << " " << rows[k][1];
    EXPECT_EQ(rows[k][4], "16");
  }
  for (const FoldResult& f : r.folds) {
    const Model m = Model::load((fs::path(f.dir) / "best.safetensors").string());
    const TimeRange test = split_range(f.split, "test", T);
    const std::vector<float> pred = m.predict(raw, test, test::on_cpu());
    const MetricsResult s = m.evaluate(raw, test, test::on_cpu());
    EXPECT_DOUBLE_EQ(s.mean.mse, f.test.mean.mse) << "fold " << f.fold << ": the run's test score is predict's";
    for (int i = 0; i < N; ++i)
      for (int t = test.t0; t < test.t1; ++t) {
        const auto it = pooled.find({i, t});
        ASSERT_NE(it, pooled.end());
        const float got = std::strtof(it->second.c_str(), nullptr);
        EXPECT_EQ(got, pred[size_t(i) * T + t]) << "fold " << f.fold << ", instrument " << i << ", time " << t;
      }
  }
}

}  // namespace
}  // namespace mlalpha::test
