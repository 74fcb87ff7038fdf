// The streaming stepper on the GPU (model/model_step_gpu.h) against the CPU stepper (its oracle, itself equal to
// the forward over each instrument's present rows: tests/cpu/test_model_step.cpp), on random weights and ragged
// shapes (one instrument, odd feature counts, G > 1, W = 1 and 2, both projection tiles, counts that are not a
// multiple of the fused layer's tile of 8, the S and M models' head shapes: weights staged in shared memory and
// read from L2), with absent instruments and NaN rows; the mapped output is poisoned before every bar. Both bars:
// the fused one (a kernel a layer, GpuStepperOptions::fused) and the three kernels a layer (the default). Also: two runs are bitwise equal;
// the graph replay equals the eager launches, and PDL changes no bit; an exported state continues bit-exactly
// in another stepper; remapping gives each instrument the bits it would have alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "core/context.h"
#include "model/model_step.h"
#include "model/model_step_gpu.h"
#include "stream_util.h"
#include "test_util.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

// A finite poison: an output left unwritten fails both the NaN check (absent) and the comparison (present).
constexpr unsigned char kPoison = 0x7F;  // every float 3.39e38

// Runs bars [from, to) of s through the GPU stepper in pieces, poisoning the mapped output before each bar.
std::vector<float> run_gpu(GpuStepper& st, const Stream& s, int K, int from = 0, int to = -1) {
  if (to < 0) to = s.T;
  std::vector<float> out(size_t(to - from) * s.I * K);
  for (int t = from; t < to; ++t) {
    std::memcpy(st.x_in(), s.row(t), size_t(s.I) * s.F * sizeof(float));
    std::memcpy(st.mask_in(), s.mask_at(t), size_t(s.I));
    std::memset(const_cast<float*>(st.out()), kPoison, size_t(s.I) * K * sizeof(float));
    st.launch();
    st.wait();
    std::memcpy(out.data() + size_t(t - from) * s.I * K, st.out(), size_t(s.I) * K * sizeof(float));
  }
  return out;
}

struct Shape {
  const char* name;
  ModelConfig mc;
  int I, T;
};

ModelConfig with_dt_limit(ModelConfig c, float lo, float hi) {
  c.dt_limit_lo = lo, c.dt_limit_hi = hi;
  return c;
}

class GpuStepperStream : public ::testing::TestWithParam<Shape> {};

TEST_P(GpuStepperStream, MatchesTheCpuStepperAndIsReproducible) {
  const Shape sh = GetParam();
  const ModelLayout lay(sh.mc);
  const int K = lay.cfg.K, half = sh.T / 2;
  auto rng = make_rng(100 + sh.I);
  const std::vector<float> params = noisy_params(lay, rng);
  const Stream s = make_stream(sh.T, sh.I, lay.cfg.F, rng);
  Context ctx;

  CpuStepper cpu(lay, params, sh.I, {.threads = 0});
  const std::vector<float> ref = run_stream(cpu, s, K);
  const StepState sc = cpu.export_state();
  const std::vector<bool> nan = absent_mask(s, K);
  for (const bool fused : {true, false}) {  // each bar: within the tolerance of the CPU, and its own bits every time
    const std::string bar = std::string(sh.name) + (fused ? " fused" : " three kernels a layer");
    GpuStepper gpu(ctx, lay, params, sh.I, {.fused = fused});
    EXPECT_EQ(gpu.uses_fused(), fused) << gpu.fused_refusal();  // every shape here fits the fused layer on sm_90
    EXPECT_EQ(gpu.kernels_per_bar(), fused ? lay.cfg.NL + 2 : 2 + 3 * lay.cfg.NL);
    const std::vector<float> got = run_gpu(gpu, s, K);
    const auto r = rel_l2_close_where_finite(got, ref, nan, got.size() / 2, tol::kStepGpuVsCpuRelL2,
                                             bar + " outputs, GPU vs CPU stepper");
    std::printf("%s\n", r.message());
    EXPECT_TRUE(r);
    const StepState sg = gpu.export_state();
    EXPECT_TRUE(rel_l2_close(sg.ssm, sc.ssm, tol::kStepGpuVsCpuRelL2, bar + " final SSM state"));
    if (lay.cfg.W > 1)  // W = 1 has no window (and rel_l2_close reads element 0 for its message)
      EXPECT_TRUE(rel_l2_close(sg.conv, sc.conv, tol::kStepGpuVsCpuRelL2, bar + " final conv window"));
    else
      EXPECT_TRUE(sg.conv.empty() && sc.conv.empty());

    // The same bits: a second stepper, the eager launches, no PDL; and a stream resumed from an exported state.
    for (const GpuStepperOptions o : {GpuStepperOptions{.fused = fused}, GpuStepperOptions{.graph = false, .fused = fused},
                                      GpuStepperOptions{.pdl = false, .fused = fused}}) {
      GpuStepper again(ctx, lay, params, sh.I, o);
      EXPECT_TRUE(same_bits(run_gpu(again, s, K), got)) << bar << " graph " << o.graph << " pdl " << o.pdl;
      EXPECT_TRUE(same_bits(again.export_state().ssm, sg.ssm)) << bar << " graph " << o.graph << " pdl " << o.pdl;
    }
    GpuStepper first(ctx, lay, params, sh.I, {.fused = fused});
    std::vector<float> resumed = run_gpu(first, s, K, 0, half);
    GpuStepper second(ctx, lay, params, 2, {.fused = fused});
    second.import_state(first.export_state());
    const std::vector<float> rest = run_gpu(second, s, K, half);
    resumed.insert(resumed.end(), rest.begin(), rest.end());
    EXPECT_TRUE(same_bits(resumed, got)) << bar << ": a stream resumed from an exported state differs";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuStepperStream,
    ::testing::Values(Shape{"S_I100", step_config(32, 1, 128, 4, 32, 1, 64, 4), 100, 12},
                      Shape{"ragged_I1", step_config(5, 2, 24, 2, 8, 2, 12, 4), 1, 16},
                      Shape{"G3_W2", step_config(7, 1, 36, 2, 12, 3, 20, 2), 7, 16},
                      Shape{"W1", step_config(3, 3, 16, 1, 4, 2, 8, 1), 5, 12},
                      Shape{"large_tile_I300", with_dt_limit(step_config(9, 1, 40, 2, 10, 2, 40, 4), 0.01f, 0.2f),
                            300, 10},
                      Shape{"wide_state", step_config(6, 1, 64, 1, 64, 1, 128, 4), 9, 10},
                      // the S model's layer (H 8, P 32, N 64: weights staged in shared memory) at 3 and 13
                      Shape{"S_I3", step_config(32, 1, 128, 2, 32, 1, 64, 4), 3, 12},
                      Shape{"S_I13", step_config(32, 1, 128, 2, 32, 1, 64, 4), 13, 12},
                      Shape{"S_I260", step_config(32, 1, 128, 2, 32, 1, 64, 4), 260, 8},  // tiles of 8 from 256
                      // the M model's layer (H 8, P 64, N 64: weights read from L2) at 13 and 260 (tiles of 4, 8)
                      Shape{"M_I13", step_config(16, 1, 256, 2, 64, 1, 64, 4), 13, 10},
                      Shape{"M_I260", step_config(16, 1, 256, 2, 64, 1, 64, 4), 260, 6}),
    [](const ::testing::TestParamInfo<Shape>& i) { return std::string(i.param.name); });

// Instrument j's outputs, (T, K), from a (T, I, K) array.
std::vector<float> column(const std::vector<float>& out, int T, int I, int K, int j) {
  std::vector<float> c;
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) c.push_back(out[(size_t(t) * I + j) * K + k]);
  return c;
}
// The stream of instruments src[0], src[1], … of s (their rows, their masks).
Stream pick(const Stream& s, const std::vector<int>& src) {
  Stream p;
  p.T = s.T, p.I = static_cast<int>(src.size()), p.F = s.F;
  for (int t = 0; t < s.T; ++t)
    for (int i : src) {
      p.x.insert(p.x.end(), s.row(t) + size_t(i) * s.F, s.row(t) + size_t(i + 1) * s.F);
      p.mask.push_back(s.mask_at(t)[i]);
    }
  return p;
}

// A row's bits do not depend on the other rows nor on the tile the instrument count picks (300 takes the large
// projection tile and the fused layer's tile of 8 rows, 3 and 1 the small tile and 4 rows): remapping keeps each
// instrument's stream exactly.
class GpuStepperBars : public ::testing::TestWithParam<bool> {};  // fused layers or not

TEST_P(GpuStepperBars, RemapAndResetKeepEachInstrumentsBits) {
  const ModelLayout lay(step_config(6, 2, 32, 2, 8, 2, 16, 4));
  const int K = lay.cfg.K, T = 10, I = 300, cut = 5;
  auto rng = make_rng(200);
  const std::vector<float> params = noisy_params(lay, rng);
  const Stream s = make_stream(T, I, lay.cfg.F, rng);
  Context ctx;
  const GpuStepperOptions opt{.fused = GetParam()};
  GpuStepper st(ctx, lay, params, I, opt);
  EXPECT_EQ(st.uses_fused(), GetParam()) << st.fused_refusal();
  run_gpu(st, s, K, 0, cut);
  st.remap(std::vector<int>{299, 3, -1});
  ASSERT_EQ(st.instruments(), 3);
  const std::vector<int> src = {299, 3, 7};  // the new instrument takes instrument 7's rows from bar `cut` on
  const std::vector<float> got = run_gpu(st, pick(s, src), K, cut);
  for (int j = 0; j < 2; ++j) {
    GpuStepper alone(ctx, lay, params, 1, opt);
    const std::vector<float> a = run_gpu(alone, pick(s, {src[j]}), K);
    EXPECT_TRUE(same_bits(column(got, T - cut, 3, K, j), std::vector<float>(a.begin() + cut * K, a.end())))
        << "instrument " << src[j];
  }
  {
    GpuStepper fresh(ctx, lay, params, 1, opt);
    const std::vector<float> a = run_gpu(fresh, pick(s, {7}), K, cut);
    EXPECT_TRUE(same_bits(column(got, T - cut, 3, K, 2), a)) << "the new instrument starts from zeros";
  }
  // reset(1) zeroes instrument 1's state and leaves the others' bits
  const StepState before = st.export_state();
  st.reset(std::vector<int>{1});
  const StepState after = st.export_state();
  const size_t spi = after.ssm_per_instrument();
  for (int l = 0; l < after.layers; ++l)
    for (int i = 0; i < 3; ++i) {
      const size_t off = (size_t(l) * 3 + i) * spi;
      const std::span<const float> a(after.ssm.data() + off, spi), b(before.ssm.data() + off, spi);
      if (i == 1)
        EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](float v) { return v == 0.0f; }));
      else
        EXPECT_TRUE(same_bits(a, b));
    }
}

INSTANTIATE_TEST_SUITE_P(FusedOrNot, GpuStepperBars, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "fused" : "unfused"; });

// Small shapes for compute-sanitizer (memcheck, racecheck, synccheck): both projection tiles, graph and eager, the
// fused layer (G 2, 6 heads: a cluster of 6) and the unfused one.
TEST(GpuStepperSanitizer, SmallShapesBothTiles) {
  for (const int I : {3, 260}) {
    const ModelLayout lay(step_config(5, 2, 24, 2, 8, 2, 12, 4));
    auto rng = make_rng(300 + I);
    const std::vector<float> params = noisy_params(lay, rng);
    const Stream s = make_stream(3, I, lay.cfg.F, rng);
    Context ctx;
    CpuStepper cpu(lay, params, I);
    const std::vector<float> ref = run_stream(cpu, s, lay.cfg.K);
    for (const bool fused : {true, false})
      for (const bool graph : {true, false}) {
        GpuStepper gpu(ctx, lay, params, I, {.graph = graph, .fused = fused});
        EXPECT_EQ(gpu.uses_fused(), fused) << gpu.fused_refusal();
        EXPECT_TRUE(rel_l2_close_where_finite(run_gpu(gpu, s, lay.cfg.K), ref, absent_mask(s, lay.cfg.K),
                                              ref.size() / 2, tol::kStepGpuVsCpuRelL2,
                                              "I = " + std::to_string(I) + (fused ? " fused" : " unfused")));
      }
  }
}

TEST(GpuStepper, RefusesBadArguments) {
  const ModelLayout lay(step_config(4, 1, 16, 1, 8, 1, 8, 4));
  auto rng = make_rng(400);
  const std::vector<float> params = noisy_params(lay, rng);
  Context ctx;
  EXPECT_TRUE(contains(error_of([&] { GpuStepper(ctx, lay, std::span<const float>(params).first(3), 2); }),
                       "the weights hold 3 floats"));
  EXPECT_TRUE(contains(error_of([&] { GpuStepper(ctx, lay, params, 0); }), "at least one instrument"));
  GpuStepper st(ctx, lay, params, 2);
  EXPECT_TRUE(contains(error_of([&] { st.reset(std::vector<int>{2}); }), "instrument 2 of 2"));
  const ModelLayout other(step_config(4, 1, 16, 2, 8, 1, 8, 4));
  EXPECT_TRUE(contains(error_of([&] { st.import_state(StepState::zeros(other.cfg, 2)); }), "model.layers"));
  const ModelLayout wide(step_config(4, 1, 16, 1, 8, 1, 512, 4));
  const std::vector<float> wp = noisy_params(wide, rng);
  EXPECT_TRUE(contains(error_of([&] { GpuStepper(ctx, wide, wp, 1); }), "model.d_state <= 256"));
}

// A model the fused layer cannot take (32 heads: clusters hold at most 8 blocks) gets the three kernels a layer,
// says why, and still matches the CPU stepper.
TEST(GpuStepper, ManyHeadsFallBackToTheUnfusedBar) {
  const ModelLayout lay(step_config(5, 1, 64, 2, 4, 2, 16, 4));  // d_inner 128, head_dim 4: 32 heads
  auto rng = make_rng(500);
  const std::vector<float> params = noisy_params(lay, rng);
  const Stream s = make_stream(6, 11, lay.cfg.F, rng);
  Context ctx;
  GpuStepper gpu(ctx, lay, params, 11, {.fused = true});
  EXPECT_FALSE(gpu.uses_fused());
  EXPECT_TRUE(contains(gpu.fused_refusal(), "32 heads")) << gpu.fused_refusal();
  EXPECT_EQ(gpu.kernels_per_bar(), 2 + 3 * lay.cfg.NL);
  CpuStepper cpu(lay, params, 11);
  const std::vector<float> ref = run_stream(cpu, s, lay.cfg.K);
  EXPECT_TRUE(rel_l2_close_where_finite(run_gpu(gpu, s, lay.cfg.K), ref, absent_mask(s, lay.cfg.K), ref.size() / 2,
                                        tol::kStepGpuVsCpuRelL2, "32 heads"));
}

}  // namespace
}  // namespace mlalpha::test
