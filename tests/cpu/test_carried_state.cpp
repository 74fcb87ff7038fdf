// The SSD and the causal conv with a carried state (ssd.h: SsdInputs::h0, h_last; conv1d.h: Conv1dInputs::window0,
// window_last), the layer stateful training stands on (docs/decisions.md, "Stateful training: the plan"):
// - a window started from the state the previous window ended with is that part of one forward over both
//   (the reference in double, bit for bit where the arithmetic is the same; the fast CPU path against it);
// - gradients of every input, the initial state included, against central finite differences;
// - the fast CPU backward against the reference backward with a nonzero initial state;
// - a zero initial state is no initial state, bit for bit (the null pointer is today's op).
// Fresh random inputs each run (MLALPHA_TEST_SEED replays one); every output is poisoned (NaN) before the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/rows.h"
#include "cpu/thread_pool.h"
#include "fd_util.h"
#include "ops/conv1d/conv1d.h"
#include "ops/conv1d/conv1d_cpu.h"
#include "ops/ssd/ssd.h"
#include "ops/ssd/ssd_cpu.h"
#include "test_util.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

using V = std::vector<double>;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename T>
std::vector<T> poisoned_vec(size_t n) {
  return std::vector<T>(n, static_cast<T>(kNaN));
}

// ---- SSD ----

// Two windows of L1 and L2 steps; Q the chunk length (L1, L2 need not be multiples of it).
struct SsdShape {
  int B, L1, L2, H, P, G, N, Q;
  int L() const { return L1 + L2; }
  int ld() const { return H * P + 2 * G * N; }  // every column is x, B or C: all of dxBC is written
  size_t states() const { return size_t(B) * H * P * N; }
  SsdParams params(int L) const { return SsdParams{B, L, H, P, G, N, Q, ld()}; }
  std::string name() const {
    return "B=" + std::to_string(B) + " L=" + std::to_string(L1) + "+" + std::to_string(L2) + " H=" +
           std::to_string(H) + " P=" + std::to_string(P) + " G=" + std::to_string(G) + " N=" + std::to_string(N) +
           " Q=" + std::to_string(Q);
  }
};
const SsdShape kSsdShapes[] = {{2, 7, 5, 2, 3, 1, 4, 4},   {1, 16, 16, 4, 2, 2, 3, 8}, {3, 1, 9, 2, 2, 1, 2, 4},
                               {1, 13, 20, 2, 4, 2, 8, 5}, {2, 33, 31, 4, 8, 1, 16, 16}};

// The op's random inputs over the whole L = L1 + L2 steps, and a random nonzero initial state.
struct SsdData {
  V xbc, delta, A_log, D, h0;
  SsdData(const SsdShape& s, std::mt19937_64& rng)
      : xbc(random_vec<double>(size_t(s.B) * s.L() * s.ld(), rng)),
        delta(random_vec<double>(size_t(s.B) * s.L() * s.H, rng, 0.05, 0.8)),
        A_log(random_vec<double>(s.H, rng, -0.5, 1.0)),
        D(random_vec<double>(s.H, rng)),
        h0(random_vec<double>(s.states(), rng)) {}
};
template <typename T>
SsdInputs<T> ssd_inputs(const SsdShape& s, const std::vector<T>& xbc, const std::vector<T>& delta,
                        const std::vector<T>& A_log, const std::vector<T>& D, const T* h0, T* h_last) {
  const int bo = s.H * s.P, co = bo + s.G * s.N;
  return {.x = xbc.data(), .delta = delta.data(), .A_log = A_log.data(), .Bm = xbc.data() + bo,
          .Cm = xbc.data() + co, .Dskip = D.data(), .h0 = h0, .h_last = h_last};
}

// One reference forward (recurrent, double) over both windows from h0: the hand-over tests' expectation.
struct Whole {
  V y;     // (B, L1 + L2, ...): the outputs
  V last;  // the final state (SSD: h_last) or window (conv: window_last)
};
Whole ssd_whole(const SsdShape& s, const SsdData& d) {
  Whole w{poisoned_vec<double>(size_t(s.B) * s.L() * s.H * s.P), poisoned_vec<double>(s.states())};
  ref::ssd_fwd_recurrent(s.params(s.L()), ssd_inputs(s, d.xbc, d.delta, d.A_log, d.D, d.h0.data(), w.last.data()),
                         w.y.data());
  return w;
}

// The reference in double: window 1 from h0, window 2 from window 1's final state, equals one forward over both
// from h0 (outputs and the final state), in the recurrent form (the same arithmetic: bit for bit) and the chunked
// one (another summation: to kChunkedVsRecurrent).
TEST(CarriedSsd, ReferenceHandOverIsOneForward) {
  for (const SsdShape& s : kSsdShapes) {
    auto rng = make_rng(s.L1 * 31 + s.L2 * 7 + s.N);
    const SsdData d(s, rng);
    const size_t Y = size_t(s.H) * s.P;
    const auto [y_full, h_full] = ssd_whole(s, d);
    const V x1 = time_slice(d.xbc, s.B, s.L(), s.ld(), 0, s.L1), x2 = time_slice(d.xbc, s.B, s.L(), s.ld(), s.L1, s.L2);
    const V d1 = time_slice(d.delta, s.B, s.L(), s.H, 0, s.L1), d2 = time_slice(d.delta, s.B, s.L(), s.H, s.L1, s.L2);
    for (bool chunked : {false, true}) {
      const auto fwd = chunked ? ref::ssd_fwd_chunked<double> : ref::ssd_fwd_recurrent<double>;
      auto y1 = poisoned_vec<double>(size_t(s.B) * s.L1 * Y), y2 = poisoned_vec<double>(size_t(s.B) * s.L2 * Y);
      auto h1 = poisoned_vec<double>(s.states()), h2 = poisoned_vec<double>(s.states());
      fwd(s.params(s.L1), ssd_inputs(s, x1, d1, d.A_log, d.D, d.h0.data(), h1.data()), y1.data());
      fwd(s.params(s.L2), ssd_inputs(s, x2, d2, d.A_log, d.D, h1.data(), h2.data()), y2.data());
      const V y = time_join(y1, y2, s.B, s.L1, s.L2, Y);
      const std::string what = s.name() + (chunked ? " chunked" : " recurrent");
      if (chunked) {
        EXPECT_TRUE(all_close(y, y_full, tol::kChunkedVsRecurrent, tol::kChunkedVsRecurrent, what + " y"));
        EXPECT_TRUE(all_close(h2, h_full, tol::kChunkedVsRecurrent, tol::kChunkedVsRecurrent, what + " h_last"));
      } else {
        EXPECT_EQ(y, y_full) << what << " y";
        EXPECT_EQ(h2, h_full) << what << " h_last";
      }
    }
  }
}

// The fast CPU forward (fp32) of the two windows, the state handed over in fp32, against the reference's one
// forward over both in double: the fast path's error class (kCpuFastRelL2, of which the SSD is one part).
TEST(CarriedSsd, FastHandOverTracksTheReference) {
  cpu::ThreadPool pool(2);
  for (const SsdShape& s : kSsdShapes) {
    auto rng = make_rng(s.L1 * 37 + s.L2 * 5 + s.H);
    const SsdData d(s, rng);
    const size_t Y = size_t(s.H) * s.P;
    const auto [y_full, h_full] = ssd_whole(s, d);
    const auto xf = cast_vec<float>(d.xbc), df = cast_vec<float>(d.delta), Af = cast_vec<float>(d.A_log),
               Df = cast_vec<float>(d.D), h0f = cast_vec<float>(d.h0);
    const auto x1 = time_slice(xf, s.B, s.L(), s.ld(), 0, s.L1), x2 = time_slice(xf, s.B, s.L(), s.ld(), s.L1, s.L2);
    const auto d1 = time_slice(df, s.B, s.L(), s.H, 0, s.L1), d2 = time_slice(df, s.B, s.L(), s.H, s.L1, s.L2);
    for (bool save : {false, true}) {  // training (chunk states saved) and inference (the running state in place)
      auto y1 = poisoned_vec<float>(size_t(s.B) * s.L1 * Y), y2 = poisoned_vec<float>(size_t(s.B) * s.L2 * Y);
      auto h1 = poisoned_vec<float>(s.states()), h2 = poisoned_vec<float>(s.states());
      auto scratch = poisoned_vec<float>(pool.threads() * cpu::ssd_scratch_floats(s.params(s.L())));
      auto st1 = poisoned_vec<float>(cpu::ssd_states_floats(s.params(s.L1)));
      auto st2 = poisoned_vec<float>(cpu::ssd_states_floats(s.params(s.L2)));
      cpu::ssd_forward(pool, s.params(s.L1), ssd_inputs(s, x1, d1, Af, Df, h0f.data(), h1.data()), y1.data(),
                       save ? st1.data() : nullptr, scratch.data());
      cpu::ssd_forward(pool, s.params(s.L2), ssd_inputs(s, x2, d2, Af, Df, h1.data(), h2.data()), y2.data(),
                       save ? st2.data() : nullptr, scratch.data());
      const std::string what = s.name() + (save ? " saving states" : " inference");
      EXPECT_TRUE(rel_l2_close(time_join(y1, y2, s.B, s.L1, s.L2, Y), y_full, tol::kCpuFastRelL2, what + " y"));
      EXPECT_TRUE(rel_l2_close(h2, h_full, tol::kCpuFastRelL2, what + " h_last"));
      // The state advanced in place (h_last = h0, as ssd.h allows): the same bits.
      auto carried = h1, y2_in_place = poisoned_vec<float>(y2.size());
      cpu::ssd_forward(pool, s.params(s.L2), ssd_inputs(s, x2, d2, Af, Df, carried.data(), carried.data()),
                       y2_in_place.data(), save ? st2.data() : nullptr, scratch.data());
      EXPECT_TRUE(same_bits(y2_in_place, y2) && same_bits(carried, h2)) << what << " in place";
    }
  }
}

// Gradients of all six inputs and of h0 (f = Σ r·y, the final state not part of f: truncated BPTT).
TEST(CarriedSsd, GradientsAgainstFiniteDifferences) {
  for (const SsdShape& s : {SsdShape{1, 1, 0, 1, 2, 1, 3, 4}, SsdShape{2, 7, 0, 2, 3, 1, 2, 3},
                            SsdShape{1, 10, 0, 4, 2, 2, 3, 4}}) {
    auto rng = make_rng(s.L1 * 17 + s.H * 3);
    SsdData d(s, rng);
    const V r = random_vec<double>(size_t(s.B) * s.L() * s.H * s.P, rng);
    V y(r.size());
    const SsdParams p = s.params(s.L());
    const auto in = ssd_inputs<double>(s, d.xbc, d.delta, d.A_log, d.D, d.h0.data(), nullptr);
    auto f = [&] {
      ref::ssd_fwd_recurrent(p, in, y.data());
      return dot(y, r);
    };
    const int bo = s.H * s.P, co = bo + s.G * s.N;
    V dxbc = poisoned_vec<double>(d.xbc.size()), ddelta = poisoned_vec<double>(d.delta.size()), dA(s.H, 0.0),
      dD(s.H, 0.0), dh0 = poisoned_vec<double>(d.h0.size());
    ref::ssd_bwd(p, in, r.data(),
                 {.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA.data(), .dB = dxbc.data() + bo,
                  .dC = dxbc.data() + co, .dD = dD.data(), .dh0 = dh0.data()});
    EXPECT_TRUE(fd_check({"ssd.xBC " + s.name(), &d.xbc, dxbc}, f, 200));
    EXPECT_TRUE(fd_check({"ssd.delta " + s.name(), &d.delta, ddelta}, f));
    EXPECT_TRUE(fd_check({"ssd.A_log " + s.name(), &d.A_log, dA}, f));
    EXPECT_TRUE(fd_check({"ssd.D " + s.name(), &d.D, dD}, f));
    EXPECT_TRUE(fd_check({"ssd.h0 " + s.name(), &d.h0, dh0}, f));
  }
}

// The fast CPU backward (fp32) with a nonzero initial state against the reference backward in double.
TEST(CarriedSsd, FastBackwardTracksTheReference) {
  cpu::ThreadPool pool(2);
  for (const SsdShape& s : kSsdShapes) {
    auto rng = make_rng(s.L1 * 41 + s.L2 * 3 + s.P);
    const SsdData d(s, rng);
    const SsdParams p = s.params(s.L());
    const int bo = s.H * s.P, co = bo + s.G * s.N;
    const V dy = random_vec<double>(size_t(s.B) * s.L() * s.H * s.P, rng);
    V dxbc(d.xbc.size()), ddelta(d.delta.size()), dA(s.H, 0.0), dD(s.H, 0.0), dh0(d.h0.size());
    ref::ssd_bwd(p, ssd_inputs<double>(s, d.xbc, d.delta, d.A_log, d.D, d.h0.data(), nullptr), dy.data(),
                 {.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA.data(), .dB = dxbc.data() + bo,
                  .dC = dxbc.data() + co, .dD = dD.data(), .dh0 = dh0.data()});
    const auto xf = cast_vec<float>(d.xbc), df = cast_vec<float>(d.delta), Af = cast_vec<float>(d.A_log),
               Df = cast_vec<float>(d.D), h0f = cast_vec<float>(d.h0), dyf = cast_vec<float>(dy);
    const auto in = ssd_inputs<float>(s, xf, df, Af, Df, h0f.data(), nullptr);
    auto y = poisoned_vec<float>(dy.size()), states = poisoned_vec<float>(cpu::ssd_states_floats(p));
    auto scratch = poisoned_vec<float>(pool.threads() * cpu::ssd_scratch_floats(p));
    cpu::ssd_forward(pool, p, in, y.data(), states.data(), scratch.data());
    auto gx = poisoned_vec<float>(xf.size()), gd = poisoned_vec<float>(df.size()), gh0 = poisoned_vec<float>(h0f.size());
    auto dA_part = poisoned_vec<float>(size_t(s.B) * s.H), dD_part = poisoned_vec<float>(size_t(s.B) * s.H);
    cpu::ssd_backward(pool, p, in, states.data(), dyf.data(),
                      {.dx = gx.data(), .ddelta = gd.data(), .dB = gx.data() + bo, .dC = gx.data() + co,
                       .dh0 = gh0.data()},
                      dA_part.data(), dD_part.data(), scratch.data());
    std::vector<double> gA(s.H, 0.0), gD(s.H, 0.0);
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.H; ++h) gA[h] += dA_part[size_t(b) * s.H + h], gD[h] += dD_part[size_t(b) * s.H + h];
    EXPECT_TRUE(rel_l2_close(gx, dxbc, tol::kCpuFastRelL2, s.name() + " dxBC"));
    EXPECT_TRUE(rel_l2_close(gd, ddelta, tol::kCpuFastRelL2, s.name() + " ddelta"));
    EXPECT_TRUE(rel_l2_close(gh0, dh0, tol::kCpuFastRelL2, s.name() + " dh0"));
    EXPECT_TRUE(rel_l2_close(gA, dA, tol::kCpuFastHeadSumRelL2, s.name() + " dA_log"));
    EXPECT_TRUE(rel_l2_close(gD, dD, tol::kCpuFastHeadSumRelL2, s.name() + " dD"));
  }
}

// A zero initial state is no initial state, bit for bit, forward and backward, reference and fast: the carried
// state enters as exact zeros (an added 0, a product with 0), so a null h0 being today's op and a zero h0 giving
// the same bits says the state term adds nothing else.
TEST(CarriedSsd, ZeroInitialStateIsNoInitialState) {
  cpu::ThreadPool pool(2);
  const SsdShape s{2, 21, 0, 2, 4, 1, 8, 8};
  auto rng = make_rng(5);
  const SsdData d(s, rng);
  const SsdParams p = s.params(s.L());
  const int bo = s.H * s.P, co = bo + s.G * s.N;
  const V zeros(s.states(), 0.0);
  V y_null(size_t(s.B) * s.L() * s.H * s.P), y_zero(y_null.size());
  ref::ssd_fwd_chunked(p, ssd_inputs<double>(s, d.xbc, d.delta, d.A_log, d.D, nullptr, nullptr), y_null.data());
  ref::ssd_fwd_chunked(p, ssd_inputs<double>(s, d.xbc, d.delta, d.A_log, d.D, zeros.data(), nullptr), y_zero.data());
  EXPECT_EQ(y_null, y_zero);

  const auto xf = cast_vec<float>(d.xbc), df = cast_vec<float>(d.delta), Af = cast_vec<float>(d.A_log),
             Df = cast_vec<float>(d.D), zf = cast_vec<float>(zeros);
  const auto dyf = random_vec<float>(y_null.size(), rng);
  auto run = [&](const float* h0) {
    const auto in = ssd_inputs<float>(s, xf, df, Af, Df, h0, nullptr);
    auto y = poisoned_vec<float>(y_null.size()), states = poisoned_vec<float>(cpu::ssd_states_floats(p));
    auto scratch = poisoned_vec<float>(pool.threads() * cpu::ssd_scratch_floats(p));
    cpu::ssd_forward(pool, p, in, y.data(), states.data(), scratch.data());
    auto gx = poisoned_vec<float>(xf.size()), gd = poisoned_vec<float>(df.size());
    auto dA = poisoned_vec<float>(size_t(s.B) * s.H), dD = poisoned_vec<float>(size_t(s.B) * s.H);
    cpu::ssd_backward(pool, p, in, states.data(), dyf.data(),
                      {.dx = gx.data(), .ddelta = gd.data(), .dB = gx.data() + bo, .dC = gx.data() + co},
                      dA.data(), dD.data(), scratch.data());
    std::vector<float> all = y;
    for (const auto* v : {&gx, &gd, &dA, &dD}) all.insert(all.end(), v->begin(), v->end());
    return all;
  };
  EXPECT_TRUE(same_bits(run(nullptr), run(zf.data())));
}

// ---- causal conv ----

struct ConvShape {
  int B, L1, L2, C, W;
  int L() const { return L1 + L2; }
  size_t window() const { return size_t(B) * (W - 1) * C; }
  Conv1dParams params(int L) const { return Conv1dParams{B, L, C, W, C}; }
  std::string name() const {
    return "B=" + std::to_string(B) + " L=" + std::to_string(L1) + "+" + std::to_string(L2) + " C=" +
           std::to_string(C) + " W=" + std::to_string(W);
  }
};
// Windows shorter than the kernel (L1 = 1, 2 < W − 1) hand over rows of their own initial window.
const ConvShape kConvShapes[] = {{2, 9, 7, 5, 4}, {1, 1, 6, 3, 4}, {3, 2, 2, 4, 4}, {2, 5, 11, 8, 3}, {1, 3, 4, 6, 1}};

struct ConvData {
  V x, w, bias, window0;
  ConvData(const ConvShape& s, std::mt19937_64& rng)
      : x(random_vec<double>(size_t(s.B) * s.L() * s.C, rng)),
        w(random_vec<double>(size_t(s.C) * s.W, rng)),
        bias(random_vec<double>(s.C, rng)),
        window0(random_vec<double>(s.window(), rng)) {}
};
Whole conv_whole(const ConvShape& s, const ConvData& d) {
  Whole r{poisoned_vec<double>(size_t(s.B) * s.L() * s.C), poisoned_vec<double>(s.window())};
  ref::conv1d_silu_fwd<double>(s.params(s.L()), {.x = d.x.data(), .w = d.w.data(), .bias = d.bias.data(),
                                                 .window0 = d.window0.data(), .window_last = r.last.data()},
                               r.y.data());
  return r;
}

// The window of the last W − 1 inputs: from window 1's end into window 2 equals one forward over both (bit for
// bit: the same taps in the same order), and the final window is the last W − 1 inputs of window0 then x.
TEST(CarriedConv, ReferenceHandOverIsOneForward) {
  for (const ConvShape& s : kConvShapes) {
    auto rng = make_rng(s.L1 * 19 + s.C);
    const ConvData d(s, rng);
    const auto [y_full, wl_full] = conv_whole(s, d);
    const V x1 = time_slice(d.x, s.B, s.L(), s.C, 0, s.L1), x2 = time_slice(d.x, s.B, s.L(), s.C, s.L1, s.L2);
    auto y1 = poisoned_vec<double>(size_t(s.B) * s.L1 * s.C), y2 = poisoned_vec<double>(size_t(s.B) * s.L2 * s.C);
    auto wl1 = poisoned_vec<double>(s.window()), wl2 = poisoned_vec<double>(s.window());
    ref::conv1d_silu_fwd<double>(s.params(s.L1), {.x = x1.data(), .w = d.w.data(), .bias = d.bias.data(),
                                                  .window0 = d.window0.data(), .window_last = wl1.data()},
                                 y1.data());
    ref::conv1d_silu_fwd<double>(s.params(s.L2), {.x = x2.data(), .w = d.w.data(), .bias = d.bias.data(),
                                                  .window0 = wl1.data(), .window_last = wl2.data()},
                                 y2.data());
    EXPECT_EQ(time_join(y1, y2, s.B, s.L1, s.L2, s.C), y_full) << s.name();
    EXPECT_EQ(wl2, wl_full) << s.name();
    // The final window by its definition: input time L − (W−1) + j of the sequence window0 ++ x.
    for (int b = 0; b < s.B; ++b)
      for (int j = 0; j < s.W - 1; ++j) {
        const int t = s.L() - (s.W - 1) + j;
        for (int c = 0; c < s.C; ++c) {
          const double want = t >= 0 ? d.x[(size_t(b) * s.L() + t) * s.C + c]
                                     : d.window0[(size_t(b) * (s.W - 1) + (s.W - 1 + t)) * s.C + c];
          ASSERT_EQ(wl_full[(size_t(b) * (s.W - 1) + j) * s.C + c], want) << s.name();
        }
      }
  }
}

// The fast CPU conv (fp32, row blocks) of the two windows, the window handed over, against the reference over
// both; the handed-over window is a copy of inputs, so exact.
TEST(CarriedConv, FastHandOverTracksTheReference) {
  for (const ConvShape& s : kConvShapes) {
    auto rng = make_rng(s.L1 * 23 + s.C * 3);
    const ConvData d(s, rng);
    const auto [y_full, wl_full] = conv_whole(s, d);
    const auto xf = cast_vec<float>(d.x), bf = cast_vec<float>(d.bias), w0f = cast_vec<float>(d.window0);
    std::vector<float> wT(size_t(s.W) * s.C);
    for (int c = 0; c < s.C; ++c)
      for (int k = 0; k < s.W; ++k) wT[size_t(k) * s.C + c] = float(d.w[size_t(c) * s.W + k]);
    const auto x1 = time_slice(xf, s.B, s.L(), s.C, 0, s.L1), x2 = time_slice(xf, s.B, s.L(), s.C, s.L1, s.L2);
    auto y1 = poisoned_vec<float>(size_t(s.B) * s.L1 * s.C), y2 = poisoned_vec<float>(size_t(s.B) * s.L2 * s.C);
    auto wl1 = poisoned_vec<float>(s.window()), wl2 = poisoned_vec<float>(s.window());
    // Blocks of 3 rows: a sequence's rows fall into several blocks, which write the final window together.
    auto fwd = [&](int L, const std::vector<float>& x, const float* w0, float* wl, float* y) {
      for (int r0 = 0; r0 < s.B * L; r0 += 3)
        cpu::conv_silu_fwd({r0, std::min(r0 + 3, s.B * L)}, s.params(L),
                           {.x = x.data(), .wT = wT.data(), .bias = bf.data(), .window0 = w0, .window_last = wl}, y);
    };
    fwd(s.L1, x1, w0f.data(), wl1.data(), y1.data());
    fwd(s.L2, x2, wl1.data(), wl2.data(), y2.data());
    EXPECT_TRUE(rel_l2_close(time_join(y1, y2, s.B, s.L1, s.L2, s.C), y_full, tol::kCpuFastRelL2, s.name() + " y"));
    EXPECT_EQ(cast_vec<double>(wl2), cast_vec<double>(cast_vec<float>(wl_full))) << s.name();
  }
}

// Gradients of x, w, bias and the initial window against finite differences (f = Σ r·y).
TEST(CarriedConv, GradientsAgainstFiniteDifferences) {
  for (const ConvShape& s : {ConvShape{1, 1, 0, 3, 4}, ConvShape{2, 3, 0, 4, 4}, ConvShape{2, 9, 0, 5, 3}}) {
    auto rng = make_rng(s.L1 * 1000 + s.C);
    ConvData d(s, rng);
    const V r = random_vec<double>(size_t(s.B) * s.L() * s.C, rng);
    V y(r.size());
    const Conv1dParams p = s.params(s.L());
    const Conv1dInputs<double> in{.x = d.x.data(), .w = d.w.data(), .bias = d.bias.data(), .window0 = d.window0.data()};
    auto f = [&] {
      ref::conv1d_silu_fwd(p, in, y.data());
      return dot(y, r);
    };
    V dx = poisoned_vec<double>(d.x.size()), dw(d.w.size(), 0.0), db(s.C, 0.0),
      dw0 = poisoned_vec<double>(d.window0.size());
    ref::conv1d_silu_bwd(p, in, r.data(), {.dx = dx.data(), .dw = dw.data(), .dbias = db.data(), .dwindow0 = dw0.data()});
    EXPECT_TRUE(fd_check({"conv1d.x " + s.name(), &d.x, dx}, f));
    EXPECT_TRUE(fd_check({"conv1d.w " + s.name(), &d.w, dw}, f));
    EXPECT_TRUE(fd_check({"conv1d.bias " + s.name(), &d.bias, db}, f));
    EXPECT_TRUE(fd_check({"conv1d.window0 " + s.name(), &d.window0, dw0}, f));
  }
}

// The fast CPU backward (fp32; block partials of dw, dbias added here in block order) with an initial window
// against the reference backward in double.
TEST(CarriedConv, FastBackwardTracksTheReference) {
  for (const ConvShape& s : kConvShapes) {
    auto rng = make_rng(s.L1 * 29 + s.C * 7);
    const ConvData d(s, rng);
    const Conv1dParams p = s.params(s.L());
    const V dy = random_vec<double>(size_t(s.B) * s.L() * s.C, rng);
    V dx(d.x.size()), dw(d.w.size(), 0.0), db(s.C, 0.0), dw0(d.window0.size());
    ref::conv1d_silu_bwd<double>(p, {.x = d.x.data(), .w = d.w.data(), .bias = d.bias.data(), .window0 = d.window0.data()},
                                 dy.data(), {.dx = dx.data(), .dw = dw.data(), .dbias = db.data(), .dwindow0 = dw0.data()});
    const auto xf = cast_vec<float>(d.x), bf = cast_vec<float>(d.bias), w0f = cast_vec<float>(d.window0),
               dyf = cast_vec<float>(dy);
    std::vector<float> wT(size_t(s.W) * s.C);
    for (int c = 0; c < s.C; ++c)
      for (int k = 0; k < s.W; ++k) wT[size_t(k) * s.C + c] = float(d.w[size_t(c) * s.W + k]);
    const cpu::ConvInputsT in{.x = xf.data(), .wT = wT.data(), .bias = bf.data(), .window0 = w0f.data()};
    const int M = s.B * s.L(), block = 4;
    auto dpre = poisoned_vec<float>(size_t(M) * s.C), gx = poisoned_vec<float>(xf.size()),
         gw0 = poisoned_vec<float>(w0f.size());
    std::vector<double> gwT(wT.size(), 0.0), gb(s.C, 0.0);
    for (int r0 = 0; r0 < M; r0 += block) {
      auto dw_part = poisoned_vec<float>(wT.size()), db_part = poisoned_vec<float>(s.C);
      cpu::conv_silu_bwd_pre({r0, std::min(r0 + block, M)}, p, in, dyf.data(), dpre.data(),
                             {.dw = dw_part.data(), .dbias = db_part.data()});
      for (size_t k = 0; k < gwT.size(); ++k) gwT[k] += dw_part[k];
      for (int c = 0; c < s.C; ++c) gb[c] += db_part[c];
    }
    for (int r0 = 0; r0 < M; r0 += block) {
      const cpu::Rows rows{r0, std::min(r0 + block, M)};
      cpu::conv_bwd_dx(rows, p, wT.data(), dpre.data(), gx.data());
      cpu::conv_bwd_dwindow0(rows, p, wT.data(), dpre.data(), {.dwindow0 = gw0.data()});
    }
    std::vector<double> gw(dw.size());
    for (int c = 0; c < s.C; ++c)
      for (int k = 0; k < s.W; ++k) gw[size_t(c) * s.W + k] = gwT[size_t(k) * s.C + c];
    EXPECT_TRUE(rel_l2_close(gx, dx, tol::kCpuFastRelL2, s.name() + " dx"));
    EXPECT_TRUE(rel_l2_close(gw, dw, tol::kCpuFastRelL2, s.name() + " dw"));
    EXPECT_TRUE(rel_l2_close(gb, db, tol::kCpuFastRelL2, s.name() + " dbias"));
    if (s.W > 1) EXPECT_TRUE(rel_l2_close(gw0, dw0, tol::kCpuFastRelL2, s.name() + " dwindow0"));  // W = 1: none
  }
}

// A zero initial window is no initial window, bit for bit (reference and fast, forward and backward).
TEST(CarriedConv, ZeroInitialWindowIsNoInitialWindow) {
  const ConvShape s{2, 7, 0, 6, 4};
  auto rng = make_rng(11);
  const ConvData d(s, rng);
  const Conv1dParams p = s.params(s.L());
  const V zeros(s.window(), 0.0), dy = random_vec<double>(size_t(s.B) * s.L() * s.C, rng);
  auto ref_run = [&](const double* w0) {
    V y(dy.size()), dx(d.x.size()), dw(d.w.size(), 0.0), db(s.C, 0.0);
    const Conv1dInputs<double> in{.x = d.x.data(), .w = d.w.data(), .bias = d.bias.data(), .window0 = w0};
    ref::conv1d_silu_fwd(p, in, y.data());
    ref::conv1d_silu_bwd(p, in, dy.data(), {.dx = dx.data(), .dw = dw.data(), .dbias = db.data()});
    for (const V* v : {&dx, &dw, &db}) y.insert(y.end(), v->begin(), v->end());
    return y;
  };
  EXPECT_EQ(ref_run(nullptr), ref_run(zeros.data()));
  const auto xf = cast_vec<float>(d.x), bf = cast_vec<float>(d.bias), zf = cast_vec<float>(zeros),
             dyf = cast_vec<float>(dy), wT = random_vec<float>(d.w.size(), rng);
  auto fast_run = [&](const float* w0) {
    const cpu::ConvInputsT in{.x = xf.data(), .wT = wT.data(), .bias = bf.data(), .window0 = w0};
    const cpu::Rows all{0, s.B * s.L()};
    auto y = poisoned_vec<float>(dy.size()), dpre = poisoned_vec<float>(dy.size()), dx = poisoned_vec<float>(xf.size());
    auto dw = poisoned_vec<float>(wT.size()), db = poisoned_vec<float>(s.C);
    cpu::conv_silu_fwd(all, p, in, y.data());
    cpu::conv_silu_bwd_pre(all, p, in, dyf.data(), dpre.data(), {.dw = dw.data(), .dbias = db.data()});
    cpu::conv_bwd_dx(all, p, wT.data(), dpre.data(), dx.data());
    for (const auto* v : {&dx, &dw, &db}) y.insert(y.end(), v->begin(), v->end());
    return y;
  };
  EXPECT_TRUE(same_bits(fast_run(nullptr), fast_run(zf.data())));
}

}  // namespace
}  // namespace mlalpha::test
