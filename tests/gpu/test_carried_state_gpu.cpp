// The GPU SSD and causal conv with a carried state (ssd.h: SsdInputs::h0, h_last, SsdGrads::dh0; conv1d.h:
// Conv1dInputs::window0, window_last, Conv1dGrads::dwindow0), against the CPU reference in double, as
// tests/cpu/test_carried_state.cpp holds them on the CPU:
// - the forward (y, the final state) and every gradient (dh0, dwindow0 included) with a nonzero initial state,
//   in every precision and on both SSD paths (the chunk walks and the chunk-parallel kernels, segmented too);
// - window k's final state handed to window k + 1 equals one forward over both (h_last written over h0 too);
// - a zero initial state is no initial state, bit for bit; L = 0 hands the state through.
// Shapes with windows not a multiple of the chunk and conv windows shorter than W − 1. Fresh random inputs each
// run (MLALPHA_TEST_SEED replays one); every output is poisoned (NaN) before the call.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "ops/conv1d/conv1d.h"
#include "ops/ssd/ssd.h"
#include "test_util.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

using V = std::vector<double>;
using F = std::vector<float>;

std::vector<double> minus(const F& a, const F& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = double(a[i]) - double(b[i]);
  return out;
}
V minus(const V& a, const F& b) {
  V out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] - double(b[i]);
  return out;
}

// ---- SSD ----

// Two windows of L1 and L2 steps (x, B, C in one (B, L, ld) activation: x at 0, B at H·P, C at H·P + G·N).
struct SsdShape {
  int B, L1, L2, H, P, G, N, Q, pad = 0;
  int ld() const { return H * P + 2 * G * N + pad; }
  int bo() const { return H * P; }
  int co() const { return H * P + G * N; }
  size_t states() const { return size_t(B) * H * P * N; }
  SsdParams params(int L, Precision m, SsdAlgo algo) const {
    SsdParams p{B, L, H, P, G, N, Q, ld()};
    p.precision = m, p.algo = algo;
    return p;
  }
  std::string name() const {
    return "B=" + std::to_string(B) + " L=" + std::to_string(L1) + "+" + std::to_string(L2) + " H=" +
           std::to_string(H) + " P=" + std::to_string(P) + " G=" + std::to_string(G) + " N=" + std::to_string(N) +
           " Q=" + std::to_string(Q);
  }
};
// Windows not a multiple of the chunk; the walks' cluster shapes, scalar staging, the model's head shapes.
const SsdShape kSsdShapes[] = {
    {2, 70, 45, 4, 16, 2, 24, 32},     // chunks of 32, G = 2 (walk clusters of 2), ragged chunks
    {1, 100, 37, 8, 32, 1, 64, 64},    // 'S' head, 8 heads a group (clusters of 8)
    {1, 33, 20, 3, 5, 2, 7, 16, 1},    // odd P and N, padded ld, H not a multiple of G
    {1, 130, 64, 2, 64, 1, 128, 64},   // 'L' head, a last chunk of 2
    {2, 50, 30, 2, 64, 1, 64, 64},     // 'M' head, one chunk a window
};

// The op's random inputs over L1 + L2 steps, a nonzero initial state and dy.
struct SsdData {
  F xbc, delta, A_log, D, h0, dy, dA_log0, dD0;
  SsdData(const SsdShape& s, uint64_t salt) {
    auto rng = make_rng(salt);
    const size_t rows = size_t(s.B) * (s.L1 + s.L2);
    xbc = random_vec<float>(rows * s.ld(), rng);
    delta = random_vec<float>(rows * s.H, rng, std::log(1e-3), std::log(1e-1));
    for (auto& d : delta) d = std::exp(d);
    A_log = random_vec<float>(s.H, rng, std::log(0.5), std::log(4.0));  // the state lasts tens of steps
    D = random_vec<float>(s.H, rng, 0.5, 1.5);
    h0 = random_vec<float>(s.states(), rng);
    dy = random_vec<float>(rows * s.H * s.P, rng);
    dA_log0 = random_vec<float>(s.H, rng, -0.1, 0.1);
    dD0 = random_vec<float>(s.H, rng, -0.1, 0.1);
  }
};

struct SsdOut {
  F y, saved, h_last, dxbc, ddelta, dA_log, dD, dh0;
};
// One forward and backward on the GPU over L steps of (xbc, delta, dy) from h0 (null: none); h_last and dh0
// asked for when want_state.
SsdOut run_ssd(const SsdParams& p, const SsdShape& s, const F& xbc, const F& delta, const F& dy, const SsdData& d,
               const F* h0, bool want_state) {
  const size_t rows = size_t(p.B) * p.L;
  auto x_g = to_device(xbc), dt_g = to_device(delta), A_g = to_device(d.A_log), D_g = to_device(d.D),
       dy_g = to_device(dy);
  auto h0_g = to_device(h0 ? *h0 : F(1));
  auto y = poisoned(rows * p.H * p.P), saved = poisoned(gpu::ssd_saved_floats(p)), hl = poisoned(s.states());
  const SsdInputs<float> in{.x = x_g.data(), .delta = dt_g.data(), .A_log = A_g.data(), .Bm = x_g.data() + s.bo(),
                            .Cm = x_g.data() + s.co(), .Dskip = D_g.data(), .h0 = h0 ? h0_g.data() : nullptr,
                            .h_last = want_state ? hl.data() : nullptr};
  gpu::ssd_fwd(p, in, y.data(), saved.data(), nullptr);
  auto dxbc = poisoned(rows * p.ld), ddelta = poisoned(rows * p.H), ws = poisoned(gpu::ssd_bwd_workspace_floats(p));
  auto dA = to_device(d.dA_log0), dD = to_device(d.dD0), dh0 = poisoned(s.states());
  gpu::ssd_bwd(p, in, saved.data(), dy_g.data(),
               {.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA.data(), .dB = dxbc.data() + s.bo(),
                .dC = dxbc.data() + s.co(), .dD = dD.data(), .dh0 = want_state ? dh0.data() : nullptr},
               ws.data(), nullptr);
  SsdOut o{from_device(y), from_device(saved), F(), from_device(dxbc), from_device(ddelta), from_device(dA),
           from_device(dD), F()};
  if (want_state) o.h_last = from_device(hl), o.dh0 = from_device(dh0);
  return o;
}

// The saved buffer starts with the chunk states (B, H, nchunks, P, N): chunk 0's of every (b, h) is h0 itself
// (fp32 in every mode).
bool saves_h0(const F& saved, const F& h0, const SsdParams& p) {
  const size_t PN = size_t(p.P) * p.N, BH = size_t(p.B) * p.H, nc = gpu::ssd_chunk_states_floats(p) / (BH * PN);
  for (size_t bh = 0; bh < BH; ++bh)
    if (!same_bits(std::span<const float>(saved.data() + bh * nc * PN, PN), std::span<const float>(h0.data() + bh * PN, PN)))
      return false;
  return true;
}

double ssd_tol(Precision m) {
  return m == Precision::FP32 ? tol::kGpuSsdRelL2 : m == Precision::TF32 ? tol::kGpuSsdTf32RelL2 : tol::kGpuSsdBf16RelL2;
}
double ssd_tol_dA(Precision m) {
  return m == Precision::FP32 ? tol::kGpuSsdDALogRelL2 : m == Precision::TF32 ? tol::kGpuSsdTf32DALogRelL2 : ssd_tol(m);
}

// The forward and every gradient with a nonzero h0 over the first window, against the double reference.
void check_ssd_against_ref(const SsdShape& s, Precision m, SsdAlgo algo, uint64_t salt) {
  const SsdParams p = s.params(s.L1, m, algo);
  SCOPED_TRACE(s.name() + " " + to_string(m) + (gpu::ssd_uses_walk(p) ? " walk" : " chunked"));
  const SsdData d(s, salt);
  const int L = s.L1 + s.L2;
  const F x1 = time_slice(d.xbc, s.B, L, s.ld(), 0, s.L1), dt1 = time_slice(d.delta, s.B, L, s.H, 0, s.L1);
  const F dy1 = time_slice(d.dy, s.B, L, size_t(s.H) * s.P, 0, s.L1);
  const SsdOut got = run_ssd(p, s, x1, dt1, dy1, d, &d.h0, true);

  const V x = cast_vec<double>(x1), dt = cast_vec<double>(dt1), A = cast_vec<double>(d.A_log),
          D = cast_vec<double>(d.D), h0 = cast_vec<double>(d.h0), dy = cast_vec<double>(dy1);
  const size_t rows = size_t(s.B) * s.L1;
  V y(rows * s.H * s.P), h_last(s.states()), dxbc(rows * s.ld(), 0.0), ddelta(rows * s.H), dh0(s.states());
  V dA = cast_vec<double>(d.dA_log0), dD = cast_vec<double>(d.dD0);
  const SsdInputs<double> in{.x = x.data(), .delta = dt.data(), .A_log = A.data(), .Bm = x.data() + s.bo(),
                             .Cm = x.data() + s.co(), .Dskip = D.data(), .h0 = h0.data(), .h_last = h_last.data()};
  ref::ssd_fwd_recurrent<double>(p, in, y.data());
  ref::ssd_bwd<double>(p, in, dy.data(),
                       {.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA.data(), .dB = dxbc.data() + s.bo(),
                        .dC = dxbc.data() + s.co(), .dD = dD.data(), .dh0 = dh0.data()});

  const double t = ssd_tol(m), tA = ssd_tol_dA(m);
  EXPECT_TRUE(rel_l2_close(got.y, y, t, "y"));
  EXPECT_TRUE(rel_l2_close(got.h_last, h_last, t, "h_last"));
  EXPECT_TRUE(saves_h0(got.saved, d.h0, p)) << "the saved chunk state 0 is not h0";
  const int ld = s.ld(), bo = s.bo(), co = s.co(), ce = co + s.G * s.N;
  EXPECT_TRUE(rel_l2_close(cols(got.dxbc, ld, 0, bo), cols(dxbc, ld, 0, bo), t, "dx"));
  EXPECT_TRUE(rel_l2_close(cols(got.dxbc, ld, bo, co), cols(dxbc, ld, bo, co), t, "dB"));
  EXPECT_TRUE(rel_l2_close(cols(got.dxbc, ld, co, ce), cols(dxbc, ld, co, ce), t, "dC"));
  EXPECT_TRUE(rel_l2_close(got.ddelta, ddelta, t, "ddelta"));
  EXPECT_TRUE(rel_l2_close(minus(got.dA_log, d.dA_log0), minus(dA, d.dA_log0), tA, "dA_log increment"));
  EXPECT_TRUE(rel_l2_close(minus(got.dD, d.dD0), minus(dD, d.dD0), t, "dD increment"));
  EXPECT_TRUE(rel_l2_close(got.dh0, dh0, t, "dh0"));
}

const Precision kModes[] = {Precision::FP32, Precision::TF32, Precision::BF16};

TEST(CarriedSsdGpu, WalksAgainstReference) {
  uint64_t salt = 1;
  for (const Precision m : kModes)
    for (const SsdShape& s : kSsdShapes) check_ssd_against_ref(s, m, SsdAlgo::kWalk, 100 + salt++);
}

TEST(CarriedSsdGpu, ChunkedAgainstReference) {
  uint64_t salt = 1;
  for (const Precision m : kModes) {
    for (const SsdShape& s : kSsdShapes) check_ssd_against_ref(s, m, SsdAlgo::kChunked, 200 + salt++);
    check_ssd_against_ref({1, 50, 20, 2, 128, 1, 16, 16}, m, SsdAlgo::kChunked, 200 + salt++);  // two p tiles
  }
}

// More than 64 chunks: the chunk-state walks in segments, the final step (h_last, dh0) a launch of its own after
// the carries (ssd_chunks.cu). 67 and 66 chunks: segments of 32, 32 and 2 or 1 steps.
TEST(CarriedSsdGpu, SegmentedAgainstReference) {
  check_ssd_against_ref({1, 64 * 66 + 5, 64, 2, 16, 1, 16, 64}, Precision::FP32, SsdAlgo::kChunked, 301);
  check_ssd_against_ref({1, 64 * 66, 64, 2, 32, 1, 64, 64}, Precision::BF16, SsdAlgo::kChunked, 302);
}

// The smallest shapes of each kernel instance the state touches, for the sanitizers: the walks with clusters of 8
// (bf16, packed reverse walk) and with scalar staging, the chunk-parallel path unsegmented and segmented (its
// final steps as a launch of their own: 66 chunks, segments of 32, 32 and 1 step).
TEST(CarriedSsdGpu, SanitizerSmall) {
  check_ssd_against_ref({1, 70, 8, 8, 32, 1, 64, 64}, Precision::BF16, SsdAlgo::kWalk, 351);
  check_ssd_against_ref({1, 33, 3, 3, 5, 2, 7, 16, 1}, Precision::FP32, SsdAlgo::kWalk, 352);
  check_ssd_against_ref({1, 70, 8, 2, 16, 2, 24, 32}, Precision::FP32, SsdAlgo::kChunked, 353);
  check_ssd_against_ref({1, 64 * 66, 8, 1, 8, 1, 8, 64}, Precision::FP32, SsdAlgo::kChunked, 354);
}

// Window 1 from h0, window 2 from window 1's h_last (on the device), against one reference forward over both;
// window 2 again with h_last written over its h0 (ssd.h allows it): the same bits.
TEST(CarriedSsdGpu, HandOverIsOneForward) {
  uint64_t salt = 1;
  for (const SsdAlgo algo : {SsdAlgo::kWalk, SsdAlgo::kChunked})
    for (const Precision m : kModes)
      for (const SsdShape& s : kSsdShapes) {
        const SsdParams p1 = s.params(s.L1, m, algo), p2 = s.params(s.L2, m, algo);
        SCOPED_TRACE(s.name() + " " + to_string(m) + (gpu::ssd_uses_walk(p1) ? " walk" : " chunked"));
        const SsdData d(s, 400 + salt++);
        const int L = s.L1 + s.L2;
        const size_t Y = size_t(s.H) * s.P;
        V y_full(size_t(s.B) * L * Y), h_full(s.states());
        {
          const V x = cast_vec<double>(d.xbc), dt = cast_vec<double>(d.delta), A = cast_vec<double>(d.A_log),
                  D = cast_vec<double>(d.D), h0 = cast_vec<double>(d.h0);
          ref::ssd_fwd_recurrent<double>(
              s.params(L, m, algo),
              {.x = x.data(), .delta = dt.data(), .A_log = A.data(), .Bm = x.data() + s.bo(), .Cm = x.data() + s.co(),
               .Dskip = D.data(), .h0 = h0.data(), .h_last = h_full.data()},
              y_full.data());
        }
        auto A_g = to_device(d.A_log), D_g = to_device(d.D), h0_g = to_device(d.h0);
        auto fwd = [&](const SsdParams& p, int t0, const float* h0, float* h_last, DeviceBuffer<float>& y) {
          const F xs = time_slice(d.xbc, s.B, L, s.ld(), t0, p.L), dts = time_slice(d.delta, s.B, L, s.H, t0, p.L);
          auto x_g = to_device(xs), dt_g = to_device(dts), saved = poisoned(gpu::ssd_saved_floats(p));
          gpu::ssd_fwd(p,
                       {.x = x_g.data(), .delta = dt_g.data(), .A_log = A_g.data(), .Bm = x_g.data() + s.bo(),
                        .Cm = x_g.data() + s.co(), .Dskip = D_g.data(), .h0 = h0, .h_last = h_last},
                       y.data(), saved.data(), nullptr);
          MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
        };
        auto y1 = poisoned(size_t(s.B) * s.L1 * Y), y2 = poisoned(size_t(s.B) * s.L2 * Y);
        auto h1 = poisoned(s.states()), h2 = poisoned(s.states());
        fwd(p1, 0, h0_g.data(), h1.data(), y1);
        fwd(p2, s.L1, h1.data(), h2.data(), y2);
        const double t = ssd_tol(m);
        EXPECT_TRUE(rel_l2_close(time_join(from_device(y1), from_device(y2), s.B, s.L1, s.L2, Y), y_full, t, "y"));
        EXPECT_TRUE(rel_l2_close(from_device(h2), h_full, t, "h_last"));
        auto y2b = poisoned(y2.size());
        fwd(p2, s.L1, h1.data(), h1.data(), y2b);  // in place: h1 becomes window 2's final state
        EXPECT_TRUE(same_bits(from_device(y2b), from_device(y2)) && same_bits(from_device(h1), from_device(h2)))
            << "h_last over h0";
      }
}

// A zero h0 is no h0: every output and the saved buffer the same bits, on both paths in every mode.
TEST(CarriedSsdGpu, ZeroStateIsNoState) {
  uint64_t salt = 1;
  for (const SsdAlgo algo : {SsdAlgo::kWalk, SsdAlgo::kChunked})
    for (const Precision m : kModes)
      for (const SsdShape& s : {kSsdShapes[0], kSsdShapes[1], kSsdShapes[3]}) {
        const SsdParams p = s.params(s.L1, m, algo);
        SCOPED_TRACE(s.name() + " " + to_string(m) + (gpu::ssd_uses_walk(p) ? " walk" : " chunked"));
        const SsdData d(s, 500 + salt++);
        const int L = s.L1 + s.L2;
        const F x1 = time_slice(d.xbc, s.B, L, s.ld(), 0, s.L1), dt1 = time_slice(d.delta, s.B, L, s.H, 0, s.L1);
        const F dy1 = time_slice(d.dy, s.B, L, size_t(s.H) * s.P, 0, s.L1);
        const F zeros(s.states(), 0.f);
        const SsdOut a = run_ssd(p, s, x1, dt1, dy1, d, nullptr, false), b = run_ssd(p, s, x1, dt1, dy1, d, &zeros, true);
        EXPECT_TRUE(same_bits(a.y, b.y)) << "y";
        EXPECT_TRUE(same_bits(a.saved, b.saved)) << "saved";
        EXPECT_TRUE(same_bits(cols(a.dxbc, s.ld(), 0, s.co() + s.G * s.N), cols(b.dxbc, s.ld(), 0, s.co() + s.G * s.N)))
            << "dx, dB, dC";
        EXPECT_TRUE(same_bits(a.ddelta, b.ddelta)) << "ddelta";
        EXPECT_TRUE(same_bits(a.dA_log, b.dA_log) && same_bits(a.dD, b.dD)) << "dA_log, dD";
      }
}

// L = 0: the final state is the initial one (or zeros), and h0 reaches nothing.
TEST(CarriedSsdGpu, EmptyWindowHandsTheStateThrough) {
  const SsdShape s{2, 0, 0, 2, 8, 1, 16, 64};
  const SsdParams p = s.params(0, Precision::FP32, SsdAlgo::kAuto);
  auto rng = make_rng(601);
  const F h0 = random_vec<float>(s.states(), rng);
  auto h0_g = to_device(h0), hl = poisoned(s.states()), dh0 = poisoned(s.states());
  gpu::ssd_fwd(p, {.h0 = h0_g.data(), .h_last = hl.data()}, nullptr, nullptr, nullptr);
  gpu::ssd_bwd(p, {.h0 = h0_g.data()}, nullptr, nullptr, {.dh0 = dh0.data()}, nullptr, nullptr);
  EXPECT_TRUE(same_bits(from_device(hl), h0));
  EXPECT_TRUE(same_bits(from_device(dh0), F(s.states(), 0.f)));
  auto hz = poisoned(s.states());
  gpu::ssd_fwd(p, {.h_last = hz.data()}, nullptr, nullptr, nullptr);
  EXPECT_TRUE(same_bits(from_device(hz), F(s.states(), 0.f)));
}

// ---- causal conv ----

// Two windows of L1 and L2 steps; x a column slice (ld_x ≥ C, NaN in the other columns).
struct ConvShape {
  int B, L1, L2, C, W, ld_x;
  Conv1dParams params(int L) const { return Conv1dParams{B, L, C, W, ld_x}; }
  size_t window() const { return size_t(B) * (W - 1) * C; }
  std::string name() const {
    return "B=" + std::to_string(B) + " L=" + std::to_string(L1) + "+" + std::to_string(L2) + " C=" +
           std::to_string(C) + " W=" + std::to_string(W) + " ld_x=" + std::to_string(ld_x);
  }
};
const ConvShape kConvShapes[] = {
    {2, 2, 5, 8, 4, 8},          // L1 < W − 1 (float4)
    {3, 3, 2, 7, 8, 9},          // L1, L2 < W − 1 = 7 (scalar)
    {2, 45, 70, 68, 4, 72},      // float4, ragged tiles
    {1, 200, 131, 130, 4, 300},  // over several 128-step blocks (scalar: C % 4 == 2)
    {2, 33, 40, 132, 8, 136},    // W = 8 (float4), a second block of channels
    {2, 17, 9, 36, 1, 40},       // W = 1: an empty window
    {2, 64, 64, 640, 4, 1160},   // the 'M' model's channels and row stride
};

struct ConvData {
  F x, w, bias, window0, dy, dw0, db0;
  ConvData(const ConvShape& s, uint64_t salt) {
    auto rng = make_rng(salt);
    const size_t rows = size_t(s.B) * (s.L1 + s.L2);
    x.assign(rows * s.ld_x, std::nanf(""));
    const F v = random_vec<float>(rows * s.C, rng);
    for (size_t r = 0; r < rows; ++r)
      for (int c = 0; c < s.C; ++c) x[r * s.ld_x + c] = v[r * s.C + c];
    w = random_vec<float>(size_t(s.C) * s.W, rng), bias = random_vec<float>(s.C, rng);
    window0 = random_vec<float>(s.window(), rng);
    dy = random_vec<float>(rows * s.C, rng);
    dw0 = random_vec<float>(size_t(s.C) * s.W, rng), db0 = random_vec<float>(s.C, rng);
  }
};

struct ConvOut {
  F y, window_last, dx, dw, dbias, dwindow0;
};
ConvOut run_conv(const Conv1dParams& p, const ConvShape& s, const F& x, const F& dy, const ConvData& d,
                 const F* window0, bool want_state) {
  auto x_g = to_device(x), w_g = to_device(d.w), b_g = to_device(d.bias), dy_g = to_device(dy);
  auto win_g = to_device(window0 ? *window0 : F(1)), wl = poisoned(std::max<size_t>(s.window(), 1));
  auto y = poisoned(size_t(p.B) * p.L * p.C), dx = poisoned(size_t(p.B) * p.L * p.ld_x);
  auto dw = to_device(d.dw0), db = to_device(d.db0), dwin = poisoned(std::max<size_t>(s.window(), 1));
  auto ws = poisoned(gpu::conv1d_silu_bwd_workspace_floats(p));
  const Conv1dInputs<float> in{.x = x_g.data(), .w = w_g.data(), .bias = b_g.data(),
                               .window0 = window0 ? win_g.data() : nullptr,
                               .window_last = want_state ? wl.data() : nullptr};
  gpu::conv1d_silu_fwd(p, in, y.data(), nullptr);
  gpu::conv1d_silu_bwd(p, in, dy_g.data(),
                       {.dx = dx.data(), .dw = dw.data(), .dbias = db.data(),
                        .dwindow0 = want_state ? dwin.data() : nullptr},
                       ws.data(), nullptr);
  ConvOut o{from_device(y), F(), from_device(dx), from_device(dw), from_device(db), F()};
  if (want_state) {
    o.window_last = from_device(wl), o.dwindow0 = from_device(dwin);
    o.window_last.resize(s.window()), o.dwindow0.resize(s.window());
  }
  return o;
}

TEST(CarriedConvGpu, AgainstReference) {
  uint64_t salt = 1;
  for (const ConvShape& s : kConvShapes) {
    SCOPED_TRACE(s.name());
    const ConvData d(s, 700 + salt++);
    const int L = s.L1 + s.L2;
    const Conv1dParams p = s.params(s.L1);
    const F x1 = time_slice(d.x, s.B, L, s.ld_x, 0, s.L1), dy1 = time_slice(d.dy, s.B, L, s.C, 0, s.L1);
    const ConvOut got = run_conv(p, s, x1, dy1, d, &d.window0, true);

    const V x = cast_vec<double>(x1), w = cast_vec<double>(d.w), bias = cast_vec<double>(d.bias),
            win = cast_vec<double>(d.window0), dy = cast_vec<double>(dy1);
    V y(size_t(s.B) * s.L1 * s.C), wl(s.window()), dx(x.size(), 0.0), dwin(s.window());
    V dw = cast_vec<double>(d.dw0), db = cast_vec<double>(d.db0);
    const Conv1dInputs<double> in{.x = x.data(), .w = w.data(), .bias = bias.data(), .window0 = win.data(),
                                  .window_last = wl.data()};
    ref::conv1d_silu_fwd<double>(p, in, y.data());
    ref::conv1d_silu_bwd<double>(p, in, dy.data(),
                                 {.dx = dx.data(), .dw = dw.data(), .dbias = db.data(), .dwindow0 = dwin.data()});
    EXPECT_TRUE(all_close(got.y, y, tol::kGpuElemAbs, tol::kGpuElemRel, "y"));
    EXPECT_EQ(cast_vec<double>(got.window_last), wl) << "window_last (copies of inputs: exact)";
    EXPECT_TRUE(all_close(cols(got.dx, s.ld_x, 0, s.C), cols(dx, s.ld_x, 0, s.C), tol::kGpuElemAbs,
                          tol::kGpuElemRel, "dx"));
    if (s.W > 1)  // (W = 1: no window; all_close reads element 0 for its message)
      EXPECT_TRUE(all_close(got.dwindow0, dwin, tol::kGpuElemAbs, tol::kGpuElemRel, "dwindow0"));
    EXPECT_TRUE(rel_l2_close(minus(got.dw, d.dw0), minus(dw, d.dw0), tol::kGpuReduceRelL2, "dw increment"));
    EXPECT_TRUE(rel_l2_close(minus(got.dbias, d.db0), minus(db, d.db0), tol::kGpuReduceRelL2, "dbias increment"));
  }
}

// Window 1 from window0, window 2 from window 1's window_last (on the device): one reference forward over both.
TEST(CarriedConvGpu, HandOverIsOneForward) {
  uint64_t salt = 1;
  for (const ConvShape& s : kConvShapes) {
    SCOPED_TRACE(s.name());
    const ConvData d(s, 800 + salt++);
    const int L = s.L1 + s.L2;
    V y_full(size_t(s.B) * L * s.C), wl_full(s.window());
    {
      const V x = cast_vec<double>(d.x), w = cast_vec<double>(d.w), bias = cast_vec<double>(d.bias),
              win = cast_vec<double>(d.window0);
      ref::conv1d_silu_fwd<double>(s.params(L),
                                   {.x = x.data(), .w = w.data(), .bias = bias.data(), .window0 = win.data(),
                                    .window_last = wl_full.data()},
                                   y_full.data());
    }
    auto w_g = to_device(d.w), b_g = to_device(d.bias), win0 = to_device(d.window0);
    auto wl1 = poisoned(std::max<size_t>(s.window(), 1)), wl2 = poisoned(std::max<size_t>(s.window(), 1));
    auto fwd = [&](int t0, int len, const float* win, float* wl) {
      auto x_g = to_device(time_slice(d.x, s.B, L, s.ld_x, t0, len));
      auto y = poisoned(size_t(s.B) * len * s.C);
      gpu::conv1d_silu_fwd(s.params(len), {.x = x_g.data(), .w = w_g.data(), .bias = b_g.data(), .window0 = win,
                                           .window_last = wl},
                           y.data(), nullptr);
      return from_device(y);
    };
    const F y1 = fwd(0, s.L1, win0.data(), wl1.data()), y2 = fwd(s.L1, s.L2, wl1.data(), wl2.data());
    EXPECT_TRUE(all_close(time_join(y1, y2, s.B, s.L1, s.L2, s.C), y_full, tol::kGpuElemAbs, tol::kGpuElemRel, "y"));
    F wl = from_device(wl2);
    wl.resize(s.window());
    EXPECT_EQ(cast_vec<double>(wl), wl_full) << "window_last";
  }
}

// A zero window0 is no window0, bit for bit; L = 0 hands the window through and reaches no output.
TEST(CarriedConvGpu, ZeroWindowIsNoWindow) {
  uint64_t salt = 1;
  for (const ConvShape& s : kConvShapes) {
    SCOPED_TRACE(s.name());
    const ConvData d(s, 900 + salt++);
    const int L = s.L1 + s.L2;
    const Conv1dParams p = s.params(s.L1);
    const F x1 = time_slice(d.x, s.B, L, s.ld_x, 0, s.L1), dy1 = time_slice(d.dy, s.B, L, s.C, 0, s.L1);
    const F zeros(s.window(), 0.f);
    const ConvOut a = run_conv(p, s, x1, dy1, d, nullptr, false), b = run_conv(p, s, x1, dy1, d, &zeros, true);
    EXPECT_TRUE(same_bits(a.y, b.y)) << "y";
    EXPECT_TRUE(same_bits(cols(a.dx, s.ld_x, 0, s.C), cols(b.dx, s.ld_x, 0, s.C))) << "dx";
    EXPECT_TRUE(same_bits(a.dw, b.dw) && same_bits(a.dbias, b.dbias)) << "dw, dbias";
  }
  const ConvShape s{2, 0, 0, 12, 4, 12};
  auto rng = make_rng(950);
  const F win = random_vec<float>(s.window(), rng);
  auto win_g = to_device(win), wl = poisoned(s.window()), dwin = poisoned(s.window());
  gpu::conv1d_silu_fwd(s.params(0), {.window0 = win_g.data(), .window_last = wl.data()}, nullptr, nullptr);
  gpu::conv1d_silu_bwd(s.params(0), {.window0 = win_g.data()}, nullptr, {.dwindow0 = dwin.data()}, nullptr, nullptr);
  EXPECT_TRUE(same_bits(from_device(wl), win));
  EXPECT_TRUE(same_bits(from_device(dwin), F(s.window(), 0.f)));
}

}  // namespace
}  // namespace mlalpha::test
