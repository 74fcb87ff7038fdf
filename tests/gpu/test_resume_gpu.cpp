// GPU resume (docs/checkpoints.md): 100 steps straight equal 50 steps + save_checkpoint + load into a
// fresh GpuTrainer + 50 steps, bitwise — weights, AdamW moments, counters and every step record — with
// the graph (the resumed trainer's first step runs eagerly, the rest replay a new graph) and eagerly; and a
// trainer whose graph is already captured can reload an earlier state and replay the same steps.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "core/error.h"
#include "data/synthetic.h"
#include "test_files.h"
#include "test_util.h"
#include "checkpoint/checkpoint.h"
#include "train/trainer_gpu.h"

namespace mlalpha::test {
namespace {

struct ResumeCase {
  ModelConfig mc;
  TrainConfig tc;
  Panel data;
};

ResumeCase resume_case() {
  ResumeCase r;
  r.data = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  r.mc.F = 5, r.mc.K = 1, r.mc.D = 32, r.mc.NL = 2, r.mc.P = 16, r.mc.N = 16, r.mc.Q = 16;
  r.tc.B = 4, r.tc.L = 40, r.tc.steps = 100, r.tc.lr = 2e-3f, r.tc.warmup = 10, r.tc.seed = 9;
  r.tc.log_every = 10, r.tc.burn_in = 2;
  // One Inf feature: the windows that contain it are skipped, so the skip counter is part of the state.
  r.data.x[size_t(2) * r.data.T * r.data.F + 100 * r.data.F] = std::numeric_limits<float>::infinity();
  return r;
}

void expect_same_state(const TrainState& a, const TrainState& b) {
  EXPECT_TRUE(same_bits(a.params, b.params)) << "weights differ";
  EXPECT_TRUE(same_bits(a.m, b.m)) << "exp_avg differs";
  EXPECT_TRUE(same_bits(a.v, b.v)) << "exp_avg_sq differs";
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.adam_step, b.adam_step);
  EXPECT_EQ(a.skipped_total, b.skipped_total);
}

// The records of steps [from, to] (bitwise: loss, norm, scale, lr, skip flag).
std::vector<StepRecord> records(GpuTrainer& t, int64_t from, int64_t to) {
  std::vector<StepRecord> out;
  for (int64_t s = from; s <= to; ++s) out.push_back(t.record(s));
  return out;
}

void expect_same_records(const std::vector<StepRecord>& a, const std::vector<StepRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(StepRecord)), 0)
        << "record of step " << a[i].step << " vs " << b[i].step << ": loss " << a[i].loss << " vs " << b[i].loss;
}

struct Straight {
  TrainState state;
  std::vector<StepRecord> records;  // steps 1..100
};

Straight run_straight(const ResumeCase& r, bool graph) {
  Context ctx;
  GpuTrainer t(ctx, r.mc, r.tc, r.data, {graph, 0});
  for (int i = 0; i < 100; ++i) t.step();
  return {t.state(), records(t, 1, 100)};
}

// 50 steps, a checkpoint, a fresh trainer loading it and 50 more equal 100 straight steps bitwise; in bf16
// the loaded weights' bf16 copy must be rebuilt exactly as the optimizer would have left it.
void fifty_plus_fifty(bool graph, Precision precision) {
  ResumeCase r = resume_case();
  r.tc.precision = precision;
  const Straight straight = run_straight(r, graph);
  EXPECT_GT(straight.state.skipped_total, 0) << "no step hit the Inf: the skip counter was not exercised";
  EXPECT_LT(straight.state.skipped_total, 100);

  TempDir tmp;
  const std::string path = tmp / "step50.safetensors";
  {
    Context ctx;
    GpuTrainer first(ctx, r.mc, r.tc, r.data, {graph, 0});
    for (int i = 0; i < 50; ++i) first.step();
    CheckpointMeta meta;
    meta.model = r.mc, meta.train = r.tc;
    save_checkpoint(path, first.layout(), first.state(), meta);
  }
  const Checkpoint c = load_checkpoint(path, r.mc);
  EXPECT_EQ(c.state.step, 50);
  Context ctx;
  GpuTrainer resumed(ctx, c.meta.model, c.meta.train, r.data, {graph, 0});
  resumed.load_state(c.state);
  EXPECT_EQ(resumed.steps_enqueued(), 50);
  for (int i = 0; i < 50; ++i) resumed.step();
  EXPECT_EQ(resumed.steps_enqueued(), 100);
  expect_same_records(records(resumed, 51, 100),
                      std::vector<StepRecord>(straight.records.begin() + 50, straight.records.end()));
  EXPECT_THROW(resumed.record(50), Error);  // before the resumed range: not in this trainer's ring
  expect_same_state(resumed.state(), straight.state);
}

class ResumeGpu : public ::testing::TestWithParam<bool> {};  // parameter: graph replay on/off

TEST_P(ResumeGpu, FiftyPlusFiftyEqualsHundredBitwise) { fifty_plus_fifty(GetParam(), Precision::FP32); }
TEST(ResumeGpuBf16, FiftyPlusFiftyEqualsHundredBitwise) { fifty_plus_fifty(true, Precision::BF16); }

INSTANTIATE_TEST_SUITE_P(GraphAndEager, ResumeGpu, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "graph" : "eager"; });

TEST(ResumeGpuReload, CapturedGraphTrainerReplaysFromAnEarlierState) {
  const ResumeCase r = resume_case();
  const Straight straight = run_straight(r, true);
  Context ctx;
  GpuTrainer t(ctx, r.mc, r.tc, r.data, {true, 0});
  for (int i = 0; i < 50; ++i) t.step();
  const TrainState s50 = t.state();
  for (int i = 0; i < 30; ++i) t.step();  // the graph is captured and replayed by now
  t.load_state(s50);                       // same buffers: the captured graph stays valid
  EXPECT_EQ(t.steps_enqueued(), 50);
  for (int i = 0; i < 50; ++i) t.step();
  expect_same_records(records(t, 51, 100), std::vector<StepRecord>(straight.records.begin() + 50, straight.records.end()));
  expect_same_state(t.state(), straight.state);
}

TEST(ResumeGpuReload, LoadStateRejectsAnotherSeedOrSize) {
  const ResumeCase r = resume_case();
  Context ctx;
  GpuTrainer t(ctx, r.mc, r.tc, r.data, {true, 0});
  TrainState s = t.state();
  EXPECT_EQ(s.step, 0);
  EXPECT_EQ(s.seed, r.tc.seed);
  s.seed += 1;
  EXPECT_THROW(t.load_state(s), Error);
  s = t.state();
  s.params.pop_back();
  EXPECT_THROW(t.load_state(s), Error);
}

}  // namespace
}  // namespace mlalpha::test
