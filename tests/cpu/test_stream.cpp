// The streaming predictor on the CPU (mlalpha/stream.h): for every bar of a long stream with missing rows, NaN
// cells, an instrument listed late and one row with a target but no feature, its predictions equal `predict` in
// the same mode on the whole history so far (carry: to the stream-vs-predict tolerance, window: bitwise, the
// same code computes both), under every data processing; a state saved and loaded into another predictor (as a
// restarted process would) continues bit-exactly; warm-up equals stepping; instruments appear and vanish;
// reset; the ensemble's stream is the mean of its members'; and bad input is refused without changing the state.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "compute_util.h"
#include "mlalpha/run.h"
#include "mlalpha/stream.h"
#include "predict_util.h"
#include "test_files.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

// A raw panel of N instruments × T steps (raw_panel) and checkpoints of random weights for it.
struct Fixture {
  TempDir tmp;
  int F = 3, K = 2, C = 9;
  std::mt19937_64 rng;
  Panel raw;
  Fixture(uint64_t salt, int N, int T) : rng(make_rng(salt)), raw(raw_panel(N, T, F, K, rng)) {}
  Model model(const DataConfig& d, const std::string& name = "m") {
    return write_model(tmp / name, small_model(F, K), C, d, some_stats(F, rng), rng(), raw.feature_names,
                       raw.target_names);
  }
};

const DataConfig kProcessings[] = {processing("global", "zero"), processing("zscore", "ffill"), processing("rank", "mean"),
                                   processing("robust", "zero"), processing("global", "ffill")};

// data.target_scale: the stream's predictions come back in the targets' units, as predict's do: the same
// weights without a scale give the predictions divided by it.
TEST(Stream, TargetScaleIsInvertedAsPredictInvertsIt) {
  const int N = 5, T = 24;
  Fixture s(11, N, T);
  const FeatureStats plain = some_stats(s.F, s.rng);
  FeatureStats scaled = plain;
  scaled.target_scale = {0.25f, 3.0f};
  DataConfig d = processing("global", "zero");
  const uint64_t seed = s.rng();
  const Model u = write_model(s.tmp / "plain", small_model(s.F, s.K), s.C, d, plain, seed, s.raw.feature_names,
                              s.raw.target_names);
  d.target_scale = "std";
  const Model m = write_model(s.tmp / "scaled", small_model(s.F, s.K), s.C, d, scaled, seed, s.raw.feature_names,
                              s.raw.target_names);
  for (PredictMode mode : {PredictMode::window, PredictMode::carry}) {
    StreamPredictor st(m, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    const std::vector<float> got = run(st, s.raw, 0, T);
    StreamPredictor su(u, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    const std::vector<float> base = run(su, s.raw, 0, T);
    ASSERT_EQ(got.size(), base.size());
    size_t finite = 0;
    for (size_t at = 0; at < got.size(); ++at) {
      if (std::isnan(base[at])) {
        EXPECT_TRUE(std::isnan(got[at]));
        continue;
      }
      EXPECT_EQ(got[at], base[at] * scaled.target_scale[at % size_t(s.K)]) << to_string(mode) << " at " << at;
      ++finite;
    }
    EXPECT_GT(finite, got.size() / 2);
    if (mode == PredictMode::window)
      EXPECT_TRUE(same_bits(got, as_stream(m.predict(s.raw, {0, T}, test::on_cpu()), s.raw, s.K)));
  }
}

TEST(Stream, EveryBarEqualsPredictOnTheWholeHistory) {
  const int N = 6, T = 40;
  Fixture s(1, N, T);
  int n = 0;
  for (const DataConfig& d : kProcessings) {
    const Model m = s.model(d, "m" + std::to_string(n++));
    const std::string what = d.feature_norm + "/" + d.nan_fill;
    {  // carry: the stream's recurrent steps against predict's forward over each instrument's present rows
      StreamPredictor st(m, s.raw.instruments, {.mode = PredictMode::carry, .compute = test::on_cpu(2)});
      const std::vector<float> got = run(st, s.raw, 0, T);
      const std::vector<float> want =
          as_stream(m.predict(s.raw, {0, T}, test::on_cpu(), PredictMode::carry), s.raw, s.K);
      const auto r = rel_l2_close_where_finite(got, want, nan_of(want), got.size() * 3 / 4, tol::kStreamVsPredictRelL2,
                                               "carry " + what);
      std::printf("%s\n", r.message());
      EXPECT_TRUE(r);
      EXPECT_EQ(st.context()[1], T - 3) << "instrument 1 misses 3 bars";
    }
    {  // window: each bar's window through predict's own path, so the same bits
      StreamPredictor st(m, s.raw.instruments, {.mode = PredictMode::window, .compute = test::on_cpu()});
      const std::vector<float> got = run(st, s.raw, 0, T);
      const std::vector<float> want = as_stream(m.predict(s.raw, {0, T}, test::on_cpu()), s.raw, s.K);
      EXPECT_TRUE(same_bits(got, want)) << "window " << what;
      EXPECT_EQ(st.context(), std::vector<int>(size_t(N), s.C));
    }
    if (n > 1) continue;
    {  // the reference kernels (run.cpu_kernels = "reference"): window through the reference model, so predict's
       // bits with the reference selected; carry within the bound, as the fast kernels
      StreamPredictor wr(m, s.raw.instruments, {.mode = PredictMode::window, .compute = test::on_cpu_reference()});
      const std::vector<float> want = as_stream(
          m.predict(s.raw, {0, T}, test::on_cpu_reference(1), PredictMode::window),
          s.raw, s.K);
      EXPECT_TRUE(same_bits(run(wr, s.raw, 0, T), want)) << "window, reference " << what;
      StreamPredictor cr(m, s.raw.instruments, {.mode = PredictMode::carry, .compute = test::on_cpu_reference()});
      const std::vector<float> got = run(cr, s.raw, 0, T);
      const std::vector<float> fast =
          as_stream(m.predict(s.raw, {0, T}, test::on_cpu(), PredictMode::carry), s.raw, s.K);
      EXPECT_TRUE(rel_l2_close_where_finite(got, fast, nan_of(fast), got.size() * 3 / 4, tol::kStreamVsPredictRelL2,
                                            "carry, reference " + what));
    }
  }
}

// A stream saved at bar `cut` and loaded into a new predictor (made for other instruments, as a restarted
// process that has not read the file yet would be) continues with the same bits as the uninterrupted stream.
TEST(Stream, ASavedStateResumesBitExactly) {
  const int N = 5, T = 30, cut = 17;
  Fixture s(2, N, T);
  const Model m = s.model(processing("zscore", "ffill"));
  for (const PredictMode mode : {PredictMode::carry, PredictMode::window}) {
    StreamPredictor whole(m, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    const std::vector<float> all = run(whole, s.raw, 0, T);
    StreamPredictor first(m, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    std::vector<float> got = run(first, s.raw, 0, cut);
    first.save(s.tmp / "state");
    first.save(s.tmp / "state");  // replaced atomically
    StreamPredictor second(m, {"x"}, {.mode = mode, .compute = test::on_cpu(3)});
    second.load(s.tmp / "state");
    EXPECT_EQ(second.instrument_names(), s.raw.instruments);
    EXPECT_EQ(second.bars(), cut);
    EXPECT_EQ(second.last_time(), s.raw.time_values[cut - 1]);
    EXPECT_EQ(second.context(), first.context());
    const std::vector<float> rest = run(second, s.raw, cut, T);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_TRUE(same_bits(got, all)) << to_string(mode);
    EXPECT_EQ(s.tmp.listing(), (std::vector<std::string>{"m", "m.optim.safetensors", "state"}));
  }
}

TEST(Stream, WarmUpFromAHistoryEqualsSteppingIt) {
  const int N = 4, T = 26, h = 15;
  Fixture s(3, N, T);
  const Model m = s.model(processing("rank", "ffill"));
  for (const PredictMode mode : {PredictMode::carry, PredictMode::window}) {
    StreamPredictor a(m, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    const std::vector<float> all = run(a, s.raw, 0, T);
    StreamPredictor b(m, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    Panel history = slice_panel(s.raw, 0, h);
    b.warm_up(history);
    EXPECT_EQ(b.bars(), h);
    const std::vector<float> rest = run(b, s.raw, h, T);
    EXPECT_TRUE(same_bits(rest, std::vector<float>(all.begin() + ptrdiff_t(size_t(h) * N * s.K), all.end())))
        << to_string(mode);
  }
}

// Instruments appear and vanish: a stream over instruments 0, 1, 3 that adds instrument 2 at bar `add` and drops
// instrument 3 at bar `drop` predicts each instrument as `predict` does on a panel where the instrument has no
// rows outside its time in the stream (global statistics: an absent instrument does not move the others').
TEST(Stream, InstrumentsAppearAndVanish) {
  const int N = 4, T = 30, add = 11, drop = 20;
  Fixture s(4, N, T);
  Panel seen = s.raw;  // the history as the stream sees it
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int t = 0; t < T; ++t)
    for (int f = 0; f < s.F; ++f) {
      if (t < add) seen.x[(size_t(2) * T + t) * s.F + f] = nan;
      if (t >= drop) seen.x[(size_t(3) * T + t) * s.F + f] = nan;
    }
  const Model m = s.model(processing("global", "mean"));
  for (const PredictMode mode : {PredictMode::carry, PredictMode::window}) {
    StreamPredictor st(m, {"i0", "i1", "i3"}, {.mode = mode, .compute = test::on_cpu()});
    const std::vector<float> want = as_stream(m.predict(seen, {0, T}, test::on_cpu(), mode), seen, s.K);
    std::vector<float> got(want.size(), nan);
    for (int t = 0; t < T; ++t) {
      if (t == add) st.set_instruments({"i0", "i1", "i2", "i3"});
      if (t == drop) st.set_instruments({"i0", "i1", "i2"});
      std::vector<float> x(size_t(st.instruments()) * s.F);
      for (int j = 0; j < st.instruments(); ++j) {
        const int i = std::stoi(st.instrument_names()[size_t(j)].substr(1));
        std::copy_n(s.raw.x.data() + (size_t(i) * T + t) * s.F, s.F, x.data() + size_t(j) * s.F);
      }
      const std::vector<float> o = st.step(x);
      for (int j = 0; j < st.instruments(); ++j) {
        const int i = std::stoi(st.instrument_names()[size_t(j)].substr(1));
        std::copy_n(o.data() + size_t(j) * s.K, s.K, got.data() + (size_t(t) * N + i) * s.K);
      }
    }
    if (mode == PredictMode::window) {
      EXPECT_TRUE(same_bits(got, want)) << "window";
    } else {
      EXPECT_TRUE(rel_l2_close_where_finite(got, want, nan_of(want), got.size() / 2, tol::kStreamVsPredictRelL2, "carry"));
    }
  }
}

TEST(Stream, ResetStartsTheNamedInstrumentsAfresh) {
  const int N = 3, T = 20, cut = 8;
  Fixture s(5, N, T);
  const Model m = s.model(processing("global", "zero"));
  StreamPredictor a(m, s.raw.instruments, {.compute = test::on_cpu()});
  run(a, s.raw, 0, cut);
  const std::vector<std::string> which = {"i0"};
  a.reset(which);
  EXPECT_EQ(a.context()[0], 0);
  const std::vector<float> after = run(a, s.raw, cut, T);
  StreamPredictor fresh(m, s.raw.instruments, {.compute = test::on_cpu()});
  const std::vector<float> from_cut = run(fresh, s.raw, cut, T);
  StreamPredictor whole(m, s.raw.instruments, {.compute = test::on_cpu()});
  const std::vector<float> all = run(whole, s.raw, 0, T);
  auto column = [&](const std::vector<float>& v, int i, int from) {  // instrument i's outputs from bar `from` on
    std::vector<float> c;
    for (size_t t = size_t(from); t < v.size() / (size_t(N) * s.K); ++t)
      for (int k = 0; k < s.K; ++k) c.push_back(v[(t * N + i) * s.K + k]);
    return c;
  };
  EXPECT_TRUE(same_bits(column(after, 0, 0), column(from_cut, 0, 0))) << "the reset instrument starts afresh";
  EXPECT_TRUE(same_bits(column(after, 1, 0), column(all, 1, cut))) << "the others go on";
  EXPECT_FALSE(same_bits(column(after, 0, 0), column(all, 0, cut)));
  const std::vector<std::string> unknown = {"nope"};
  EXPECT_TRUE(contains(error_of([&] { a.reset(unknown); }), "'nope' is not an instrument"));
}

// Refused input: a clear error, and the stream is left exactly as it was (its next bars equal those of a stream
// that never saw the refused calls).
TEST(Stream, BadInputIsRefusedAndChangesNothing) {
  const int N = 3, T = 16, cut = 6;
  Fixture s(6, N, T);
  const Model m = s.model(processing("zscore", "ffill"));
  const Model other = s.model(processing("zscore", "ffill"), "other");
  for (const PredictMode mode : {PredictMode::carry, PredictMode::window}) {
    StreamPredictor clean(m, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    StreamPredictor st(m, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    run(clean, s.raw, 0, cut);
    run(st, s.raw, 0, cut);
    st.save(s.tmp / "good");
    std::vector<float> x = bar_of(s.raw, cut);
    const double t_next = s.raw.time_values[cut], t_last = s.raw.time_values[cut - 1];
    EXPECT_TRUE(contains(error_of([&] { st.step(std::span<const float>(x).first(x.size() - 1)); }),
                         "expected 3 instruments x 3 features"));
    std::vector<float> inf = x;
    inf[size_t(1) * s.F + 2] = -INFINITY;
    EXPECT_TRUE(contains(error_of([&] { st.step(inf, {}, t_next); }), "instrument 'i1', feature 'f2' is -inf"));
    EXPECT_TRUE(contains(error_of([&] { st.step(x, {}, t_last); }), "is not after the last bar's"));
    EXPECT_TRUE(contains(error_of([&] { st.step(x, {}, t_last - 5); }), "times must increase"));
    const std::vector<uint8_t> short_mask(2, 1);
    EXPECT_TRUE(contains(error_of([&] { st.step(x, short_mask); }), "`present` has 2 flags"));
    // Another checkpoint's state, another mode's, a damaged file, a file that is not a state.
    StreamPredictor foreign(other, s.raw.instruments, {.mode = mode, .compute = test::on_cpu()});
    foreign.save(s.tmp / "foreign");
    EXPECT_TRUE(contains(error_of([&] { st.load(s.tmp / "foreign"); }), "written for another checkpoint"));
    StreamPredictor moded(m, s.raw.instruments,
                          {.mode = mode == PredictMode::carry ? PredictMode::window : PredictMode::carry, .compute = test::on_cpu()});
    moded.save(s.tmp / "moded");
    EXPECT_TRUE(contains(error_of([&] { st.load(s.tmp / "moded"); }), "in mode"));
    std::string bytes = read_bytes(s.tmp / "good");
    bytes[bytes.size() - 3] ^= 0x40;
    write_bytes(s.tmp / "damaged", bytes);
    EXPECT_TRUE(contains(error_of([&] { st.load(s.tmp / "damaged"); }), "checksum mismatch"));
    EXPECT_TRUE(contains(error_of([&] { st.load(s.tmp / "m"); }), "not a stream state file"));
    EXPECT_TRUE(contains(error_of([&] { st.warm_up(slice_panel(s.raw, 0, cut + 2)); }), "is not after"));
    Panel late_inf = slice_panel(s.raw, cut, cut + 3);
    late_inf.x[size_t(2) * late_inf.F] = INFINITY;  // instrument 0 at its third time step
    EXPECT_TRUE(contains(error_of([&] { st.warm_up(late_inf); }), "is +inf"));
    Panel strangers = slice_panel(s.raw, cut, cut + 1);
    strangers.instruments[1] = "zz";
    EXPECT_TRUE(contains(error_of([&] { st.warm_up(strangers); }), "'zz' is not an instrument"));
    EXPECT_TRUE(contains(error_of([&] { st.set_instruments({"a", "a"}); }), "listed twice"));
    EXPECT_EQ(st.bars(), cut);
    EXPECT_TRUE(same_bits(run(st, s.raw, cut, T), run(clean, s.raw, cut, T))) << to_string(mode);
  }
}

// A population's stream is the mean of its members', as Ensemble::predict averages them.
TEST(Stream, AnEnsembleStreamsTheMeanOfItsMembers) {
  TempDir tmp;
  auto rng = make_rng(7);
  const int N = 4, T = 90, F = 3, K = 1;
  const Panel raw = raw_panel(N, T, F, K, rng);
  const RunConfig cfg = parse_run_config(
      "", "test",
      {"run.device=\"cpu\"", "model.d_model=16", "model.head_dim=8", "model.d_state=8", "model.layers=1",
       "train.batch=4", "train.seq_len=10", "train.steps=4", "train.warmup=1", "train.log_every=2", "train.models=3",
       "run.eval_every=2", "split.train_end=0.6", "split.valid_end=0.8", "run.out_dir=\"" + (tmp.path / "pop").string() + "\""});
  run_training(cfg, raw);
  const Ensemble e = Ensemble::load((tmp.path / "pop").string());
  ASSERT_EQ(e.size(), 3u);
  StreamPredictor st(e, raw.instruments, {.mode = PredictMode::window, .compute = test::on_cpu()});
  const std::vector<float> got = run(st, raw, 0, T);
  EXPECT_TRUE(same_bits(got, as_stream(e.predict(raw, {0, T}, test::on_cpu()), raw, K)));
}

}  // namespace
}  // namespace mlalpha::test
