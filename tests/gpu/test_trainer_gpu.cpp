// The GPU-resident training step (DESIGN section 2): graph replay equals eager bitwise, same seed gives
// the same weights, it matches the CPU trainer, a non-finite batch is skipped, and it overfits.
#include <algorithm>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "compute_util.h"
#include "data/synthetic.h"
#include "model/layer_shapes.h"
#include "test_util.h"
#include "tolerances.h"
#include "train/train_plan.h"
#include "train/trainer_cpu.h"
#include "train/trainer_gpu.h"

namespace mlalpha::test {
namespace {

struct TrainCase {
  ModelConfig mc;
  TrainConfig tc;
  Panel data;
};

TrainCase small_case(int steps) {
  TrainCase s;
  s.data = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  s.mc.F = 5; s.mc.K = 1; s.mc.D = 32; s.mc.NL = 2; s.mc.P = 16; s.mc.G = 1; s.mc.N = 16; s.mc.Q = 16;
  s.tc.B = 4; s.tc.L = 40; s.tc.steps = steps; s.tc.lr = 1e-3f; s.tc.warmup = std::min(5, steps - 1); s.tc.seed = 9;
  s.tc.log_every = 10; s.tc.burn_in = 2;
  return s;
}

std::vector<float> train_gpu(const TrainCase& s, bool graph, int64_t steps) {
  Context ctx;
  GpuTrainer tr(ctx, s.mc, s.tc, s.data, {graph, 0});
  for (int64_t i = 0; i < steps; ++i) tr.step();
  return tr.params();
}

TEST(TrainerGpu, GraphReplayEqualsEagerBitwise) {
  const TrainCase s = small_case(100);
  const auto eager = train_gpu(s, false, 100);
  const auto graph = train_gpu(s, true, 100);
  ASSERT_EQ(eager.size(), graph.size());
  EXPECT_EQ(std::memcmp(eager.data(), graph.data(), eager.size() * sizeof(float)), 0);
}

// bf16 keeps DESIGN section 2's reproducibility: eager equals graph replay bitwise, a second run equals the
// first, and the weights differ from the fp32 run's (the bf16 path is taken) while staying close to them.
TEST(TrainerGpu, Bf16ReproducibleAndCloseToFp32) {
  TrainCase s = small_case(60);
  s.tc.precision = Precision::BF16;
  const auto eager = train_gpu(s, false, 60), graph = train_gpu(s, true, 60), again = train_gpu(s, true, 60);
  EXPECT_TRUE(same_bits(eager, graph)) << "bf16: graph replay differs from the eager run";
  EXPECT_TRUE(same_bits(graph, again)) << "bf16: two runs differ";
  s.tc.precision = Precision::FP32;
  const auto fp32 = train_gpu(s, true, 60);
  EXPECT_FALSE(same_bits(graph, fp32)) << "bf16 gave the fp32 weights bitwise: the bf16 path did not run";
  double num = 0, den = 0;
  for (size_t i = 0; i < fp32.size(); ++i) num += double(graph[i] - fp32[i]) * (graph[i] - fp32[i]), den += double(fp32[i]) * fp32[i];
  std::printf("bf16 vs fp32 weights after 60 steps: rel-L2 %.3g\n", std::sqrt(num / den));
  EXPECT_LT(std::sqrt(num / den), 2e-2);  // lr 1e-3 × 60 steps moves weights ~6e-2 at most; bf16 noise is a fraction
}

// bf16 with 32 windows of 64 (M = 2048 rows): the weight gradients take our K split (partials summed in the
// backward's ColsumBatch, written on the side stream): graph replay still equals the eager run bitwise.
TEST(TrainerGpu, Bf16SplitDwGraphReplayEqualsEager) {
  TrainCase s = small_case(20);
  s.tc.precision = Precision::BF16;
  s.tc.B = 32, s.tc.L = 64;
  const LayerShapes sh(s.mc, s.tc.B, s.tc.L);
  ASSERT_GT(gpu::linear_dw_splits(sh.in_proj), 1);
  ASSERT_GT(gpu::linear_dw_splits(sh.out_proj), 1);
  const auto eager = train_gpu(s, false, 20), graph = train_gpu(s, true, 20);
  EXPECT_TRUE(same_bits(eager, graph)) << "bf16 with split dW: graph replay differs from the eager run";
}

TEST(TrainerGpu, SameSeedSameWeights) {
  TrainCase s = small_case(50);
  const auto a = train_gpu(s, true, 50), b = train_gpu(s, true, 50);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  s.tc.seed = 10;
  EXPECT_NE(train_gpu(s, true, 50), a);
}

TEST(TrainerGpu, MatchesCpuTrainerAfter20Steps) {
  const TrainCase s = small_case(20);
  CpuTrainer cpu(s.mc, s.tc, s.data, {}, {.compute = test::on_cpu_reference()});  // the oracle: the reference model
  for (int i = 0; i < 20; ++i) cpu.step();
  const auto gpu = train_gpu(s, true, 20);
  const auto& lay = cpu.layout();
  for (const auto& t : lay.table.tensors()) {
    const std::vector<float> g(gpu.begin() + t.offset, gpu.begin() + t.offset + t.numel);
    const std::vector<float> c(cpu.params().begin() + t.offset, cpu.params().begin() + t.offset + t.numel);
    EXPECT_TRUE(weights_close(g, c, tol::kTrainParityRelL2, s.tc.lr, t.name));
  }
}

// Cross-sectional training (train.batch = "time", train.loss = "ic"): a cap below N and every instrument.
TrainCase ic_case(int steps, int instruments) {
  TrainCase s = small_case(steps);
  s.tc.batch_mode = BatchMode::Time, s.tc.dates = 3, s.tc.instruments = instruments, s.tc.loss = LossKind::IC;
  return s;
}

TEST(TrainerGpu, IcGraphReplayEqualsEagerBitwise) {
  for (int cap : {0, 4}) {
    const TrainCase s = ic_case(60, cap);
    const auto eager = train_gpu(s, false, 60);
    const auto graph = train_gpu(s, true, 60);
    ASSERT_EQ(eager.size(), graph.size());
    EXPECT_EQ(std::memcmp(eager.data(), graph.data(), eager.size() * sizeof(float)), 0) << "cap " << cap;
  }
}

TEST(TrainerGpu, IcMatchesCpuTrainer) {
  for (int cap : {0, 4}) {
    const TrainCase s = ic_case(10, cap);
    CpuTrainer cpu(s.mc, s.tc, s.data, {}, {.compute = test::on_cpu_reference()});  // the oracle: the reference model
    std::vector<float> cpu_loss;
    for (int i = 0; i < 10; ++i) cpu_loss.push_back(cpu.step().loss);
    Context ctx;
    GpuTrainer tr(ctx, s.mc, s.tc, s.data, {true, 0});
    for (int i = 0; i < 10; ++i) tr.step();
    for (int i = 0; i < 10; ++i)  // the same windows (same sampler) and the same loss, up to fp32 reductions
      EXPECT_NEAR(tr.record(i + 1).loss, cpu_loss[size_t(i)], 1e-4) << "cap " << cap << " step " << i + 1;
    const auto gpu = tr.params();
    for (const auto& t : cpu.layout().table.tensors()) {
      // The IC is unchanged by adding a constant to every prediction of a cross-section, so head.bias's
      // exact gradient is 0: both backends hold rounding noise there, which AdamW's m/√v turns into
      // ±lr steps of either sign. Its drift is bounded by the steps taken, not compared.
      if (t.name == "head.bias") {
        for (size_t j = 0; j < t.numel; ++j)
          EXPECT_LE(std::abs(gpu[t.offset + j] - cpu.params()[t.offset + j]), 2 * 10 * s.tc.lr) << "cap " << cap;
        continue;
      }
      const std::vector<float> g(gpu.begin() + t.offset, gpu.begin() + t.offset + t.numel);
      const std::vector<float> c(cpu.params().begin() + t.offset, cpu.params().begin() + t.offset + t.numel);
      EXPECT_TRUE(rel_l2_close(g, c, tol::kTrainParityRelL2, t.name)) << "cap " << cap;
    }
  }
}

TEST(TrainerGpu, InfBatchIsSkippedAndTrainingGoesOn) {
  TrainCase s = small_case(40);
  s.data.x[size_t(2) * s.data.T * s.data.F + 100 * s.data.F] = std::numeric_limits<float>::infinity();
  Context ctx;
  GpuTrainer tr(ctx, s.mc, s.tc, s.data, {true, 0});
  for (int i = 0; i < 40; ++i) tr.step();
  int skipped = 0;
  for (int64_t i = 1; i <= 40; ++i) {
    const StepRecord r = tr.record(i);
    EXPECT_EQ(r.step, i);
    if (r.skipped) {
      ++skipped;
      EXPECT_EQ(r.clip_scale, 0.0f);
    } else {
      EXPECT_TRUE(std::isfinite(r.loss)) << "step " << i;
    }
  }
  std::printf("%d of 40 steps sampled the Inf and were skipped\n", skipped);
  EXPECT_GT(skipped, 0) << "no batch hit the poisoned window: the test did not test anything";
  EXPECT_LT(skipped, 40);
  for (float p : tr.params()) ASSERT_TRUE(std::isfinite(p));
}

void overfit(Precision precision) {
  TrainCase s;
  s.data = make_synthetic({4, 32, 4, 1, 0.0f, 11});
  s.mc.F = 4; s.mc.K = 1; s.mc.D = 32; s.mc.NL = 2; s.mc.P = 16; s.mc.N = 16; s.mc.Q = 16;
  s.tc.B = 4; s.tc.L = 32; s.tc.steps = 400; s.tc.lr = 1e-2f; s.tc.warmup = 10; s.tc.min_lr_ratio = 0.05f;
  s.tc.weight_decay = 0.0f; s.tc.seed = 3; s.tc.log_every = 400;
  s.tc.precision = precision;
  Context ctx;
  GpuTrainer tr(ctx, s.mc, s.tc, s.data, {true, 0});
  for (int i = 0; i < 400; ++i) tr.step();
  double first = 0, last = 0;
  for (int i = 1; i <= 5; ++i) first += tr.record(i).loss / 5.0;
  for (int i = 396; i <= 400; ++i) last += tr.record(i).loss / 5.0;
  std::printf("GPU overfit (%s): first-5 mean loss %.5f, last-5 %.3g (ratio %.0f)\n", to_string(precision).c_str(),
              first, last, first / last);
  EXPECT_GT(first / last, 100.0);
}

TEST(TrainerGpu, OverfitsTinyTaskHundredfold) { overfit(Precision::FP32); }
TEST(TrainerGpu, OverfitsTinyTaskHundredfoldBf16) { overfit(Precision::BF16); }

// The memory estimate the trainer checks before allocating counts exactly what the model allocates, for
// the small case and for a G > 1, ragged-L case; and the device memory the trainer takes is within the
// estimate's total.
TEST(TrainerGpu, MemoryEstimateMatchesTheAllocations) {
  TrainCase g = small_case(5);
  TrainCase r = small_case(5);
  r.mc.G = 2; r.mc.N = 8; r.tc.L = 37; r.tc.B = 3;
  TrainCase x = ic_case(5, 4);  // time batches: B = dates × cap
  TrainCase h = small_case(5), hr = r;  // bf16: half-size operands and the weights' bf16 copy
  h.tc.precision = hr.tc.precision = Precision::BF16;
  TrainCase hs = h;  // bf16 with the weight gradients' K-split partials (M = 2048 rows)
  hs.tc.B = 32, hs.tc.L = 64;
  for (const TrainCase* s : {&g, &r, &x, &h, &hr, &hs}) {
    Context ctx;
    size_t free_before = 0, total = 0;
    MLALPHA_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
    GpuTrainer tr(ctx, s->mc, s->tc, s->data, {true, 0});
    size_t free_after = 0;
    MLALPHA_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
    const MemoryEstimate e = estimate_gpu_training(s->mc, s->tc, s->data.N, s->data.T, 1024);
    EXPECT_EQ(double(tr.activation_bytes()), e.activations + e.workspaces - double(Context::kWorkspaceBytes))
        << "G = " << s->mc.G;
    // cudaMalloc rounds each buffer up (2 MiB pages for large ones); the model holds ~30 buffers.
    EXPECT_LE(double(free_before - free_after), e.total() + 64.0 * (2 << 20)) << "G = " << s->mc.G;
  }
}

}  // namespace
}  // namespace mlalpha::test
