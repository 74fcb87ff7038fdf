// Stateful training (train.state = "carry", docs/decisions.md "Stateful training"):
// - the sampler of consecutive windows (data/carry_sampler.h): every window of an epoch once, each lane's windows
//   of an instrument consecutive and in time order over its present rows, resets exactly where a lane's state has
//   no predecessor, a pure function of (seed, step, lane), the burn-in masked after a reset only;
// - the CPU trainer carries its lanes' states, and a run resumed from a saved checkpoint continues bit for bit;
// - the setting: parsed, validated with the key and the values named, recorded in a checkpoint only when it is
//   "carry" (a zero-state checkpoint's metadata stays as it was), accepted with time batches (test_carry_time).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "carry_resume_util.h"
#include "compute_util.h"
#include "checkpoint/config_json.h"
#include "core/error.h"
#include "data/carry_sampler.h"
#include "data/synthetic.h"
#include "mlalpha/config.h"
#include "test_files.h"
#include "train/trainer_cpu.h"

namespace mlalpha {
namespace {

// A panel whose instruments have different numbers of present rows: instrument i misses the rows t with
// (t + i) % (i + 2) == 0 (none for the last one), and instrument 1 has fewer present rows than one window.
Panel ragged_panel(int N, int T, int F) {
  Panel p = make_synthetic({N, T, F, 1, 0.1f, 21});
  p.input_rows.assign(size_t(N) * T, kRowFeatures | kRowTargets);
  for (int i = 0; i + 1 < N; ++i)
    for (int t = 0; t < T; ++t)
      if ((t + i) % (i + 2) == 0 || (i == 1 && t >= 6)) p.input_rows[size_t(i) * T + t] = 0;
  return p;
}

struct Visit {
  int64_t step;
  int lane;
  CarryWindow w;
};

// Every window of epochs 0 .. epochs − 1, lane by lane in step order.
std::vector<std::vector<Visit>> lanes_of(const CarrySampler& s, int epochs) {
  std::vector<std::vector<Visit>> lanes(size_t(s.lanes()));
  for (int64_t step = 0; step < epochs * s.epoch_steps(); ++step)
    for (int b = 0; b < s.lanes(); ++b) lanes[size_t(b)].push_back({step, b, s.window(step, b)});
  return lanes;
}

TEST(CarrySampler, EveryWindowOfAnEpochOnceOverThePresentRows) {
  const Panel p = ragged_panel(7, 90, 2);
  const int B = 4, L = 8;
  const CarrySampler s(p, 5, 85, B, L, 13);
  int64_t W = 0;
  for (int i = 0; i < p.N; ++i) {
    for (int t : s.rows(i)) {
      EXPECT_TRUE(t >= 5 && t < 85);
      EXPECT_NE(input_row(p, i, t) & kRowFeatures, 0) << "instrument " << i << " row " << t << " is not present";
    }
    W += int64_t(s.rows(i).size()) / L;
  }
  EXPECT_LT(s.rows(1).size(), size_t(L));  // instrument 1 has no window
  ASSERT_EQ(s.windows_per_epoch(), W);
  ASSERT_EQ(s.epoch_steps(), (W + B - 1) / B);
  for (int e = 0; e < 3; ++e) {
    // (instrument, present-row index) → times visited in epoch e
    std::map<std::pair<int, int>, int> seen;
    int padding = 0;
    for (int64_t step = e * s.epoch_steps(); step < (e + 1) * s.epoch_steps(); ++step)
      for (int b = 0; b < B; ++b) {
        const CarryWindow w = s.window(step, b);
        if (w.instrument < 0) {
          ++padding;
          continue;
        }
        ASSERT_GE(w.first, 0);
        ASSERT_LE(w.first + L, int(s.rows(w.instrument).size()));
        for (int k = 0; k < L; ++k) ++seen[{w.instrument, w.first + k}];
      }
    EXPECT_EQ(padding, B * s.epoch_steps() - W) << "epoch " << e;
    EXPECT_LT(padding, B);
    for (const auto& [row, n] : seen) EXPECT_EQ(n, 1) << "epoch " << e << " instrument " << row.first << " row " << row.second;
    // Per instrument: ⌊n_i / L⌋ windows of consecutive rows from a phase in [0, n_i mod L].
    for (int i = 0; i < p.N; ++i) {
      const int n = int(s.rows(i).size()), w = n / L;
      std::vector<int> idx;
      for (const auto& [row, _] : seen)
        if (row.first == i) idx.push_back(row.second);
      ASSERT_EQ(int(idx.size()), w * L) << "epoch " << e << " instrument " << i;
      if (w == 0) continue;
      EXPECT_LE(idx.front(), n % L);
      EXPECT_EQ(idx.back() - idx.front() + 1, w * L);  // one run: every row from the phase on, once
    }
  }
}

TEST(CarrySampler, LanesWalkInTimeOrderAndResetWhereTheyMove) {
  const Panel p = ragged_panel(9, 120, 2);
  const int L = 6;
  for (int B : {1, 3, 5}) {
    const CarrySampler s(p, 0, 120, B, L, 4);
    int resets = 0, carried = 0;
    for (const auto& lane : lanes_of(s, 3))
      for (size_t k = 0; k < lane.size(); ++k) {
        const Visit& v = lane[k];
        const bool epoch_start = v.step % s.epoch_steps() == 0;
        if (v.w.instrument < 0) {
          EXPECT_TRUE(v.w.reset);
          continue;
        }
        if (epoch_start) {
          EXPECT_TRUE(v.w.reset) << "B " << B << " step " << v.step;
        } else {
          const CarryWindow& prev = lane[k - 1].w;
          // The state is carried exactly when the previous window was of the same instrument, and then the
          // window starts where that one ended (consecutive present rows, in time order).
          const bool same = prev.instrument == v.w.instrument;
          EXPECT_EQ(v.w.reset, !same) << "B " << B << " step " << v.step << " lane " << v.lane;
          if (same) EXPECT_EQ(v.w.first, prev.first + L) << "B " << B << " step " << v.step << " lane " << v.lane;
          if (same) {
            EXPECT_LT(s.rows(v.w.instrument)[size_t(prev.first + L - 1)], s.rows(v.w.instrument)[size_t(v.w.first)]);
          }
        }
        (v.w.reset ? resets : carried) += 1;
      }
    EXPECT_GT(carried, resets) << "B " << B << ": most windows should continue a state";
  }
}

// A pure function of (seed, step, lane): a fresh sampler asked in any order answers the same; another seed or
// another epoch orders the instruments otherwise.
TEST(CarrySampler, PureFunctionOfSeedStepAndLane) {
  const Panel p = ragged_panel(9, 120, 2);
  const CarrySampler a(p, 0, 120, 3, 5, 8), b(p, 0, 120, 3, 5, 8), other(p, 0, 120, 3, 5, 9);
  const int64_t S = a.epoch_steps();
  const std::vector<int64_t> steps{7 * S + 2, 0, S - 1, 3 * S, 1, 7 * S + 2, 2 * S + 1};
  auto same = [](const CarryWindow& x, const CarryWindow& y) {
    return x.instrument == y.instrument && x.first == y.first && x.reset == y.reset;
  };
  for (int64_t st : steps)
    for (int lane = 0; lane < 3; ++lane) EXPECT_TRUE(same(a.window(st, lane), b.window(st, lane))) << st << " " << lane;
  for (int64_t st = 0; st < 8 * S; ++st)
    for (int lane = 0; lane < 3; ++lane) EXPECT_TRUE(same(a.window(st, lane), b.window(st, lane))) << st << " " << lane;
  int differ_seed = 0, differ_epoch = 0;
  for (int64_t st = 0; st < S; ++st)
    for (int lane = 0; lane < 3; ++lane) {
      differ_seed += !same(a.window(st, lane), other.window(st, lane));
      differ_epoch += !same(a.window(st, lane), a.window(st + S, lane));
    }
  EXPECT_GT(differ_seed, 0);
  EXPECT_GT(differ_epoch, 0);
}

// The batch holds each window's present rows; burn-in masks the targets of a window after a reset only; padding
// windows are zeros with no target.
TEST(CarrySampler, GatherCopiesThePresentRowsAndMasksTheBurnIn) {
  const Panel p = ragged_panel(5, 60, 3);
  const int B = 4, L = 7, burn_in = 2;
  const CarrySampler s(p, 0, 60, B, L, 2);
  std::vector<float> xb(size_t(B) * L * p.F), yb(size_t(B) * L);
  std::vector<unsigned char> reset(B);
  int masked_windows = 0, full_windows = 0, padding = 0;
  for (int64_t step = 0; step < 2 * s.epoch_steps(); ++step) {
    s.gather(step, p, burn_in, xb.data(), yb.data(), reset.data());
    for (int b = 0; b < B; ++b) {
      const CarryWindow w = s.window(step, b);
      EXPECT_EQ(reset[size_t(b)], w.reset ? 1 : 0);
      for (int t = 0; t < L; ++t) {
        const float got_y = yb[size_t(b) * L + t];
        if (w.instrument < 0) {
          EXPECT_TRUE(std::isnan(got_y));
          for (int f = 0; f < p.F; ++f) EXPECT_EQ(xb[(size_t(b) * L + t) * p.F + f], 0.0f);
          continue;
        }
        const int row = s.rows(w.instrument)[size_t(w.first + t)];
        const size_t at = size_t(w.instrument) * p.T + row;
        for (int f = 0; f < p.F; ++f) ASSERT_EQ(xb[(size_t(b) * L + t) * p.F + f], p.x[at * p.F + f]);
        if (w.reset && t < burn_in) EXPECT_TRUE(std::isnan(got_y));
        else EXPECT_EQ(got_y, p.y[at]);
      }
      if (w.instrument < 0) ++padding;
      else (w.reset ? masked_windows : full_windows) += 1;
    }
  }
  EXPECT_GT(masked_windows, 0);
  EXPECT_GT(full_windows, 0);
}

TEST(CarrySampler, RefusesARangeWithoutAWholeWindow) {
  const Panel p = ragged_panel(3, 40, 2);
  try {
    CarrySampler(p, 0, 10, 2, 12, 1);
    FAIL() << "a range of 10 steps gave windows of 12";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.seq_len = 12"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CarrySampler::check_range(p, 0, 10, 12), Error);
  EXPECT_NO_THROW(CarrySampler::check_range(p, 0, 40, 12));
  // Instrument 1 has fewer than 7 present rows, instrument 2 (the last) all of them: the check finds it.
  EXPECT_NO_THROW(CarrySampler::check_range(p, 0, 40, 40));
  EXPECT_THROW(CarrySampler::check_range(p, 0, 39, 40), Error);
}

// ---- the trainer

struct CarrySetup {
  ModelConfig mc;
  TrainConfig tc;
  Panel data;
};

CarrySetup carry_setup() {
  CarrySetup s;
  s.data = ragged_panel(6, 160, 4);
  s.mc.F = 4, s.mc.K = 1, s.mc.D = 16, s.mc.NL = 2, s.mc.P = 8, s.mc.N = 8, s.mc.Q = 8;
  s.tc.B = 3, s.tc.L = 12, s.tc.steps = 40, s.tc.lr = 3e-3f, s.tc.warmup = 3, s.tc.seed = 5, s.tc.burn_in = 2;
  s.tc.state = StateMode::Carry;
  return s;
}

// The lanes carry their states: after a step the trainer's state holds them (nonzero, finite), and a step's
// windows that continue a lane start from them.
TEST(CarryTraining, TheStateHoldsTheLanesCarriedStates) {
  const CarrySetup s = carry_setup();
  CpuTrainer tr(s.mc, s.tc, s.data, {}, {.compute = test::on_cpu(2)});
  EXPECT_TRUE(std::all_of(tr.state().carry_ssm.begin(), tr.state().carry_ssm.end(), [](float v) { return v == 0; }));
  tr.step();
  const TrainState st = tr.state();
  const ModelConfig& c = s.mc;
  EXPECT_EQ(st.carry_conv.size(), size_t(c.NL) * 3 * (c.W - 1) * c.conv_dim());
  EXPECT_EQ(st.carry_ssm.size(), size_t(c.NL) * 3 * c.H() * c.P * c.N);
  double sum = 0;
  for (float v : st.carry_ssm) {
    ASSERT_TRUE(std::isfinite(v));
    sum += std::abs(v);
  }
  EXPECT_GT(sum, 0.0);
  // Zero-state training holds none.
  CarrySetup z = carry_setup();
  z.tc.state = StateMode::Zero;
  CpuTrainer zt(z.mc, z.tc, z.data, {}, {.compute = test::on_cpu(2)});
  zt.step();
  EXPECT_TRUE(zt.state().carry_ssm.empty());
  EXPECT_TRUE(zt.state().carry_conv.empty());
}

// Train N steps, against train k, save the checkpoint, load it into a new trainer, train N − k: the same bytes
// (weights, moments, carried states), for the fast model and the reference one, with k inside an epoch.
TEST(CarryTraining, ResumedRunContinuesBitForBit) {
  for (bool reference : {false, true}) {
    const CarrySetup s = carry_setup();
    const Compute compute = reference ? test::on_cpu_reference() : test::on_cpu(2);
    const int N = 14, k = 5;
    test::CarryResume r;
    test::expect_carry_resume_bitwise(s.mc, s.tc, s.data, compute, N, k, &r);
    if (HasFatalFailure()) return;
    // Without the carried states the same weights give other steps: the states are part of what is resumed.
    EXPECT_FALSE(std::equal(r.cold.begin(), r.cold.end(), r.straight.begin() + k)) << (reference ? "reference" : "fast");
  }
}

TEST(CarryTraining, LoadStateRefusesAMismatchedState) {
  const CarrySetup s = carry_setup();
  CpuTrainer carry(s.mc, s.tc, s.data, {}, {.compute = test::on_cpu(1)});
  carry.step();
  TrainState st = carry.state();
  CarrySetup z = carry_setup();
  z.tc.state = StateMode::Zero;
  CpuTrainer zero(z.mc, z.tc, z.data, {}, {.compute = test::on_cpu(1)});
  try {
    zero.load_state(st);
    FAIL() << "a zero-state trainer took carried states";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.state = 'carry'"), std::string::npos) << e.what();
  }
  TrainState none = st;
  none.carry_conv.clear();
  none.carry_ssm.clear();
  try {
    carry.load_state(none);
    FAIL() << "a carry trainer resumed from a state of step 1 without carried states";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no carried states"), std::string::npos) << e.what();
  }
  none.step = none.adam_step = none.skipped_total = 0;  // train.init's starting point: the lanes start from zero
  EXPECT_NO_THROW(carry.load_state(none));
  TrainState torn = st;
  torn.carry_ssm.pop_back();
  EXPECT_THROW(carry.load_state(torn), Error);
}

// ---- the setting

TEST(CarrySetting, ParsedValidatedAndRecorded) {
  EXPECT_EQ(parse_run_config("", "t").train.state, StateMode::Zero);
  const RunConfig c = parse_run_config("[train]\nstate = \"carry\"\n", "t.toml");
  EXPECT_EQ(c.train.state, StateMode::Carry);
  EXPECT_EQ(parse_run_config(to_toml(c), "back").train.state, StateMode::Carry);
  try {
    parse_run_config("[train]\nstate = \"warm\"\n", "t.toml");
    FAIL() << "train.state = 'warm' accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("state"), std::string::npos) << m;
    EXPECT_NE(m.find("'zero', 'carry'"), std::string::npos) << m;
  }
  TrainConfig t;  // time batches carry too (test_carry_time)
  t.state = StateMode::Carry;
  t.batch_mode = BatchMode::Time;
  EXPECT_NO_THROW(t.validate());
  // The checkpoint's train_config: a zero-state one without the field (its bytes as before the setting), a carry
  // one with it, both read back.
  TrainConfig zero;
  EXPECT_EQ(to_json(zero).find("state"), std::string::npos);
  TrainConfig carry;
  carry.state = StateMode::Carry;
  EXPECT_NE(to_json(carry).find("\"state\":\"carry\""), std::string::npos) << to_json(carry);
  EXPECT_EQ(train_config_from_json(to_json(carry), "t").state, StateMode::Carry);
  EXPECT_EQ(train_config_from_json(to_json(zero), "t").state, StateMode::Zero);
  EXPECT_THROW(train_config_from_json("{\"state\": \"warm\"}", "t"), Error);
}

}  // namespace
}  // namespace mlalpha
