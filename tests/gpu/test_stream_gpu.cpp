// What a date's prediction is and the streaming predictor, on the GPU (docs/data.md): mode window's last dates are
// bitwise the same whether the input starts at row 0 or at any offset, and match the CPU's; mode carry matches the
// CPU's; a stream on the GPU equals `predict` in the same mode on the whole history at every bar (window: bitwise,
// the same prediction path and tile; carry: the GPU stepper against the forward, to the GPU-vs-CPU bound), with
// missing rows, NaN cells, an instrument listed late; a state saved on the GPU continues bit-exactly in another
// predictor, and one saved on the GPU continues on the CPU to the GPU-vs-CPU bound.
#include <gtest/gtest.h>

#include <cmath>

#include "compute_util.h"
#include "mlalpha/stream.h"
#include "predict_util.h"
#include "test_files.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

ModelConfig gpu_model(int F, int K) {
  ModelConfig mc;
  mc.F = F, mc.K = K, mc.D = 32, mc.NL = 2, mc.P = 16, mc.N = 16, mc.Q = 16, mc.G = 1, mc.W = 4;
  return mc;
}

struct Case {
  TempDir tmp;
  Panel raw;
  int F = 5, K = 2, C = 20;
  Model model;
  explicit Case(uint64_t salt, const DataConfig& d, int N = 6, int T = 70)
      : model([&] {
          auto rng = make_rng(salt);
          raw = raw_panel(N, T, F, K, rng);
          return write_model(tmp / "m", gpu_model(F, K), C, d, some_stats(F, rng), rng(), raw.feature_names,
                             raw.target_names);
        }()) {}
};

TEST(PredictionGpu, WindowModeDoesNotDependOnWhereTheInputStartsAndMatchesTheCpu) {
  Case c(1, processing("zscore", "mean", "zscore"));
  const int N = c.raw.N, T = c.raw.T, K = c.K;
  const std::vector<float> full = c.model.predict(c.raw, {0, T}, test::on_gpu());
  const std::vector<float> cpu = c.model.predict(c.raw, {0, T}, test::on_cpu());
  EXPECT_TRUE(rel_l2_close_where_finite(full, cpu, nan_of(cpu), cpu.size(), tol::kModelParityRelL2, "GPU vs CPU"));
  for (int off : {1, 9, 20}) {
    const std::vector<float> part = c.model.predict(slice_panel(c.raw, off, T), {0, T - off}, test::on_gpu());
    size_t compared = 0;
    for (int i = 0; i < N; ++i)
      for (int t = off + c.C - 1; t < T; ++t)
        for (int k = 0; k < K; ++k) {
          const float a = full[(size_t(i) * T + t) * K + k], b = part[(size_t(i) * (T - off) + t - off) * K + k];
          ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "offset " << off << ", instrument " << i << ", time " << t;
          ++compared;
        }
    EXPECT_GT(compared, 0u);
  }
  const std::vector<float> carry = c.model.predict(c.raw, {0, T}, test::on_gpu(), PredictMode::carry);
  const std::vector<float> carry_cpu = c.model.predict(c.raw, {0, T}, test::on_cpu(), PredictMode::carry);
  EXPECT_TRUE(rel_l2_close_where_finite(carry, carry_cpu, nan_of(carry_cpu), carry.size() * 3 / 4,
                                        tol::kModelParityRelL2, "carry GPU vs CPU"));
}

TEST(StreamGpu, EveryBarEqualsPredictOnTheWholeHistory) {
  for (const DataConfig& d : {processing("global", "zero"), processing("rank", "ffill")}) {
    Case c(2, d);
    const int T = c.raw.T;
    {
      StreamPredictor s(c.model, c.raw.instruments, {.mode = PredictMode::carry, .compute = test::on_gpu()});
      ASSERT_TRUE(s.on_gpu());
      const std::vector<float> got = run(s, c.raw, 0, T);
      for (const char* device : {"gpu", "cpu"}) {
        const std::vector<float> want =
            as_stream(c.model.predict(c.raw, {0, T}, std::string(device) == "gpu" ? test::on_gpu() : test::on_cpu(),
                                      PredictMode::carry),
                      c.raw, c.K);
        const auto r = rel_l2_close_where_finite(got, want, nan_of(want), got.size() * 3 / 4, tol::kStepGpuVsCpuRelL2,
                                                 std::string("carry stream vs predict on the ") + device);
        std::printf("%s\n", r.message());
        EXPECT_TRUE(r);
      }
    }
    {
      StreamPredictor s(c.model, c.raw.instruments, {.mode = PredictMode::window, .compute = test::on_gpu()});
      const std::vector<float> got = run(s, c.raw, 0, T);
      const std::vector<float> want = as_stream(c.model.predict(c.raw, {0, T}, test::on_gpu()), c.raw, c.K);
      EXPECT_TRUE(same_bits(got, want)) << "window: " << rel_l2_close_where_finite(got, want, nan_of(want), 0, 0, "").message();
    }
  }
}

TEST(StreamGpu, ASavedStateResumesBitExactlyAndOnTheCpu) {
  Case c(3, processing("zscore", "ffill"));
  const int T = c.raw.T, cut = 33;
  for (const PredictMode mode : {PredictMode::carry, PredictMode::window}) {
    StreamPredictor whole(c.model, c.raw.instruments, {.mode = mode, .compute = test::on_gpu()});
    const std::vector<float> all = run(whole, c.raw, 0, T);
    StreamPredictor first(c.model, c.raw.instruments, {.mode = mode, .compute = test::on_gpu()});
    std::vector<float> got = run(first, c.raw, 0, cut);
    first.save(c.tmp / "state");
    StreamPredictor second(c.model, {"x", "y"}, {.mode = mode, .compute = test::on_gpu()});
    second.load(c.tmp / "state");
    const std::vector<float> rest = run(second, c.raw, cut, T);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_TRUE(same_bits(got, all)) << to_string(mode);
    StreamPredictor on_cpu(c.model, {"x"}, {.mode = mode, .compute = test::on_cpu()});
    on_cpu.load(c.tmp / "state");
    const std::vector<float> cpu_rest = run(on_cpu, c.raw, cut, T);
    const std::vector<float> gpu_rest(all.begin() + ptrdiff_t(size_t(cut) * c.raw.N * c.K), all.end());
    EXPECT_TRUE(rel_l2_close_where_finite(cpu_rest, gpu_rest, nan_of(gpu_rest), cpu_rest.size() / 2,
                                          tol::kStepGpuVsCpuRelL2, "the GPU's state continued on the CPU"));
  }
}

}  // namespace
}  // namespace mlalpha::test
