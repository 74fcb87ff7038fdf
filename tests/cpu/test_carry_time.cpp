// Time batches with carried states (train.batch = "time", train.state = "carry"; data/carry_sampler_time.h,
// docs/decisions.md "Time batches with carried states"):
// - the sampler: every lane of a cross-section on the same dates each step, its G instruments distinct and fixed
//   within the epoch; each cross-section's windows consecutive (the next L dates a step) from the epoch's phase;
//   resets exactly at the epoch's first step and on padding; every whole window of the epoch once; a pure
//   function of (seed, step, lane) asked in any order;
// - the host gather: the panel's rows of the range read in place (missing rows as the panel holds them), burn-in
//   masked after a reset only, padding zeros without targets, bad shapes refused before a byte is written;
// - the CPU trainer: the IC loss learns the cross-section with carried states; N steps = k steps, save, load,
//   N − k steps bit for bit (fast and reference), and the same weights without the states diverge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "carry_resume_util.h"
#include "compute_util.h"
#include "core/error.h"
#include "data/carry_sampler.h"
#include "data/synthetic.h"
#include "mlalpha/config.h"
#include "test_files.h"
#include "model/model_step.h"
#include "test_util.h"
#include "train/trainer_cpu.h"

namespace mlalpha {
namespace {

bool same(const TimeCarryWindow& a, const TimeCarryWindow& b) {
  return a.instrument == b.instrument && a.start == b.start && a.reset == b.reset;
}

TEST(TimeCarrySampler, CrossSectionsShareDatesAndWalkTheRangeInOrder) {
  // (N, T, L, dates, G): G < N with N prime and not, G = N, more cross-sections than windows, T a multiple of L.
  const int shapes[][5] = {
      {7, 100, 8, 3, 4}, {12, 203, 16, 2, 5}, {5, 90, 7, 4, 5}, {6, 40, 9, 6, 2}, {4, 64, 8, 3, 3}};
  for (const auto& sh : shapes) {
    const TimeCarryParams p{sh[0], sh[1], sh[2], sh[3], sh[4], 17};
    const std::string what = "N " + std::to_string(p.N) + " T " + std::to_string(p.T) + " L " + std::to_string(p.L) +
                             " dates " + std::to_string(p.dates) + " G " + std::to_string(p.G);
    const int64_t Wt = p.T / p.L, S = time_carry_epoch_steps(p);
    ASSERT_EQ(time_carry_windows(p), Wt) << what;
    ASSERT_EQ(S, (Wt + p.dates - 1) / p.dates) << what;
    std::set<int> phases;
    for (int64_t e = 0; e < 4; ++e) {
      const int phi = time_carry_phase(p, e);
      ASSERT_GE(phi, 0) << what;
      ASSERT_LE(phi, p.T % p.L) << what;
      phases.insert(phi);
      std::vector<int> seen(size_t(p.T), 0);  // dates covered by cross-section windows this epoch
      int padding = 0;
      for (int d = 0; d < p.dates; ++d) {
        std::vector<int> inst(size_t(p.G));
        for (int64_t s = 0; s < S; ++s) {
          const int64_t step = e * S + s;
          const TimeCarryWindow w0 = time_carry_window(p, step, d * p.G);
          const int64_t q = d * S + s;
          if (q >= Wt) {  // padding: the whole cross-section, reset, no instrument
            ++padding;
            for (int j = 0; j < p.G; ++j) {
              const TimeCarryWindow w = time_carry_window(p, step, d * p.G + j);
              EXPECT_EQ(w.instrument, -1) << what;
              EXPECT_TRUE(w.reset) << what;
            }
            continue;
          }
          // The run's windows: consecutive, in time order, from the phase; reset exactly at the epoch's start.
          EXPECT_EQ(w0.start, phi + int(q) * p.L) << what << " step " << step << " d " << d;
          EXPECT_EQ(w0.reset, s == 0) << what << " step " << step << " d " << d;
          ASSERT_GE(w0.start, 0);
          ASSERT_LE(w0.start + p.L, p.T) << what;
          for (int t = w0.start; t < w0.start + p.L; ++t) ++seen[size_t(t)];
          std::set<int> distinct;
          for (int j = 0; j < p.G; ++j) {
            const TimeCarryWindow w = time_carry_window(p, step, d * p.G + j);
            EXPECT_EQ(w.start, w0.start) << what << ": every lane of a cross-section on the same dates";
            EXPECT_EQ(w.reset, w0.reset) << what;
            ASSERT_GE(w.instrument, 0);
            ASSERT_LT(w.instrument, p.N);
            if (p.G == p.N) EXPECT_EQ(w.instrument, j) << what;
            distinct.insert(w.instrument);
            if (s == 0) inst[size_t(j)] = w.instrument;
            else EXPECT_EQ(w.instrument, inst[size_t(j)]) << what << ": a lane keeps its instrument within the epoch";
          }
          EXPECT_EQ(int(distinct.size()), p.G) << what << ": no instrument twice in a cross-section";
        }
      }
      EXPECT_EQ(padding, p.dates * S - Wt) << what;
      EXPECT_LT(padding, p.dates) << what;
      for (int t = 0; t < p.T; ++t)
        EXPECT_EQ(seen[size_t(t)], (t >= phi && t < phi + Wt * p.L) ? 1 : 0) << what << " epoch " << e << " date " << t;
    }
    if (p.T % p.L >= 3) EXPECT_GT(phases.size(), 1u) << what << ": the phase moves between epochs";
  }
}

// A pure function of (seed, step, lane): asked in any order it answers the same; another seed or another epoch
// picks other instruments.
TEST(TimeCarrySampler, PureFunctionOfSeedStepAndLane) {
  const TimeCarryParams p{11, 150, 10, 3, 4, 8}, other{11, 150, 10, 3, 4, 9};
  const int64_t S = time_carry_epoch_steps(p);
  const int B = p.dates * p.G;
  std::vector<TimeCarryWindow> forward;
  for (int64_t st = 0; st < 6 * S; ++st)
    for (int b = 0; b < B; ++b) forward.push_back(time_carry_window(p, st, b));
  for (int64_t st = 6 * S - 1; st >= 0; --st)
    for (int b = B - 1; b >= 0; --b) EXPECT_TRUE(same(time_carry_window(p, st, b), forward[size_t(st * B + b)]));
  int differ_seed = 0, differ_epoch = 0;
  for (int64_t st = 0; st < S; ++st)
    for (int b = 0; b < B; ++b) {
      differ_seed += time_carry_window(p, st, b).instrument != time_carry_window(other, st, b).instrument;
      differ_epoch += time_carry_window(p, st, b).instrument != time_carry_window(p, st + S, b).instrument;
    }
  EXPECT_GT(differ_seed, 0);
  EXPECT_GT(differ_epoch, 0);
}

// A panel with missing rows: instrument i misses the dates t with (t + i) % 9 == 0 (features filled 0, targets NaN,
// and the raw rows' presence recorded, as a prepared panel holds them).
Panel gappy_panel(int N, int T, int F, uint64_t seed) {
  Panel p = make_synthetic({N, T, F, 1, 0.1f, seed});
  p.input_rows.assign(size_t(N) * T, kRowFeatures | kRowTargets);
  for (int i = 0; i < N; ++i)
    for (int t = 0; t < T; ++t)
      if ((t + i) % 9 == 0) {
        for (int f = 0; f < F; ++f) p.x[(size_t(i) * T + t) * F + f] = 0.0f;
        p.y[size_t(i) * T + t] = std::numeric_limits<float>::quiet_NaN();
        p.input_rows[size_t(i) * T + t] = 0;
      }
  return p;
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

TEST(TimeCarrySampler, GatherReadsTheRangeInPlaceAndMasksTheBurnIn) {
  const Panel p = gappy_panel(6, 120, 3, 3);
  const int t_begin = 10, burn_in = 3;
  const TimeCarryParams tp{p.N, 100, 12, 3, 4, 21};  // the range [10, 110)
  const int B = tp.dates * tp.G, L = tp.L;
  std::vector<float> xb(size_t(B) * L * p.F), yb(size_t(B) * L);
  std::vector<unsigned char> reset(static_cast<size_t>(B), 0);
  int masked = 0, full = 0, padding = 0;
  for (int64_t step = 0; step < 3 * time_carry_epoch_steps(tp); ++step) {
    std::fill(xb.begin(), xb.end(), -7.0f);  // poisoned: every value must be written
    std::fill(yb.begin(), yb.end(), -7.0f);
    std::fill(reset.begin(), reset.end(), 7);
    gather_time_carry(tp, p, t_begin, step, burn_in, xb.data(), yb.data(), reset.data());
    for (int b = 0; b < B; ++b) {
      const TimeCarryWindow w = time_carry_window(tp, step, b);
      ASSERT_EQ(reset[size_t(b)], w.reset ? 1 : 0);
      for (int t = 0; t < L; ++t) {
        const float* xo = xb.data() + (size_t(b) * L + t) * p.F;
        const float yo = yb[size_t(b) * L + t];
        if (w.instrument < 0) {
          for (int f = 0; f < p.F; ++f) ASSERT_EQ(xo[f], 0.0f);
          ASSERT_TRUE(std::isnan(yo));
          continue;
        }
        const size_t at = size_t(w.instrument) * p.T + size_t(t_begin + w.start + t);
        for (int f = 0; f < p.F; ++f) ASSERT_EQ(xo[f], p.x[at * p.F + f]) << "step " << step << " lane " << b;
        if (w.reset && t < burn_in) ASSERT_TRUE(std::isnan(yo));
        else ASSERT_TRUE(same_float(yo, p.y[at])) << "step " << step << " lane " << b << " row " << t;
      }
      if (w.instrument < 0) ++padding;
      else (w.reset ? masked : full) += 1;
    }
  }
  EXPECT_GT(masked, 0);
  EXPECT_GT(full, 0);
  EXPECT_GT(padding, 0);  // 8 windows over 3 cross-sections: one padding slot an epoch
  // Refused before writing: a range past the panel, G > N, L > T.
  const std::vector<float> before = xb;
  EXPECT_THROW(gather_time_carry(tp, p, 30, 0, 0, xb.data(), yb.data(), reset.data()), Error);
  TimeCarryParams wide = tp;
  wide.G = 7, wide.N = 7;
  EXPECT_THROW(gather_time_carry(wide, p, 0, 0, 0, xb.data(), yb.data(), reset.data()), Error);
  TimeCarryParams longer = tp;
  longer.L = 101;
  EXPECT_THROW(gather_time_carry(longer, p, 0, 0, 0, xb.data(), yb.data(), reset.data()), Error);
  EXPECT_EQ(xb, before);
}

// With the lanes' row maps (the trainers' call): each lane's present rows first in date order and zero padding
// after, rows[b] their count and dates[b, r] their date offsets (−1 after), the targets on their dates (NaN at a
// missing one, and in the burn-in after a reset), every output poisoned before; the same windows and resets as
// without the maps.
TEST(TimeCarrySampler, GatherSkipsMissingRows) {
  const Panel p = gappy_panel(6, 120, 3, 3);
  const int t_begin = 10, burn_in = 3;
  const TimeCarryParams tp{p.N, 100, 12, 3, 4, 21};
  const int B = tp.dates * tp.G, L = tp.L;
  std::vector<float> xb(size_t(B) * L * p.F), yb(size_t(B) * L), xo(xb.size()), yo(yb.size());
  std::vector<unsigned char> reset(static_cast<size_t>(B)), reset_o(static_cast<size_t>(B));
  std::vector<int> rows(static_cast<size_t>(B)), dates(static_cast<size_t>(B) * L);
  int gaps = 0, padding = 0;
  for (int64_t step = 0; step < 2 * time_carry_epoch_steps(tp); ++step) {
    std::fill(xb.begin(), xb.end(), -7.0f);
    std::fill(yb.begin(), yb.end(), -7.0f);
    std::fill(rows.begin(), rows.end(), -7);
    std::fill(dates.begin(), dates.end(), -7);
    gather_time_carry(tp, p, t_begin, step, burn_in, xb.data(), yb.data(), reset.data(), rows.data(), dates.data());
    gather_time_carry(tp, p, t_begin, step, burn_in, xo.data(), yo.data(), reset_o.data());
    EXPECT_EQ(reset, reset_o);
    for (int b = 0; b < B; ++b) {
      const TimeCarryWindow w = time_carry_window(tp, step, b);
      int n = 0;
      for (int t = 0; t < L; ++t) {
        const float yv = yb[size_t(b) * L + t];
        const bool present = w.instrument >= 0 && (input_row(p, w.instrument, t_begin + w.start + t) & kRowFeatures);
        if (!present || (w.reset && t < burn_in)) ASSERT_TRUE(std::isnan(yv)) << "step " << step << " lane " << b;
        else ASSERT_TRUE(same_float(yv, yo[size_t(b) * L + t])) << "step " << step << " lane " << b;
        if (!present) continue;
        ASSERT_EQ(dates[size_t(b) * L + size_t(n)], t);
        for (int f = 0; f < p.F; ++f)  // present row n is date t's row
          ASSERT_EQ(xb[(size_t(b) * L + size_t(n)) * p.F + f], xo[(size_t(b) * L + t) * p.F + f]);
        ++n;
      }
      ASSERT_EQ(rows[size_t(b)], n) << "step " << step << " lane " << b;
      for (int r = n; r < L; ++r) {
        ASSERT_EQ(dates[size_t(b) * L + r], -1);
        for (int f = 0; f < p.F; ++f) ASSERT_EQ(xb[(size_t(b) * L + r) * p.F + f], 0.0f);
      }
      gaps += w.instrument >= 0 && n < L;
      padding += w.instrument < 0;
    }
  }
  EXPECT_GT(gaps, 0);
  EXPECT_GT(padding, 0);
  EXPECT_THROW(gather_time_carry(tp, p, t_begin, 0, 0, xb.data(), yb.data(), reset.data(), rows.data(), nullptr),
               Error);
}

// ---- the trainer

struct TimeSetup {
  ModelConfig mc;
  TrainConfig tc;
  Panel data;
};

// The synthetic panel, whose targets depend on each instrument's own features (so the cross-section is rankable),
// with missing rows; time batches of 4 dates × 7 of the 12 instruments, the IC loss, carried states.
TimeSetup time_setup() {
  TimeSetup s;
  s.data = gappy_panel(12, 300, 4, 5);
  s.mc.F = 4, s.mc.K = 1, s.mc.D = 32, s.mc.NL = 1, s.mc.P = 16, s.mc.N = 16, s.mc.Q = 16;
  s.tc.batch_mode = BatchMode::Time, s.tc.dates = 4, s.tc.instruments = 7, s.tc.loss = LossKind::IC;
  s.tc.L = 32, s.tc.burn_in = 8, s.tc.steps = 80, s.tc.lr = 3e-3f, s.tc.warmup = 5, s.tc.seed = 4;
  s.tc.state = StateMode::Carry;
  return s;
}

TEST(TimeCarryTraining, IcLossLearnsTheCrossSectionWithCarriedStates) {
  const TimeSetup s = time_setup();
  CpuTrainer tr(s.mc, s.tc, s.data, {}, {.compute = test::on_cpu(2)});
  const ModelConfig& c = s.mc;
  const int B = 4 * 7;
  ASSERT_EQ(tr.state().carry_ssm.size(), size_t(c.NL) * B * c.H() * c.P * c.N);
  ASSERT_EQ(tr.state().carry_conv.size(), size_t(c.NL) * B * (c.W - 1) * c.conv_dim());
  double first = 0, last = 0;
  for (int64_t i = 0; i < s.tc.steps; ++i) {
    const StepRecord st = tr.step();
    ASSERT_TRUE(std::isfinite(st.loss)) << "step " << st.step;
    ASSERT_GE(st.loss, -1.0f - 1e-5f);
    ASSERT_LE(st.loss, 1.0f + 1e-5f);
    if (i == 0) first = st.loss;
    if (i >= s.tc.steps - 10) last += st.loss / 10;
  }
  std::printf("time batches + carry, ic: loss of the first step %.4f, mean of the last 10 %.4f\n", first, last);
  EXPECT_GT(first, -0.5) << "an untrained model should not rank well already";
  EXPECT_LT(last, -0.8);
  EXPECT_LT(last, first - 0.4);
  double sum = 0;
  for (float v : tr.state().carry_ssm) {
    ASSERT_TRUE(std::isfinite(v));
    sum += std::abs(v);
  }
  EXPECT_GT(sum, 0.0) << "the lanes carry states";
}

// A lane's carried state after a window with missing dates is the stream's over the same present rows: one step of
// the trainer (the states come from the weights before its update) against a CpuStepper of the B lanes' instruments
// fed the window's L dates with the panel's presence as its mask (an absent row leaves a stream's state as it was).
// The stream fed every date (the fill rows too) ends elsewhere: what the trainer carried before the row maps.
TEST(TimeCarryTraining, StatesAfterGapsAreTheStreams) {
  for (bool reference : {true, false}) {
    const TimeSetup s = time_setup();
    CpuTrainer tr(s.mc, s.tc, s.data, {}, {.compute = reference ? test::on_cpu_reference() : test::on_cpu(2)});
    const std::vector<float> p0 = tr.state().params;
    tr.step();
    const TrainState after = tr.state();
    const int B = s.tc.dates * s.tc.instruments, L = s.tc.L;
    const Panel& p = s.data;
    const int T = p.T;  // the trainer's range: the whole panel (TrainRange {})
    const TimeCarryParams tp{p.N, T, L, s.tc.dates, s.tc.instruments, s.tc.seed};
    CpuStepper exact(tr.layout(), p0, B, {.threads = 1, .reference = true});
    CpuStepper filled(tr.layout(), p0, B, {.threads = 1, .reference = true});
    std::vector<float> x(size_t(B) * p.F), out(size_t(B) * s.mc.K);
    std::vector<uint8_t> mask(static_cast<size_t>(B)), all(static_cast<size_t>(B), 1);
    int gaps = 0;
    for (int r = 0; r < L; ++r) {
      for (int b = 0; b < B; ++b) {
        const TimeCarryWindow w = time_carry_window(tp, 0, b);
        ASSERT_TRUE(w.reset);
        const int i = w.instrument < 0 ? 0 : w.instrument, t = w.start + r;
        std::copy_n(p.x.begin() + (size_t(i) * T + t) * p.F, p.F, x.begin() + size_t(b) * p.F);
        mask[size_t(b)] = w.instrument >= 0 && (input_row(p, i, t) & kRowFeatures) ? 1 : 0;
        gaps += w.instrument >= 0 && !mask[size_t(b)];
      }
      exact.step(x.data(), mask.data(), out.data());
      filled.step(x.data(), all.data(), out.data());
    }
    ASSERT_GT(gaps, 0) << "the windows have missing dates";
    const StepState se = exact.export_state(), sf = filled.export_state();
    const std::string what = reference ? "reference" : "fast";
    EXPECT_TRUE(test::rel_l2_close(after.carry_ssm, se.ssm, 1e-4, what + " SSM states against the stream's"));
    EXPECT_TRUE(test::rel_l2_close(after.carry_conv, se.conv, 1e-5, what + " conv windows against the stream's"));
    EXPECT_FALSE(test::rel_l2_close(after.carry_ssm, sf.ssm, 1e-2, what + " (the stream over fill rows)"));
  }
}

// N steps = k steps, save, load, N − k steps, bit for bit, with k inside an epoch (S = ⌈⌊300 / 32⌋ / 4⌉ = 3 steps)
// and N across three epoch boundaries; the fast model and the reference.
TEST(TimeCarryTraining, ResumedRunContinuesBitForBit) {
  for (bool reference : {false, true}) {
    TimeSetup s = time_setup();
    if (reference) s.tc.dates = 2, s.tc.instruments = 5;  // the reference is one thread of plain loops
    const Compute compute = reference ? test::on_cpu_reference() : test::on_cpu(2);
    const int N = reference ? 8 : 11, k = 4;
    test::CarryResume r;
    test::expect_carry_resume_bitwise(s.mc, s.tc, s.data, compute, N, k, &r);
    if (HasFatalFailure()) return;
    EXPECT_EQ(r.saved.meta.train.batch_mode, BatchMode::Time);
    // Step k + 1 continues the lanes' states (it is no epoch's first step at either shape): without them it differs.
    EXPECT_NE(r.cold[0], r.straight[size_t(k)]) << (reference ? "reference" : "fast");
  }
}

}  // namespace
}  // namespace mlalpha
