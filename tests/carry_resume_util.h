#pragma once
// A CPU carry trainer stopped and resumed (test_carry_training's windows, test_carry_time's time batches): N steps
// straight against k steps, save_checkpoint, load_checkpoint into a new trainer, N − k steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "mlalpha/compute.h"
#include "test_files.h"
#include "train/trainer_cpu.h"

namespace mlalpha::test {

struct CarryResume {
  Checkpoint saved;            // the state after k steps, saved and loaded back
  std::vector<float> straight; // (N) the losses of the run trained straight through
  std::vector<float> cold;     // (N − k) the losses of steps k + 1 .. N from the saved weights with zeroed states
};

// Asserts every resumed step's loss and the final weights, moments and carried states bit for bit against the
// straight run; `out` gets what the caller checks beside (the checkpoint's metadata, the cold run's losses).
inline void expect_carry_resume_bitwise(const ModelConfig& mc, const TrainConfig& tc, const Panel& data,
                                        const Compute& compute, int N, int k, CarryResume* out) {
  CpuTrainer whole(mc, tc, data, {}, {.compute = compute});
  ASSERT_GT(whole.state().carry_ssm.size(), 0u);
  out->straight.clear();
  for (int i = 0; i < N; ++i) out->straight.push_back(whole.step().loss);
  TempDir dir;
  {
    CpuTrainer first(mc, tc, data, {}, {.compute = compute});
    for (int i = 0; i < k; ++i) ASSERT_EQ(first.step().loss, out->straight[size_t(i)]);
    CheckpointMeta meta{mc, tc, {}, {}, {}, {}};
    save_checkpoint(dir / "last.safetensors", first.layout(), first.state(), meta);
  }
  out->saved = load_checkpoint(dir / "last.safetensors", mc);
  EXPECT_EQ(out->saved.meta.train.state, StateMode::Carry);
  CpuTrainer second(mc, tc, data, {}, {.compute = compute});
  second.load_state(out->saved.state);
  for (int i = k; i < N; ++i) ASSERT_EQ(second.step().loss, out->straight[size_t(i)]) << "step " << i + 1;
  const TrainState a = whole.state(), b = second.state();
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.carry_conv, b.carry_conv);
  EXPECT_EQ(a.carry_ssm, b.carry_ssm);
  // The same weights without the carried states: the caller checks that they give other steps.
  TrainState stateless = out->saved.state;
  std::fill(stateless.carry_ssm.begin(), stateless.carry_ssm.end(), 0.0f);
  std::fill(stateless.carry_conv.begin(), stateless.carry_conv.end(), 0.0f);
  CpuTrainer third(mc, tc, data, {}, {.compute = compute});
  third.load_state(stateless);
  out->cold.clear();
  for (int i = k; i < N; ++i) out->cold.push_back(third.step().loss);
}

}  // namespace mlalpha::test
