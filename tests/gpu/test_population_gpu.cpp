// Populations on the GPU (DESIGN section 7): every member of one captured step ends bitwise where the same
// model trained alone ends — weights, AdamW moments, counters and step records — eager and graph-replayed,
// with swept optimiser settings, members on different training panels (walk-forward folds), a NaN batch in
// one member only, and a member frozen part-way (its early stop). A population too large is refused before
// anything is allocated, saying how many members fit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "data/synthetic.h"
#include "test_util.h"
#include "train/population_trainer.h"
#include "train/trainer_gpu.h"

namespace mlalpha::test {
namespace {

ModelConfig small_model() {
  ModelConfig mc;
  mc.F = 5; mc.K = 1; mc.D = 32; mc.NL = 2; mc.P = 16; mc.G = 1; mc.N = 16; mc.Q = 16;
  return mc;
}

TrainConfig small_train(int steps) {
  TrainConfig tc;
  tc.B = 4; tc.L = 40; tc.steps = steps; tc.lr = 1e-3f; tc.warmup = 5; tc.seed = 9; tc.log_every = 10; tc.burn_in = 2;
  return tc;
}

// Four members that differ in every per-member setting of the step.
std::vector<TrainConfig> swept(int steps) {
  std::vector<TrainConfig> out;
  for (int m = 0; m < 4; ++m) {
    TrainConfig t = small_train(steps);
    t.seed = 9 + uint64_t(m);
    t.lr = 1e-3f * float(1 + m);
    t.weight_decay = 0.01f * float(m);
    t.clip = m == 2 ? 0.0f : 0.5f + 0.25f * float(m);
    t.warmup = 2 * m;
    t.schedule = m == 3 ? Schedule::Constant : Schedule::Cosine;
    out.push_back(t);
  }
  return out;
}

// The members with these settings, all on one panel.
std::vector<PopulationMember> on_panel(const std::vector<TrainConfig>& tcs, const Panel& data) {
  std::vector<PopulationMember> pm;
  for (const TrainConfig& t : tcs) pm.push_back({t, &data});
  return pm;
}

struct Trained {
  TrainState state;
  std::vector<StepRecord> records;  // steps 1..steps
};

Trained solo(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, int steps, bool graph) {
  Context ctx;
  GpuTrainer tr(ctx, mc, tc, data, {graph, 0});
  for (int i = 0; i < steps; ++i) tr.step();
  Trained t;
  for (int s = 1; s <= steps; ++s) t.records.push_back(tr.record(s));
  t.state = tr.state();
  return t;
}

void expect_same(const TrainState& a, const TrainState& b, const std::string& what) {
  ASSERT_EQ(a.params.size(), b.params.size()) << what;
  EXPECT_EQ(std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)), 0) << what << ": weights";
  EXPECT_EQ(std::memcmp(a.m.data(), b.m.data(), a.m.size() * sizeof(float)), 0) << what << ": AdamW m";
  EXPECT_EQ(std::memcmp(a.v.data(), b.v.data(), a.v.size() * sizeof(float)), 0) << what << ": AdamW v";
  EXPECT_EQ(a.step, b.step) << what;
  EXPECT_EQ(a.adam_step, b.adam_step) << what;
  EXPECT_EQ(a.skipped_total, b.skipped_total) << what;
}

void expect_same_records(const std::vector<StepRecord>& a, const std::vector<StepRecord>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(StepRecord)), 0) << what << ": record of step " << i + 1;
}

void check_members_equal_solo(bool graph, Precision precision = Precision::FP32) {
  const ModelConfig mc = small_model();
  const Panel data = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  const int steps = 30;
  auto tcs = swept(steps);
  for (TrainConfig& t : tcs) t.precision = precision;
  Context ctx;
  const std::vector<PopulationMember> pm = on_panel(tcs, data);
  PopulationTrainer pop(ctx, mc, pm, {graph, 0});
  for (int i = 0; i < steps; ++i) pop.step();
  for (int m = 0; m < pop.members(); ++m) {
    const std::string what =
        std::string(graph ? "graph" : "eager") + " " + to_string(precision) + ", member " + std::to_string(m);
    const Trained alone = solo(mc, tcs[size_t(m)], data, steps, graph);
    std::vector<StepRecord> recs;
    for (int s = 1; s <= steps; ++s) recs.push_back(pop.record(m, s));
    expect_same(pop.state(m), alone.state, what);
    expect_same_records(recs, alone.records, what);
  }
  // The members really differ (a population of copies would pass the comparisons above too).
  EXPECT_NE(pop.params(0), pop.params(1));
  EXPECT_NE(pop.record(0, steps).lr, pop.record(3, steps).lr);
}

TEST(PopulationGpu, MembersEqualSoloRunsBitwiseGraph) { check_members_equal_solo(true); }
TEST(PopulationGpu, MembersEqualSoloRunsBitwiseEager) { check_members_equal_solo(false); }
// bf16: each member's bf16 weight copy (written by the shared AdamW launch) is its own, as alone.
TEST(PopulationGpu, MembersEqualSoloRunsBitwiseBf16) { check_members_equal_solo(true, Precision::BF16); }

// Members on their own training panels (walk-forward folds of different lengths); member 1's panel has a
// NaN feature, so its batches that touch it are skipped — its alone, as in its solo run.
TEST(PopulationGpu, MembersOnTheirOwnPanelsAndANanBatchStaysInItsMember) {
  const ModelConfig mc = small_model();
  const Panel a = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  Panel b = make_synthetic({6, 220, 5, 1, 0.1f, 22});
  for (int t = 0; t < b.T; t += 3) b.x[(size_t(2) * b.T + size_t(t)) * b.F + 1] = std::numeric_limits<float>::quiet_NaN();
  const int steps = 25;
  TrainConfig t0 = small_train(steps), t1 = small_train(steps);
  t1.seed = 31;
  Context ctx;
  PopulationTrainer pop(ctx, mc, {{t0, &a}, {t1, &b}, {t0, &b}});
  for (int i = 0; i < steps; ++i) pop.step();
  const Trained s0 = solo(mc, t0, a, steps, true), s1 = solo(mc, t1, b, steps, true), s2 = solo(mc, t0, b, steps, true);
  expect_same(pop.state(0), s0.state, "member 0 (panel a)");
  expect_same(pop.state(1), s1.state, "member 1 (panel b)");
  expect_same(pop.state(2), s2.state, "member 2 (panel b, member 0's seed)");
  EXPECT_EQ(pop.state(0).skipped_total, 0);
  EXPECT_GT(s1.state.skipped_total, 0) << "the NaN feature never reached a batch: the test proves nothing";
  EXPECT_LT(s1.state.skipped_total, steps);
}

// Freezing member 1 after 12 steps leaves it exactly where a 12-step solo run ends, while the others go on
// to equal their 30-step solo runs (the step is captured again without member 1's forward and backward).
TEST(PopulationGpu, FrozenMemberKeepsItsStateOthersGoOn) {
  const ModelConfig mc = small_model();
  const Panel data = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  const int steps = 30;
  const auto tcs = swept(steps);
  Context ctx;
  const std::vector<PopulationMember> pm = on_panel(tcs, data);
  PopulationTrainer pop(ctx, mc, pm);
  for (int i = 0; i < 12; ++i) pop.step();
  pop.freeze(1);
  EXPECT_TRUE(pop.frozen(1));
  for (int i = 12; i < steps; ++i) pop.step();
  EXPECT_EQ(pop.steps_enqueued(1), 12);
  EXPECT_EQ(pop.steps_enqueued(0), steps);
  expect_same(pop.state(1), solo(mc, tcs[1], data, 12, true).state, "frozen member 1");
  for (int m : {0, 2, 3}) expect_same(pop.state(m), solo(mc, tcs[size_t(m)], data, steps, true).state, "member " + std::to_string(m));
}

// A population stopped after 12 steps and continued by a fresh one from every member's state (load_state)
// ends bitwise where the uninterrupted 30 steps end: weights, moments, counters and the records after it.
TEST(PopulationGpu, ResumedFromMemberStatesEqualsUninterrupted) {
  const ModelConfig mc = small_model();
  const Panel data = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  const int steps = 30;
  const auto tcs = swept(steps);
  const std::vector<PopulationMember> pm = on_panel(tcs, data);
  Context ctx;
  PopulationTrainer whole(ctx, mc, pm);
  for (int i = 0; i < steps; ++i) whole.step();
  std::vector<TrainState> at12;
  {
    PopulationTrainer first(ctx, mc, pm);
    for (int i = 0; i < 12; ++i) first.step();
    for (int m = 0; m < first.members(); ++m) at12.push_back(first.state(m));
  }
  PopulationTrainer resumed(ctx, mc, pm);
  for (int m = 0; m < resumed.members(); ++m) resumed.load_state(m, at12[size_t(m)]);
  for (int i = 12; i < steps; ++i) resumed.step();
  for (int m = 0; m < resumed.members(); ++m) {
    const std::string what = "member " + std::to_string(m);
    expect_same(resumed.state(m), whole.state(m), what);
    for (int s = 13; s <= steps; ++s) {
      const StepRecord a = resumed.record(m, s), b = whole.record(m, s);
      EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << what << ", step " << s;
    }
  }
  try {
    TrainState other = at12[0];
    other.seed += 100;
    resumed.load_state(0, other);
    FAIL() << "a state of another seed was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seed"), std::string::npos) << e.what();
  }
}

TEST(PopulationGpu, TooLargeIsRefusedSayingHowManyFit) {
  ModelConfig mc = small_model();
  mc.D = 1024; mc.NL = 8; mc.P = 64; mc.N = 64;
  const Panel data = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  const std::vector<PopulationMember> pm(20000, PopulationMember{small_train(10), &data});
  Context ctx;
  try {
    PopulationTrainer pop(ctx, mc, pm);
    FAIL() << "a population of 20000 L-sized members was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("a population of 20000 members needs"), std::string::npos) << m;
    EXPECT_NE(m.find("members would fit"), std::string::npos) << m;
  }
}

TEST(PopulationGpu, MembersWithAnotherStepShapeAreRefused) {
  const ModelConfig mc = small_model();
  const Panel data = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  TrainConfig other = small_train(10);
  other.L = 48;
  Context ctx;
  try {
    PopulationTrainer pop(ctx, mc, {{small_train(10), &data}, {other, &data}});
    FAIL() << "members of two step shapes were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("population member 1: the batch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlalpha::test
