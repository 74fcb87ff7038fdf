// The GPU trainer's memory estimate (train/train_plan_gpu.cpp) and the messages it gives: GPU code that runs
// without a device, so a CPU suite of the CUDA build (tests/CMakeLists.txt, *_gpu_code.cpp).
#include <gtest/gtest.h>

#include <string>

#include "model/layout.h"
#include "predict/predict.h"
#include "test_util.h"
#include "train/train_plan.h"

namespace mlalpha::test {
namespace {

// The model and batch of test_train_cpu's overfit case; the panel's shape only.
struct Shapes {
  ModelConfig mc;
  TrainConfig tc;
  struct {
    int N = 4, T = 32;
  } data;
};

Shapes overfit_setup() {
  Shapes s;
  s.mc.F = 4, s.mc.K = 1, s.mc.D = 32, s.mc.NL = 2, s.mc.P = 16, s.mc.N = 16, s.mc.Q = 16;
  s.tc.B = 4, s.tc.L = 32;
  return s;
}

// The estimate counts what the trainers allocate: 4 floats + 1 mask byte per parameter slot, the batch,
// and (GPU) the dataset copy; activations grow linearly with B·L.
TEST(TrainMemory, EstimateCountsTheBuffers) {
  const Shapes s = overfit_setup();
  const ModelLayout lay(s.mc);
  const MemoryEstimate g = estimate_gpu_training(s.mc, s.tc, s.data.N, s.data.T, 1024);
  EXPECT_EQ(g.params, double(lay.table.total()) * 17);
  EXPECT_EQ(g.dataset, double(s.data.N) * s.data.T * (s.mc.F + s.mc.K) * 4);
  EXPECT_EQ(g.batch, double(s.tc.B) * s.tc.L * (s.mc.F + s.mc.K) * 4);
  EXPECT_GT(g.activations, double(s.tc.B) * s.tc.L * s.mc.D * 4 * s.mc.NL);
  TrainConfig twice = s.tc;
  twice.B *= 2;
  const MemoryEstimate g2 = estimate_gpu_training(s.mc, twice, s.data.N, s.data.T, 1024);
  EXPECT_GT(g2.activations, 1.9 * g.activations);
  EXPECT_LT(g2.activations, 2.1 * g.activations);
  const MemoryEstimate c = estimate_cpu_training(s.mc, s.tc, s.data.N);
  EXPECT_EQ(c.params, g.params);
  EXPECT_EQ(c.dataset, 0.0);  // the CPU trainer reads the panel in place
}

// train.state = "carry" validates in mode carry: a forward model of carry_tile_rows rows (or the longest
// instrument's T rows) beside the trainer's, counted under predictions on both backends; its tile never holds more
// rows than that, however long the windows.
TEST(TrainMemory, CarryCountsTheCarryPredictionModel) {
  Shapes s = overfit_setup();
  const MemoryEstimate zero = estimate_gpu_training(s.mc, s.tc, s.data.N, s.data.T, 1024);
  const MemoryEstimate zero_cpu = estimate_cpu_training(s.mc, s.tc, s.data.N);
  s.tc.state = StateMode::Carry;
  const double rows = carry_tile_rows(s.tc, s.data.N);
  EXPECT_EQ(rows, double(kPredictTileRows));  // 4 × 32 training rows: the tile's floor
  const MemoryEstimate carry = estimate_gpu_training(s.mc, s.tc, s.data.N, s.data.T, 1024);
  const double model = carry.prediction - zero.prediction;
  EXPECT_GT(model, rows * activation_floats_per_row(s.mc, s.tc.precision) * 4);
  EXPECT_LT(model, 2.0 * rows * activation_floats_per_row(s.mc, s.tc.precision) * 4 + 64.0 * (1 << 20));
  const MemoryEstimate carry_cpu = estimate_cpu_training(s.mc, s.tc, s.data.N);
  EXPECT_EQ(zero_cpu.prediction, 0.0);
  EXPECT_GT(carry_cpu.prediction, rows * s.mc.D * 4);
  // The tile: windows of L rows fill carry_tile_rows; one window when L is longer still.
  EXPECT_EQ(carry_prediction_tile(s.tc, s.data.N, 64), kPredictTileRows / 64);
  EXPECT_EQ(carry_prediction_tile(s.tc, s.data.N, 5000), kPredictTileRows / 5000);
  EXPECT_EQ(carry_prediction_tile(s.tc, s.data.N, 40000), 1);
  s.tc.B = 512, s.tc.L = 256;  // a training batch above the floor sets the rows
  EXPECT_EQ(carry_tile_rows(s.tc, s.data.N), 512.0 * 256);
  EXPECT_EQ(carry_prediction_tile(s.tc, s.data.N, 1000), 131);
}

TEST(TrainMemory, TooLargeForTheGpuSaysHowMuch) {
  ModelConfig mc;
  mc.D = 1024, mc.NL = 8, mc.P = 64, mc.N = 128, mc.Q = 64;
  TrainConfig tc;
  tc.B = 4096, tc.L = 2048;
  const MemoryEstimate e = estimate_gpu_training(mc, tc, 100, 5000, 1024);
  const double free_bytes = 79.3 * double(1ull << 30);
  const std::string msg = error_of([&] { check_memory(e, tc, 100, 5000, free_bytes, "the GPU training step", "the GPU"); });
  EXPECT_EQ(msg.rfind("the GPU training step needs ", 0), 0u) << msg;
  EXPECT_NE(msg.find("for train.batch = 4096 × train.seq_len = 2048"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the GPU has 79.3 GiB free; reduce train.batch or train.seq_len"), std::string::npos) << msg;
  // The same model with a trading-sized batch fits.
  tc.B = 8, tc.L = 256;
  EXPECT_NO_THROW(check_memory(estimate_gpu_training(mc, tc, 100, 5000, 1024), tc, 100, 5000, free_bytes,
                               "the GPU training step", "the GPU"));
}

TEST(TrainMemory, DatasetTooLargeNamesTheDataset) {
  ModelConfig mc;
  TrainConfig tc;
  const MemoryEstimate e = estimate_gpu_training(mc, tc, 20000, 100000, 1024);  // 2e9 rows × 9 floats
  const std::string msg = error_of([&] { check_memory(e, tc, 20000, 100000, 8.0 * double(1ull << 30), "the GPU training step", "the GPU"); });
  EXPECT_NE(msg.find("dataset 67.1 GiB for 20000 instruments × 100000 steps"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train on fewer instruments"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mlalpha::test
