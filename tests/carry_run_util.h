#pragma once
// The small stateful-training run (train.state = "carry") that test_carry_run (CPU) and test_carry_run_gpu train
// through the public run API, and the check that two runs' `last` checkpoints hold the same state.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "mlalpha/run.h"
#include "test_util.h"

namespace mlalpha::test {

// A long-memory synthetic panel of 5 × 400 (data.memory 50), d_model 16, 3 windows of 16 a step, 24 steps,
// validated every 8, on `device` ("cpu": two threads), written to out_dir; `extra` overrides come last.
inline RunConfig carry_run_config(const std::filesystem::path& out_dir, const std::string& device,
                                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> ov = {"run.device=\"" + device + "\"", "data.instruments=5", "data.timesteps=400",
                                 "data.n_features=3", "data.memory=50", "model.d_model=16", "model.head_dim=8",
                                 "train.batch=3", "train.seq_len=16", "train.steps=24", "train.warmup=2",
                                 "train.log_every=4", "run.eval_every=8", "train.state=\"carry\"",
                                 "run.out_dir=\"" + out_dir.string() + "\""};
  if (device == "cpu") ov.push_back("run.threads=2");
  ov.insert(ov.end(), extra.begin(), extra.end());
  return parse_run_config("", "test", ov);
}

// The state two checkpoints hold (weights, moments, the lanes' carried states): equal bit for bit, and carried.
inline void expect_same_carry_state(const std::filesystem::path& a, const std::filesystem::path& b) {
  const Checkpoint x = load_checkpoint(a.string()), y = load_checkpoint(b.string());
  EXPECT_EQ(x.state.step, y.state.step) << a << " vs " << b;
  EXPECT_TRUE(same_bits(x.state.params, y.state.params)) << a << " vs " << b;
  EXPECT_TRUE(same_bits(x.state.m, y.state.m)) << a << " vs " << b;
  EXPECT_TRUE(same_bits(x.state.v, y.state.v)) << a << " vs " << b;
  ASSERT_FALSE(x.state.carry_ssm.empty()) << a << ": a carry run's last checkpoint holds its lanes' states";
  EXPECT_TRUE(same_bits(x.state.carry_ssm, y.state.carry_ssm)) << a << " vs " << b;
  EXPECT_TRUE(same_bits(x.state.carry_conv, y.state.carry_conv)) << a << " vs " << b;
}

}  // namespace mlalpha::test
