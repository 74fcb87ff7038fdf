// Stateful training on the GPU (train.state = "carry", docs/decisions.md "Stateful training"):
// - the device sampler (data/carry_sampler_gpu.h) gathers the CPU sampler's batches float for float, across epoch
//   boundaries and for a rank's share of the lanes, and its reset kernel zeroes exactly the lanes it resets;
// - the GPU model hands window k's final states to window k + 1 as one forward over both (every precision), a
//   null carry is the stateless forward bit for bit, and its gradients with nonzero in states match the reference;
// - the GPU trainer matches the CPU trainer (the reference model) step by step, skipped steps included; graph
//   replay equals eager; N steps = k steps + state + load + N − k bitwise; a population member equals its solo run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "compute_util.h"
#include "core/context.h"
#include "data/carry_sampler.h"
#include "data/carry_sampler_gpu.h"
#include "data/carry_sampler_time.h"
#include "data/synthetic.h"
#include "gpu_util.h"
#include "model/layer_shapes.h"
#include "model/model_gpu.h"
#include "model/model_ref.h"
#include "ops/cast/cast.h"
#include "test_util.h"
#include "tolerances.h"
#include "train/population_trainer.h"
#include "train/trainer_cpu.h"
#include "train/trainer_gpu.h"

namespace mlalpha::test {
namespace {

// Instruments with different counts of present rows: instrument i misses the rows t with (t + i) % (i + 2) == 0
// (none for the last one), so windows run over gaps and the epoch's sequence is ragged.
Panel ragged(int N, int T, int F, uint64_t seed = 21) {
  Panel p = make_synthetic({N, T, F, 1, 0.1f, seed});
  p.input_rows.assign(size_t(N) * T, kRowFeatures | kRowTargets);
  for (int i = 0; i + 1 < N; ++i)
    for (int t = 0; t < T; ++t)
      if ((t + i) % (i + 2) == 0) p.input_rows[size_t(i) * T + t] = 0;
  return p;
}

std::vector<float> random_vector(size_t n, double scale, uint64_t salt) {
  std::mt19937_64 rng = make_rng(salt);
  return random_vec<float>(n, rng, -scale, scale);
}

// ---- the device sampler

// Lanes [lane0, lane0 + B) of a sampler over `total` lanes, over three epochs and more: xb, yb (poisoned before
// each step) and the reset flags against CarrySampler::gather of all `total` lanes, bit for bit.
void check_gather(int lane0, int B, int total) {
  const Panel p = ragged(7, 90, 3);
  const int L = 8, burn_in = 3;
  const int t0 = 5, t1 = 85;
  auto host_rows = present_rows(p, t0, t1);
  auto dev_rows = std::make_shared<const DeviceRows>(*host_rows);
  const CarrySampler cpu(host_rows, total, L, 13);
  Context ctx;
  DeviceCarrySampler dev(host_rows, dev_rows, p, B, lane0, total, L, burn_in, 13);
  ASSERT_EQ(dev.epoch_steps(), cpu.epoch_steps());
  const auto x = to_device(p.x), y = to_device(p.y);
  DeviceBuffer<long long> step(1);
  DeviceBuffer<float> xb(size_t(B) * L * p.F), yb(size_t(B) * L * p.K);
  const ModelConfig mc = [] {
    ModelConfig c;
    c.F = 3, c.K = 1, c.D = 16, c.NL = 2, c.P = 8, c.N = 8, c.Q = 8;
    return c;
  }();
  const size_t conv_lane = carry_conv_floats(mc, 1), ssm_lane = carry_ssm_floats(mc, 1);
  DeviceBuffer<float> conv(size_t(mc.NL) * B * conv_lane), ssm(size_t(mc.NL) * B * ssm_lane);
  std::vector<float> cx(size_t(total) * L * p.F), cy(size_t(total) * L * p.K);
  std::vector<unsigned char> reset(static_cast<size_t>(total));
  int resets = 0, kept = 0;
  for (int64_t s = 0; s < 3 * cpu.epoch_steps() + 2; ++s) {
    dev.prepare(s, ctx.stream());
    const long long sv = s;
    step.upload(&sv, 1);
    xb.fill_bytes(0xFF, ctx.stream());
    yb.fill_bytes(0xFF, ctx.stream());
    // States: lane-distinct nonzero values, so a reset of the wrong lane or a missed one shows.
    std::vector<float> hc(conv.size()), hs(ssm.size());
    for (size_t i = 0; i < hc.size(); ++i) hc[i] = 1.0f + float(i % 97);
    for (size_t i = 0; i < hs.size(); ++i) hs[i] = -1.0f - float(i % 89);
    conv.upload(hc);
    ssm.upload(hs);
    dev.gather(step.data(), x.data(), y.data(), xb.data(), yb.data(), ctx.stream());
    dev.reset(step.data(), mc.NL, conv_lane, ssm_lane, conv.data(), ssm.data(), ctx.stream());
    ctx.synchronize();
    cpu.gather(s, p, burn_in, cx.data(), cy.data(), reset.data());
    const std::vector<float> gx = xb.download(), gy = yb.download(), gc = conv.download(), gs = ssm.download();
    const size_t nx = size_t(L) * p.F, ny = size_t(L) * p.K;
    ASSERT_TRUE(test::same_bits(gx, std::vector<float>(cx.begin() + lane0 * nx, cx.begin() + (lane0 + B) * nx)))
        << "x of step " << s;
    ASSERT_TRUE(test::same_bits(gy, std::vector<float>(cy.begin() + lane0 * ny, cy.begin() + (lane0 + B) * ny)))
        << "y of step " << s;
    for (int l = 0; l < mc.NL; ++l)
      for (int b = 0; b < B; ++b) {
        const bool r = reset[size_t(lane0 + b)] != 0;
        (r ? resets : kept) += 1;
        const size_t lc = (size_t(l) * B + b) * conv_lane, ls = (size_t(l) * B + b) * ssm_lane;
        for (size_t j = 0; j < conv_lane; ++j) ASSERT_EQ(gc[lc + j], r ? 0.0f : hc[lc + j]) << "step " << s;
        for (size_t j = 0; j < ssm_lane; ++j) ASSERT_EQ(gs[ls + j], r ? 0.0f : hs[ls + j]) << "step " << s;
      }
  }
  EXPECT_GT(resets, 0);
  EXPECT_GT(kept, 0);  // the test saw lanes that carry on, not only resets
}

TEST(CarrySamplerGpu, GatherAndResetEqualTheCpuSamplerOverEpochs) { check_gather(0, 4, 4); }
TEST(CarrySamplerGpu, ARanksLanesAreItsShareOfTheWorldsSampler) {
  check_gather(3, 3, 6);  // rank 1 of 2
  check_gather(0, 3, 6);  // rank 0 of 2
}

// Time batches: lanes [lane0, lane0 + B) of a schedule of `dates` cross-sections of G against gather_time_carry of
// all of them, bit for bit (and the lanes' present rows int for int), over three epochs and more; the panel's
// missing rows are skipped (present rows first, targets on their dates), and the range starts inside the panel.
// Returns the padding windows it saw; gaps_seen: the real windows that had missing dates.
int check_time_gather(int lane0, int B, int dates, int G, int* gaps_seen = nullptr) {
  Panel p = ragged(7, 90, 3);
  const int L = 8, burn_in = 3, t0 = 5, T = 77;  // T mod L = 5: the phase moves
  const TimeCarryParams tp{p.N, T, L, dates, G, 17};
  Context ctx;
  const auto dev_rows = std::make_shared<const DeviceRows>(*present_rows(p, t0, t0 + T));
  DeviceCarrySampler dev(tp, t0, dev_rows, p, B, lane0, burn_in);
  EXPECT_EQ(dev.epoch_steps(), time_carry_epoch_steps(tp));
  const auto x = to_device(p.x), y = to_device(p.y);
  DeviceBuffer<long long> step(1);
  DeviceBuffer<float> xb(size_t(B) * L * p.F), yb(size_t(B) * L * p.K);
  const int total = dates * G;
  std::vector<float> cx(size_t(total) * L * p.F), cy(size_t(total) * L * p.K);
  std::vector<unsigned char> reset(static_cast<size_t>(total));
  std::vector<int> crows(static_cast<size_t>(total)), cdates(static_cast<size_t>(total) * L);
  DeviceBuffer<int> lane_rows(static_cast<size_t>(B)), lane_dates(static_cast<size_t>(B) * L);
  int resets = 0, padding = 0, gaps = 0;
  for (int64_t s = 0; s < 3 * dev.epoch_steps() + 2; ++s) {
    dev.prepare(s, ctx.stream());
    const long long sv = s;
    step.upload(&sv, 1);
    xb.fill_bytes(0xFF, ctx.stream());
    yb.fill_bytes(0xFF, ctx.stream());
    lane_rows.fill_bytes(0xFF, ctx.stream());
    lane_dates.fill_bytes(0xFF, ctx.stream());
    dev.gather(step.data(), x.data(), y.data(), xb.data(), yb.data(), ctx.stream(), lane_rows.data(), lane_dates.data());
    ctx.synchronize();
    gather_time_carry(tp, p, t0, s, burn_in, cx.data(), cy.data(), reset.data(), crows.data(), cdates.data());
    const std::vector<int> grows = lane_rows.download(), gdates = lane_dates.download();
    EXPECT_EQ(grows, std::vector<int>(crows.begin() + lane0, crows.begin() + lane0 + B)) << "rows of step " << s;
    EXPECT_EQ(gdates, std::vector<int>(cdates.begin() + size_t(lane0) * L, cdates.begin() + size_t(lane0 + B) * L))
        << "dates of step " << s;
    for (int b = 0; b < B; ++b) gaps += grows[size_t(b)] > 0 && grows[size_t(b)] < L;
    const size_t nx = size_t(L) * p.F, ny = size_t(L) * p.K;
    const bool same_x = test::same_bits(xb.download(), std::vector<float>(cx.begin() + lane0 * nx, cx.begin() + (lane0 + B) * nx));
    const bool same_y = test::same_bits(yb.download(), std::vector<float>(cy.begin() + lane0 * ny, cy.begin() + (lane0 + B) * ny));
    EXPECT_TRUE(same_x) << "x of step " << s;
    EXPECT_TRUE(same_y) << "y of step " << s;
    if (!same_x || !same_y) return -1;
    for (int b = lane0; b < lane0 + B; ++b) {
      resets += reset[size_t(b)];
      padding += time_carry_window(tp, s, b).instrument < 0;
    }
  }
  EXPECT_GT(resets, 0);
  if (gaps_seen) *gaps_seen = gaps;
  return padding;
}

// 9 windows an epoch: over 2 runs the second run's tail is padding (step 4 of 5), over 4 runs the last one's.
TEST(CarrySamplerGpu, TimeBatchesGatherTheCpuSchedule) {
  int gaps[3] = {0, 0, 0};
  EXPECT_GT(check_time_gather(0, 8, 2, 4, &gaps[0]), 0);    // one rank, G < N
  EXPECT_EQ(check_time_gather(4, 4, 4, 4, &gaps[1]), 0);    // rank 1 of 4 (a cross-section of its own): windows 3 .. 5
  EXPECT_GT(check_time_gather(12, 4, 4, 4), 0);             // rank 3 of 4: windows 9 .. 11, past the epoch's 9: padding
  EXPECT_GT(check_time_gather(0, 14, 2, 7, &gaps[2]), 0);   // G = N
  for (int g : gaps) EXPECT_GT(g, 0) << "windows with missing dates, skipped";
}

// ---- the model

ModelConfig small_model(int F) {
  ModelConfig c;
  c.F = F, c.K = 1, c.D = 32, c.NL = 2, c.P = 16, c.G = 1, c.N = 16, c.Q = 16;
  return c;
}

struct DevModel {
  std::vector<float> out, conv, ssm;
};

// A forward of x (B, L, F) on the GPU with in states (empty: null pointers) and out states written.
DevModel gpu_forward(Context& ctx, const ModelLayout& lay, int B, int L, Precision pr, const std::vector<float>& params,
                     const std::vector<float>& x, const std::vector<float>* conv_in, const std::vector<float>* ssm_in,
                     bool carry = true) {
  GpuModel m(ctx, lay, B, L, pr);
  const auto P = to_device(params), X = to_device(x);
  DeviceBuffer<__nv_bfloat16> P16(pr == Precision::BF16 ? params.size() : 0);
  if (P16.size()) gpu::cast_bf16(P.data(), P16.data(), params.size(), ctx.stream());
  const ModelConfig& c = lay.cfg;
  DeviceBuffer<float> ci = conv_in ? to_device(*conv_in) : DeviceBuffer<float>();
  DeviceBuffer<float> si = ssm_in ? to_device(*ssm_in) : DeviceBuffer<float>();
  auto co = poisoned(size_t(c.NL) * carry_conv_floats(c, B)), so = poisoned(size_t(c.NL) * carry_ssm_floats(c, B));
  const CarryState<float> cs{conv_in ? ci.data() : nullptr, ssm_in ? si.data() : nullptr, co.data(), so.data()};
  m.forward(P.data(), X.data(), P16.size() ? P16.data() : nullptr, carry ? &cs : nullptr);
  ctx.synchronize();
  DevModel r;
  r.out.resize(size_t(B) * L * c.K);
  MLALPHA_CUDA_CHECK(cudaMemcpy(r.out.data(), m.out(), r.out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  if (carry) r.conv = co.download(), r.ssm = so.download();
  return r;
}

// Window k's final states handed to window k + 1 equal one forward over both windows: the outputs of window
// k + 1 and the final states, per precision, at a split inside a chunk and at one shorter than the conv's window.
TEST(ModelCarryGpu, HandedOverStatesEqualOneForwardOverBoth) {
  const ModelConfig c = small_model(5);
  const ModelLayout lay(c);
  const std::vector<float> params = init_params(lay, 3);
  for (Precision pr : {Precision::FP32, Precision::TF32, Precision::BF16})
    for (auto [L1, L2] : {std::pair{37, 59}, std::pair{2, 40}}) {
      const int B = 3, L = L1 + L2;
      const std::vector<float> x = random_vector(size_t(B) * L * c.F, 0.5f, 7);
      Context ctx;
      const DevModel whole = gpu_forward(ctx, lay, B, L, pr, params, x, nullptr, nullptr);
      const std::vector<float> x1 = time_slice(x, B, L, c.F, 0, L1), x2 = time_slice(x, B, L, c.F, L1, L2);
      const DevModel a = gpu_forward(ctx, lay, B, L1, pr, params, x1, nullptr, nullptr);
      const DevModel b = gpu_forward(ctx, lay, B, L2, pr, params, x2, &a.conv, &a.ssm);
      const std::vector<float> w1 = time_slice(whole.out, B, L, c.K, 0, L1);
      const std::vector<float> w2 = time_slice(whole.out, B, L, c.K, L1, L2);
      // The two forwards round differently (GEMMs of other row counts, chunk boundaries moved): fp32 to 1e-5,
      // tf32 operands (2^-11) and bf16 operands (2^-9) looser.
      const double tol = pr == Precision::BF16 ? 2e-2 : pr == Precision::TF32 ? 5e-3 : 1e-5;
      const std::string what = to_string(pr) + " split " + std::to_string(L1) + "+" + std::to_string(L2);
      EXPECT_TRUE(rel_l2_close(a.out, w1, tol, what + ": window 1"));
      EXPECT_TRUE(rel_l2_close(b.out, w2, tol, what + ": window 2 from the handed-over states"));
      EXPECT_TRUE(rel_l2_close(b.ssm, whole.ssm, tol, what + ": final SSM state"));
      EXPECT_TRUE(rel_l2_close(b.conv, whole.conv, tol, what + ": final conv window"));
      // Without the states window 2 is another computation: the states reached the output (measured in fp32,
      // after a first window long enough to leave a state that matters).
      const DevModel cold = gpu_forward(ctx, lay, B, L2, pr, params, x2, nullptr, nullptr);
      EXPECT_FALSE(test::same_bits(cold.out, b.out)) << what;
      if (pr == Precision::FP32 && L1 > 30) EXPECT_FALSE(rel_l2_close(cold.out, w2, 1e-3, what + ": zero-state window 2"));
    }
}

// A carry with null in states is the zero state: the same output bits as no carry at all (and as zeros given).
TEST(ModelCarryGpu, NullCarryIsTheStatelessForwardBitForBit) {
  const ModelConfig c = small_model(5);
  const ModelLayout lay(c);
  const std::vector<float> params = init_params(lay, 4);
  for (Precision pr : {Precision::FP32, Precision::BF16}) {
    const int B = 2, L = 45;
    const std::vector<float> x = random_vector(size_t(B) * L * c.F, 0.5f, 8);
    Context ctx;
    const DevModel none = gpu_forward(ctx, lay, B, L, pr, params, x, nullptr, nullptr, false);
    const DevModel null_in = gpu_forward(ctx, lay, B, L, pr, params, x, nullptr, nullptr);
    const std::vector<float> zc(size_t(c.NL) * carry_conv_floats(c, B), 0.0f), zs(size_t(c.NL) * carry_ssm_floats(c, B), 0.0f);
    const DevModel zeros = gpu_forward(ctx, lay, B, L, pr, params, x, &zc, &zs);
    EXPECT_TRUE(test::same_bits(none.out, null_in.out)) << to_string(pr);
    EXPECT_TRUE(test::same_bits(none.out, zeros.out)) << to_string(pr);
  }
}

// The GPU model's gradients with nonzero in states (in and out the same buffers, as the trainer hands them)
// against the reference model's, and the out states against the reference's. With padding rows: lanes of 41, 17
// and 2 present rows (RowMap: the loss on targets in date order, NaN at a date without a row; the padding rows hold
// random inputs), the map uploaded as the device gather writes it; also the loss against the reference's.
void expect_carried_gradients_match(bool padded) {
  const ModelConfig c = small_model(5);
  const ModelLayout lay(c);
  const std::vector<float> params = init_params(lay, 5);
  const int B = 3, L = 41;
  const std::vector<float> x = random_vector(size_t(B) * L * c.F, 0.5f, 9);
  std::vector<float> y = random_vector(size_t(B) * L * c.K, 1.0f, 10);
  const std::vector<float> conv0 = random_vector(size_t(c.NL) * carry_conv_floats(c, B), 0.5f, 11);
  const std::vector<float> ssm0 = random_vector(size_t(c.NL) * carry_ssm_floats(c, B), 0.3f, 12);
  const LossParams lp{B, L, c.K, LossKind::MSE, 1.0f, 0, 1};
  std::vector<int> rows = {L, 17, 2}, dates(size_t(B) * L, -1);
  for (int b = 0; b < B; ++b)
    for (int r = 0; r < rows[size_t(b)]; ++r) dates[size_t(b) * L + r] = b == 0 ? r : (r * 7 + b) * L / (7 * rows[size_t(b)] + 1);
  for (int b = 1; b < B && padded; ++b)
    for (int t = 0; t < L; ++t)
      if (std::find(dates.begin() + b * L, dates.begin() + b * L + rows[size_t(b)], t) == dates.begin() + b * L + rows[size_t(b)])
        std::fill_n(y.begin() + (size_t(b) * L + t) * c.K, c.K, std::numeric_limits<float>::quiet_NaN());
  // Reference.
  RefModel<float> ref(lay);
  std::vector<float> rconv = conv0, rssm = ssm0, rgrad(params.size(), 0.0f);
  CarryState<float> rcs{rconv.data(), rssm.data(), rconv.data(), rssm.data()};
  if (padded) rcs.rows = rows.data(), rcs.dates = dates.data();
  ref.forward(params.data(), x.data(), B, L, &rcs);
  ref.loss(y.data(), lp);
  ref.backward(params.data(), rgrad.data(), nullptr);
  // GPU, in place.
  Context ctx;
  GpuModel m(ctx, lay, B, L, Precision::FP32);
  const auto P = to_device(params), X = to_device(x), Y = to_device(y);
  auto conv = to_device(conv0), ssm = to_device(ssm0);
  DeviceBuffer<float> g(params.size());
  g.fill_bytes(0, ctx.stream());
  DeviceBuffer<int> drows(rows.size()), ddates(dates.size());
  drows.upload(rows.data(), rows.size());
  ddates.upload(dates.data(), dates.size());
  CarryState<float> cs{conv.data(), ssm.data(), conv.data(), ssm.data()};
  if (padded) cs.rows = drows.data(), cs.dates = ddates.data();
  m.forward(P.data(), X.data(), nullptr, &cs);
  DeviceBuffer<float> dloss(1);
  m.loss(Y.data(), lp, dloss.data());
  m.backward(P.data(), g.data(), nullptr);
  const float rloss = ref.loss(y.data(), lp).loss;  // the reference's again (backward above used the same)
  EXPECT_NEAR(dloss.download()[0], rloss, 1e-4 * (1 + std::abs(rloss)));
  const std::vector<float> grad = from_device(g);
  EXPECT_TRUE(rel_l2_close(conv.download(), rconv, tol::kModelParityRelL2, "out conv windows"));
  EXPECT_TRUE(rel_l2_close(ssm.download(), rssm, tol::kModelParityRelL2, "out SSM states"));
  for (const auto& t : lay.table.tensors()) {
    const std::vector<float> a(grad.begin() + t.offset, grad.begin() + t.offset + t.numel);
    const std::vector<float> r(rgrad.begin() + t.offset, rgrad.begin() + t.offset + t.numel);
    EXPECT_TRUE(rel_l2_close(a, r, tol::kModelParityRelL2, t.name));
  }
}

TEST(ModelCarryGpu, GradientsWithCarriedStatesMatchTheReference) { expect_carried_gradients_match(false); }
TEST(ModelCarryGpu, PaddingRowsMatchTheReference) { expect_carried_gradients_match(true); }

// ---- the trainer

struct CarryCase {
  ModelConfig mc;
  TrainConfig tc;
  Panel data;
};

// Short epochs (a few steps), so the runs below cross epoch boundaries and lanes move between instruments.
CarryCase carry_case(int steps) {
  CarryCase s;
  s.data = ragged(6, 160, 4);
  s.mc = small_model(4);
  s.tc.B = 3, s.tc.L = 24, s.tc.steps = steps, s.tc.lr = 3e-3f, s.tc.warmup = 3, s.tc.seed = 5, s.tc.burn_in = 2;
  s.tc.log_every = 10;
  s.tc.state = StateMode::Carry;
  return s;
}

// Time batches: 2 cross-sections of 4 of the 6 instruments, date-aligned (the ragged panel's missing rows inside
// the windows), epochs of 3 steps (6 windows of 24 in 160 dates, over 2 runs). The IC loss where asked: its
// gradient of the head's bias is zero but for rounding (a correlation ignores a shift), so AdamW turns rounding
// into lr-sized steps of that bias, and a comparison of two backends' weights is made with the MSE loss.
CarryCase time_case(int steps, LossKind loss) {
  CarryCase s = carry_case(steps);
  s.tc.batch_mode = BatchMode::Time, s.tc.dates = 2, s.tc.instruments = 4, s.tc.loss = loss;
  return s;
}

std::vector<float> train_gpu(const CarryCase& s, bool graph, int steps) {
  Context ctx;
  GpuTrainer tr(ctx, s.mc, s.tc, s.data, {graph, 0});
  for (int i = 0; i < steps; ++i) tr.step();
  return tr.params();
}

// The GPU carry trainer against the CPU one (the reference model): the same windows and states step by step, so
// the same losses and skip flags, and weights within the trainers' parity; its states in the TrainState too. One
// run with an Inf in the panel: the steps that sample it are skipped on both, and the states zeroed on both.
void expect_matches_cpu(bool time_batches) {
  for (bool poison : {false, true}) {
    CarryCase s = time_batches ? time_case(12, LossKind::MSE) : carry_case(12);
    if (poison) s.data.x[(size_t(4) * s.data.T + 60) * s.data.F + 1] = std::numeric_limits<float>::infinity();
    const int steps = 12;
    CpuTrainer cpu(s.mc, s.tc, s.data, {}, {.compute = test::on_cpu_reference()});
    Context ctx;
    GpuTrainer gpu(ctx, s.mc, s.tc, s.data, {true, 0});
    int skipped = 0;
    for (int i = 0; i < steps; ++i) {
      const StepRecord c = cpu.step();
      gpu.step();
      const StepRecord g = gpu.record(i + 1);
      ASSERT_EQ(g.skipped, c.skipped) << "step " << i + 1;
      skipped += c.skipped;
      if (!c.skipped) EXPECT_NEAR(g.loss, c.loss, 1e-4 * (1 + std::abs(c.loss))) << "step " << i + 1;
    }
    const TrainState gs = gpu.state(), cs = cpu.state();
    for (const auto& t : cpu.layout().table.tensors()) {
      const std::vector<float> g(gs.params.begin() + t.offset, gs.params.begin() + t.offset + t.numel);
      const std::vector<float> c(cs.params.begin() + t.offset, cs.params.begin() + t.offset + t.numel);
      EXPECT_TRUE(weights_close(g, c, tol::kTrainParityRelL2, s.tc.lr, t.name)) << (poison ? "poisoned" : "clean");
    }
    ASSERT_EQ(gs.carry_conv.size(), cs.carry_conv.size());
    ASSERT_EQ(gs.carry_ssm.size(), cs.carry_ssm.size());
    EXPECT_TRUE(rel_l2_close(gs.carry_conv, cs.carry_conv, 1e-3, "carried conv windows"));
    EXPECT_TRUE(rel_l2_close(gs.carry_ssm, cs.carry_ssm, 1e-3, "carried SSM states"));
    if (poison) {
      std::printf("%d of %d steps sampled the Inf and were skipped\n", skipped, steps);
      EXPECT_GT(skipped, 0) << "no window met the poisoned row: the skip path was not tested";
    }
  }
}

TEST(CarryTrainerGpu, MatchesTheCpuTrainer) { expect_matches_cpu(false); }
TEST(CarryTrainerGpu, TimeBatchesMatchTheCpuTrainer) { expect_matches_cpu(true); }

TEST(CarryTrainerGpu, GraphReplayEqualsEagerBitwise) {
  for (Precision pr : {Precision::FP32, Precision::BF16}) {
    CarryCase s = carry_case(30);
    s.tc.precision = pr;
    const auto eager = train_gpu(s, false, 30), graph = train_gpu(s, true, 30), again = train_gpu(s, true, 30);
    EXPECT_TRUE(test::same_bits(eager, graph)) << to_string(pr);
    EXPECT_TRUE(test::same_bits(graph, again)) << to_string(pr);
    s.tc.state = StateMode::Zero;  // the carried states changed the training
    EXPECT_FALSE(test::same_bits(train_gpu(s, true, 30), graph)) << to_string(pr);
  }
}

// N steps = k steps, state(), a new trainer, load_state, N − k steps: the same weights, moments and states bit for
// bit (k inside an epoch, N past several); the same weights with the states dropped diverge.
TEST(CarryTrainerGpu, ResumedRunContinuesBitForBit) {
  for (int c = 0; c < 3; ++c) {
    const Precision pr = c == 1 ? Precision::BF16 : Precision::FP32;
    CarryCase s = c == 2 ? time_case(25, LossKind::IC) : carry_case(25);  // case 2: time batches with the IC loss
    s.tc.precision = pr;
    const int N = 25, k = c == 2 ? 10 : 9;  // inside an epoch (time batches: 3 steps an epoch, so not 9)
    Context ctx;
    GpuTrainer whole(ctx, s.mc, s.tc, s.data, {true, 0});
    for (int i = 0; i < N; ++i) whole.step();
    const TrainState w = whole.state();
    TrainState mid;
    {
      GpuTrainer first(ctx, s.mc, s.tc, s.data, {true, 0});
      for (int i = 0; i < k; ++i) first.step();
      mid = first.state();
    }
    ASSERT_FALSE(mid.carry_ssm.empty());
    GpuTrainer second(ctx, s.mc, s.tc, s.data, {true, 0});
    second.load_state(mid);
    for (int i = k; i < N; ++i) second.step();
    const TrainState r = second.state();
    EXPECT_EQ(r.step, w.step);
    EXPECT_TRUE(test::same_bits(r.params, w.params)) << to_string(pr);
    EXPECT_TRUE(test::same_bits(r.m, w.m)) << to_string(pr);
    EXPECT_TRUE(test::same_bits(r.v, w.v)) << to_string(pr);
    EXPECT_TRUE(test::same_bits(r.carry_conv, w.carry_conv)) << to_string(pr);
    EXPECT_TRUE(test::same_bits(r.carry_ssm, w.carry_ssm)) << to_string(pr);
    // The same weights without the carried states: another run.
    TrainState cold = mid;
    std::fill(cold.carry_conv.begin(), cold.carry_conv.end(), 0.0f);
    std::fill(cold.carry_ssm.begin(), cold.carry_ssm.end(), 0.0f);
    GpuTrainer third(ctx, s.mc, s.tc, s.data, {true, 0});
    third.load_state(cold);
    for (int i = k; i < N; ++i) third.step();
    EXPECT_FALSE(test::same_bits(third.params(), w.params)) << to_string(pr);
    // A zero-state state is refused by a carry trainer past step 0, and a carry state by a zero-state trainer.
    TrainState none = mid;
    none.carry_conv.clear(), none.carry_ssm.clear();
    GpuTrainer fourth(ctx, s.mc, s.tc, s.data, {true, 0});
    EXPECT_THROW(fourth.load_state(none), Error);
    CarryCase z = s;
    z.tc.state = StateMode::Zero;
    GpuTrainer fifth(ctx, z.mc, z.tc, z.data, {true, 0});
    EXPECT_THROW(fifth.load_state(mid), Error);
  }
}

// Each member of a population carries its own states: member m equals its solo run bitwise (carry members with
// their own seeds beside a zero-state one, on two lanes).
TEST(CarryTrainerGpu, PopulationMembersEqualSoloRuns) {
  const CarryCase s = carry_case(20);
  std::vector<TrainConfig> tcs(3, s.tc);
  tcs[1].seed = 6;
  tcs[2].state = StateMode::Zero;
  std::vector<PopulationMember> pm;
  for (const TrainConfig& t : tcs) pm.push_back({t, &s.data});
  Context ctx;
  PopulationTrainer pop(ctx, s.mc, pm, {.graph = true, .ring_size = 0, .lanes = 2});
  for (int i = 0; i < 20; ++i) pop.step();
  for (int m = 0; m < 3; ++m) {
    CarryCase solo = s;
    solo.tc = tcs[size_t(m)];
    const TrainState p = pop.state(m);
    Context sctx;
    GpuTrainer tr(sctx, solo.mc, solo.tc, solo.data, {true, 0});
    for (int i = 0; i < 20; ++i) tr.step();
    const TrainState o = tr.state();
    EXPECT_TRUE(test::same_bits(p.params, o.params)) << "member " << m;
    EXPECT_TRUE(test::same_bits(p.carry_ssm, o.carry_ssm)) << "member " << m;
    EXPECT_EQ(p.carry_ssm.empty(), m == 2);
  }
}

}  // namespace
}  // namespace mlalpha::test
