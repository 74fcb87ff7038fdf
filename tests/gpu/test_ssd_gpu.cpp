// GPU SSD scan (forward and backward) against the CPU oracle in double (DESIGN section 4): random shapes
// including B = 1, L = 1, L not a multiple of Q, Q > L, G > 1 (also H not a multiple of G), odd P and N,
// N padded inside the kernel, the 'S' layer shape, strong decays and a long sequence, in fp32 and in the tf32
// and bf16 modes; plus determinism in each mode, and dA_log, dD summed in a ColsumBatch (SsdParamDefer).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "ops/common/colsum.h"
#include "ops/ssd/ssd.h"
#include "test_util.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

struct Shape {
  int B, L, H, P, G, N, Q;
  int pad = 0;                           // extra columns in the (B, L, ld) activation
  double dt_lo = 1e-3, dt_hi = 1e-1;     // Δ log-uniform in [dt_lo, dt_hi] (mamba_ssm's dt init range)
};

std::string name(const Shape& s) {
  return "B=" + std::to_string(s.B) + " L=" + std::to_string(s.L) + " H=" + std::to_string(s.H) +
         " P=" + std::to_string(s.P) + " G=" + std::to_string(s.G) + " N=" + std::to_string(s.N) +
         " Q=" + std::to_string(s.Q) + " dt=[" + std::to_string(s.dt_lo) + "," + std::to_string(s.dt_hi) + "]";
}

// x, B, C live in one (B, L, ld) activation as in the Mamba2 block: x at 0, B at H·P, C at H·P + G·N.
struct Inputs {
  SsdParams p;
  int bo = 0, co = 0;
  std::vector<float> xbc, delta, A_log, D, dy, dA_log0, dD0;
};

Inputs make_inputs(const Shape& s, uint64_t salt) {
  Inputs in;
  const int ld = s.H * s.P + 2 * s.G * s.N + s.pad;
  in.p = SsdParams{s.B, s.L, s.H, s.P, s.G, s.N, s.Q, ld};
  in.bo = s.H * s.P;
  in.co = in.bo + s.G * s.N;
  auto rng = make_rng(salt);
  const size_t rows = size_t(s.B) * s.L;
  in.xbc = random_vec<float>(rows * ld, rng);
  in.delta = random_vec<float>(rows * s.H, rng, std::log(s.dt_lo), std::log(s.dt_hi));
  for (auto& d : in.delta) d = std::exp(d);
  in.A_log = random_vec<float>(s.H, rng, 1.0, 16.0);  // A ~ U(1, 16), A_log = ln A
  for (auto& a : in.A_log) a = std::log(a);
  in.D = random_vec<float>(s.H, rng, 0.5, 1.5);
  in.dy = random_vec<float>(rows * s.H * s.P, rng);
  in.dA_log0 = random_vec<float>(s.H, rng, -0.1, 0.1);  // accumulators start non-zero (+= semantics)
  in.dD0 = random_vec<float>(s.H, rng, -0.1, 0.1);
  return in;
}

struct Outputs {
  std::vector<float> y, states, dxbc, ddelta, dA_log, dD;
};

// defer: dA_log's and dD's sums go to a ColsumBatch (gpu::SsdParamDefer, poisoned partials region), checked to
// leave dA_log, dD untouched until the batch runs, which is run right after; on the chunk-parallel path the
// op launches its own sum and records no job.
Outputs run_gpu(const Inputs& in, bool defer = false) {
  const SsdParams& p = in.p;
  const size_t rows = size_t(p.B) * p.L;
  auto xbc = to_device(in.xbc), delta = to_device(in.delta), A_log = to_device(in.A_log), D = to_device(in.D),
       dy = to_device(in.dy);
  auto y = poisoned(rows * p.H * p.P), states = poisoned(gpu::ssd_saved_floats(p));
  const SsdInputs<float> args{.x = xbc.data(), .delta = delta.data(), .A_log = A_log.data(),
                              .Bm = xbc.data() + in.bo, .Cm = xbc.data() + in.co, .Dskip = D.data()};
  gpu::ssd_fwd(p, args, y.data(), states.data(), nullptr);
  Outputs o;
  o.y = from_device(y);
  auto dxbc = poisoned(rows * p.ld), ddelta = poisoned(rows * p.H), ws = poisoned(gpu::ssd_bwd_workspace_floats(p));
  auto dA_log = to_device(in.dA_log0), dD = to_device(in.dD0);
  gpu::ColsumBatch batch;
  auto partials = poisoned(gpu::ssd_bwd_param_partials_floats(p));
  const gpu::SsdParamDefer deferred{.batch = &batch, .partials = partials.data()};
  gpu::ssd_bwd(p, args, states.data(), dy.data(),
               {.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA_log.data(), .dB = dxbc.data() + in.bo,
                .dC = dxbc.data() + in.co, .dD = dD.data()},
               ws.data(), nullptr, defer ? &deferred : nullptr);
  if (defer) {
    const bool walk = gpu::ssd_uses_walk(p) && p.L > 0 && p.B > 0;
    EXPECT_EQ(batch.pending(), walk ? 2u * size_t(p.members) : 0u) << "one job per parameter and member";
    if (walk) {
      EXPECT_TRUE(same_bits(from_device(dA_log), in.dA_log0)) << "dA_log written before the batch ran";
      EXPECT_TRUE(same_bits(from_device(dD), in.dD0)) << "dD written before the batch ran";
    }
    batch.run(nullptr);
  }
  o.states = from_device(states);
  o.states.resize(gpu::ssd_chunk_states_floats(p));  // the saved buffer starts with them
  o.dxbc = from_device(dxbc);
  o.ddelta = from_device(ddelta);
  o.dA_log = from_device(dA_log);
  o.dD = from_device(dD);
  return o;
}

template <typename T, typename U>
std::vector<double> minus(const std::vector<T>& a, const std::vector<U>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = double(a[i]) - double(b[i]);
  return out;
}

// The state entering each GPU chunk (T = gpu::ssd_chunk_len steps) by the plain recurrence in double:
// (B, H, ceil(L/T), P, N).
std::vector<double> ref_chunk_states(const Inputs& in) {
  const SsdParams& p = in.p;
  const int T = gpu::ssd_chunk_len(p), nc = (p.L + T - 1) / T;
  std::vector<double> out(size_t(p.B) * p.H * nc * p.P * p.N), s(size_t(p.P) * p.N);
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.H; ++h) {
      const int g = h * p.G / p.H;
      const size_t mo = p.members > 1 ? size_t(b / (p.B / p.members)) * p.member_stride : 0;  // b's member
      const double A = -std::exp(double(in.A_log[mo + h]));
      std::fill(s.begin(), s.end(), 0.0);
      for (int t = 0; t < p.L; ++t) {
        const size_t row = size_t(b) * p.L + t;
        if (t % T == 0)
          std::copy(s.begin(), s.end(), out.begin() + ((size_t(b) * p.H + h) * nc + t / T) * s.size());
        const double dt = in.delta[row * p.H + h], at = std::exp(dt * A);
        for (int i = 0; i < p.P; ++i)
          for (int n = 0; n < p.N; ++n)
            s[size_t(i) * p.N + n] = at * s[size_t(i) * p.N + n] +
                                     dt * in.xbc[row * p.ld + h * p.P + i] * in.xbc[row * p.ld + in.bo + g * p.N + n];
      }
    }
  return out;
}

// The chunk products in `precision`: FP32 (3xTF32) checked at kGpuSsdRelL2 (dA_log at kGpuSsdDALogRelL2);
// TF32 (single-pass tf32, the model's tf32 mode) at kGpuSsdTf32RelL2 and BF16 (bf16 operands, the model's
// bf16 mode) at kGpuSsdBf16RelL2, with the measured errors printed (the tolerances' evidence).
double ssd_tol(Precision precision) {
  switch (precision) {
    case Precision::TF32: return tol::kGpuSsdTf32RelL2;
    case Precision::BF16: return tol::kGpuSsdBf16RelL2;
    case Precision::FP32: break;
  }
  return tol::kGpuSsdRelL2;
}
// The GPU op on `in` (its precision, algo and members from in.p) against the double oracle; defer: run_gpu's.
void check_inputs_against_ref(const Inputs& in, bool defer = false) {
  const Precision precision = in.p.precision;
  const bool fp32 = precision == Precision::FP32;
  const SsdParams& p = in.p;
  const Outputs got = run_gpu(in, defer);

  const auto xbc = cast_vec<double>(in.xbc), delta = cast_vec<double>(in.delta), A_log = cast_vec<double>(in.A_log),
             D = cast_vec<double>(in.D), dy = cast_vec<double>(in.dy);
  const size_t rows = size_t(p.B) * p.L;
  std::vector<double> y(rows * p.H * p.P), dxbc(rows * p.ld, 0.0), ddelta(rows * p.H);
  auto dA_log = cast_vec<double>(in.dA_log0), dD = cast_vec<double>(in.dD0);
  std::vector<double> dA_terms(dA_log.size(), 0.0);  // |A|·Σ|Δ a r|: dA_log's terms, whose sum may cancel
  const SsdInputs<double> args{.x = xbc.data(), .delta = delta.data(), .A_log = A_log.data(),
                               .Bm = xbc.data() + in.bo, .Cm = xbc.data() + in.co, .Dskip = D.data()};
  ref::ssd_fwd_recurrent<double>(p, args, y.data());
  ref::ssd_bwd<double>(p, args, dy.data(),
                       {.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA_log.data(), .dB = dxbc.data() + in.bo,
                        .dC = dxbc.data() + in.co, .dD = dD.data()},
                       dA_terms.data());

  const double tol = ssd_tol(precision);
  // MLALPHA_TEST_VERBOSE=1 prints every measured error (the 3xTF32 tolerance's evidence too).
  const bool verbose = !fp32 || std::getenv("MLALPHA_TEST_VERBOSE") != nullptr;
  const std::string tag = (fp32 ? std::string() : to_string(precision) + " ") +
                          (gpu::ssd_uses_walk(p) ? "walk " : "chunked ");
  auto check = [&](const ::testing::AssertionResult& r) {
    if (verbose) std::printf("  %s%s\n", tag.c_str(), r.message());
    EXPECT_TRUE(r);
  };
  check(rel_l2_close(got.y, y, tol, "y"));
  check(rel_l2_close(got.states, ref_chunk_states(in), tol, "chunk states"));
  check(rel_l2_close(cols(got.dxbc, p.ld, 0, in.bo), cols(dxbc, p.ld, 0, in.bo), tol, "dx"));
  check(rel_l2_close(cols(got.dxbc, p.ld, in.bo, in.co), cols(dxbc, p.ld, in.bo, in.co), tol, "dB"));
  check(rel_l2_close(cols(got.dxbc, p.ld, in.co, in.co + p.G * p.N), cols(dxbc, p.ld, in.co, in.co + p.G * p.N), tol,
                     "dC"));
  check(rel_l2_close(got.ddelta, ddelta, tol, "ddelta"));
  // += semantics (totals) and the gradient itself (increments over the random starting values)
  const double tol_dA = fp32                             ? tol::kGpuSsdDALogRelL2
                        : precision == Precision::TF32 ? tol::kGpuSsdTf32DALogRelL2
                                                       : tol;
  // dA_log: one sum per head over every (b, t) whose terms have both signs, measured against its terms'
  // magnitudes (with the starting values for the total), not against what is left after they cancel.
  std::vector<double> dA_total_terms(dA_terms.size());
  for (size_t i = 0; i < dA_terms.size(); ++i) dA_total_terms[i] = std::abs(double(in.dA_log0[i])) + dA_terms[i];
  check(rel_l2_close_to_terms(got.dA_log, dA_log, dA_total_terms, tol_dA, "dA_log (accumulated)"));
  check(rel_l2_close(got.dD, dD, tol, "dD (accumulated)"));
  check(rel_l2_close_to_terms(cast_vec<float>(minus(got.dA_log, in.dA_log0)), minus(dA_log, in.dA_log0), dA_terms,
                              tol_dA, "dA_log increment"));
  check(rel_l2_close(minus(got.dD, in.dD0), minus(dD, in.dD0), tol, "dD increment"));
}

void check_against_ref(const Shape& s, uint64_t salt, Precision precision = Precision::FP32,
                       SsdAlgo algo = SsdAlgo::kAuto) {
  Inputs in = make_inputs(s, salt);
  in.p.precision = precision;
  in.p.algo = algo;
  SCOPED_TRACE(name(s) + " " + to_string(precision) + " " + (gpu::ssd_uses_walk(in.p) ? "walk" : "chunked"));
  check_inputs_against_ref(in);
}

TEST(SsdGpu, SmallAndRaggedShapes) {
  const Shape shapes[] = {
      {1, 1, 1, 1, 1, 1, 64},         // L = 1, B = 1, P = N = 1
      {2, 1, 4, 3, 2, 5, 16, 2},      // L = 1, G > 1
      {2, 37, 4, 3, 2, 5, 16, 3},     // L not a multiple of Q, G > 1, padded ld
      {1, 100, 4, 8, 2, 8, 128},      // Q > L
      {3, 70, 3, 7, 2, 3, 32, 1},     // H not a multiple of G, odd P and N
      {2, 130, 2, 16, 1, 16, 64},     // L = 2Q + 2
      {1, 33, 2, 5, 1, 1, 1},         // Q = 1: every step starts a chunk
      {2, 45, 2, 2, 1, 17, 8},        // N = 17, Q = 8
  };
  uint64_t salt = 1;
  for (const Shape& s : shapes) check_against_ref(s, 100 + salt++);
}

TEST(SsdGpu, TargetShapes) {
  const Shape shapes[] = {
      {4, 256, 8, 32, 1, 64, 64},   // DESIGN section 5 'S' layer: ld = d_inner + 2GN = 384
      {1, 200, 2, 64, 1, 128, 64},  // P = 64, N = 128 (the 'L' layer's head)
      {2, 200, 2, 64, 1, 64, 128},  // P = N = 64 (the 'M' layer's head), chunks of 64, the last partial
      {1, 130, 8, 64, 2, 64, 64},   // 'M' head, 4 heads per group: clusters of heads; a last chunk of 2
      {1, 100, 8, 64, 1, 128, 64},  // 'L' head, 8 heads in one group: pairs of heads add dB, dC
      {1, 100, 3, 64, 1, 128, 64},  // 'L' head, 3 heads: no pairs, a partial per head
      {2, 150, 2, 64, 1, 16, 128},  // N = 16, Q = 128: chunks of 64
      {1, 96, 2, 16, 2, 64, 256},   // Q = 256 > L
      {2, 96, 2, 40, 1, 96, 32},    // N = 96: a partial second column tile, P = 40
      {1, 64, 2, 16, 1, 200, 16},   // N = 200: four column tiles, the last partial
      {1, 50, 2, 128, 1, 16, 16},   // P = 128: two p tiles
      {1, 140, 2, 128, 1, 128, 64}, // P = N = 128: shared memory forces chunks of 32
      {1, 100, 1, 64, 1, 256, 64},  // N = 256: chunks of 64 still fit
  };
  uint64_t salt = 1;
  for (const Shape& s : shapes) check_against_ref(s, 200 + salt++);
}

// Δ ~ 1 with A up to 16: a_t down to e^-16, the states forget within a step or two.
TEST(SsdGpu, StrongDecay) {
  check_against_ref({2, 80, 2, 8, 1, 16, 16, 0, 0.5, 2.0}, 301);
  check_against_ref({1, 300, 4, 32, 2, 64, 64, 0, 0.3, 1.5}, 302);
}

// A long sequence: the backward's reverse cumsum runs over whole chunks of Q = 256.
TEST(SsdGpu, LongSequence) {
  check_against_ref({1, 2048, 2, 64, 1, 128, 256}, 401);
  check_against_ref({2, 512, 4, 32, 1, 64, 256, 0, 0.3, 1.5}, 402);
}

// More than 64 chunks: the chunk-state walks run as segments of 32 steps side by side plus the carry pass
// (ssd_chunks.cu), on the generic kernels (P = N = 16, a ragged last chunk: 101 chunks, 4 segments, the
// last of 4 steps), the 'S' head (130 full chunks: 5 segments, the last of one step), the 'M' head with
// strong decay, and in the tf32 and bf16 modes; and still deterministic.
// The smallest segmented shape (66 chunks: segments of 32, 32 and 1 step), small enough for the sanitizers.
TEST(SsdGpu, SegmentedSmall) {
  check_against_ref({1, 64 * 66, 1, 8, 1, 8, 64}, 700);
  check_against_ref({1, 64 * 66, 2, 32, 1, 64, 64}, 699);
}

TEST(SsdGpu, SegmentedStateWalks) {
  check_against_ref({1, 64 * 100 + 17, 2, 16, 1, 16, 64}, 701);
  check_against_ref({1, 64 * 130, 2, 32, 1, 64, 64}, 702);
  check_against_ref({2, 64 * 80, 2, 64, 1, 64, 64, 0, 0.3, 1.5}, 703);
  check_against_ref({1, 64 * 130, 2, 32, 1, 64, 64}, 704, Precision::TF32);
  check_against_ref({1, 64 * 130, 2, 32, 1, 64, 64}, 705, Precision::BF16);
  Inputs in = make_inputs({1, 64 * 97, 2, 32, 1, 64, 64}, 706);
  const Outputs a = run_gpu(in), b = run_gpu(in);
  EXPECT_EQ(0, std::memcmp(a.states.data(), b.states.data(), a.states.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.dxbc.data(), b.dxbc.data(), a.dxbc.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.ddelta.data(), b.ddelta.data(), a.ddelta.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.dA_log.data(), b.dA_log.data(), a.dA_log.size() * sizeof(float)));
}

// bf16 precision's y (ssd_fwd_bf16): each element the round to nearest even of the fp32 y the same call
// writes, on the walks and on the chunk-parallel path, and the saved states the same bits.
TEST(SsdGpu, Bf16OutputIsTheRoundedY) {
  const Shape s_layer{4, 256, 8, 32, 1, 64, 64}, m_head{2, 200, 2, 64, 1, 64, 128}, ragged{3, 70, 3, 7, 2, 3, 32, 1};
  uint64_t salt = 720;
  for (const auto& [s, algo] : {std::pair{s_layer, SsdAlgo::kWalk}, std::pair{m_head, SsdAlgo::kWalk},
                                std::pair{s_layer, SsdAlgo::kChunked}, std::pair{ragged, SsdAlgo::kChunked}}) {
    Inputs in = make_inputs(s, salt++);
    in.p.precision = Precision::BF16;
    in.p.algo = algo;
    const SsdParams& p = in.p;
    SCOPED_TRACE(name(s) + (algo == SsdAlgo::kWalk ? " walk" : " chunked"));
    const size_t n = size_t(p.B) * p.L * p.H * p.P;
    auto xbc = to_device(in.xbc), delta = to_device(in.delta), A_log = to_device(in.A_log), D = to_device(in.D);
    const SsdInputs<float> args{.x = xbc.data(), .delta = delta.data(), .A_log = A_log.data(),
                                .Bm = xbc.data() + in.bo, .Cm = xbc.data() + in.co, .Dskip = D.data()};
    auto y = poisoned(n), st32 = poisoned(gpu::ssd_saved_floats(p)), st16 = poisoned(gpu::ssd_saved_floats(p));
    DeviceBuffer<__nv_bfloat16> y16(n);
    y16.fill_bytes(0xFF);
    gpu::ssd_fwd(p, args, y.data(), st32.data(), nullptr);
    gpu::ssd_fwd_bf16(p, args, y16.data(), st16.data(), nullptr);
    const std::vector<float> want = from_device(y);
    const std::vector<__nv_bfloat16> got = y16.download();
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) {
      const __nv_bfloat16 r = __float2bfloat16_rn(want[i]);
      differ += std::memcmp(&r, &got[i], sizeof r) != 0;
    }
    EXPECT_EQ(differ, 0u) << "of " << n << " elements";
    EXPECT_TRUE(test::same_bits(from_device(st16), from_device(st32))) << "saved states";
  }
}

// The reduced-precision modes on the model's shapes, a ragged one, strong decay and a long sequence.
const Shape kModeShapes[] = {
    {4, 256, 8, 32, 1, 64, 64},                 // 'S' layer
    {1, 300, 4, 64, 1, 128, 256},               // 'L' head: P = 64, N = 128
    {2, 200, 2, 64, 1, 64, 128},                // 'M' head: P = N = 64
    {3, 70, 3, 7, 2, 3, 32, 1},                 // ragged, G > 1
    {1, 300, 4, 32, 2, 64, 64, 0, 0.3, 1.5},    // strong decay
    {1, 2048, 2, 64, 1, 128, 256},              // long sequence
};

// tf32 mode.
TEST(SsdGpu, Tf32Mode) {
  uint64_t salt = 1;
  for (const Shape& s : kModeShapes) check_against_ref(s, 600 + salt++, Precision::TF32);
}

// bf16 mode: the same shapes, so its printed errors compare with tf32 mode's.
TEST(SsdGpu, Bf16Mode) {
  uint64_t salt = 1;
  for (const Shape& s : kModeShapes) check_against_ref(s, 600 + salt++, Precision::BF16);
}

// Identical inputs give identical bits in every mode; and each mode takes its own path: the forward's and
// the backward's outputs of any two modes differ.
TEST(SsdGpu, Deterministic) {
  auto same = [](const std::vector<float>& u, const std::vector<float>& v) {
    return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0;
  };
  const Precision modes[] = {Precision::FP32, Precision::TF32, Precision::BF16};
  Outputs out_of[3];
  for (int m = 0; m < 3; ++m) {
    SCOPED_TRACE(to_string(modes[m]));
    Inputs in = make_inputs({4, 256, 8, 32, 1, 64, 64}, 501);
    in.p.precision = modes[m];
    const Outputs a = run_gpu(in), b = run_gpu(in);
    EXPECT_TRUE(same(a.y, b.y));
    EXPECT_TRUE(same(a.states, b.states));
    EXPECT_TRUE(same(a.dxbc, b.dxbc));
    EXPECT_TRUE(same(a.ddelta, b.ddelta));
    EXPECT_TRUE(same(a.dA_log, b.dA_log));
    EXPECT_TRUE(same(a.dD, b.dD));
    out_of[m] = a;
  }
  for (int m = 0; m < 3; ++m)
    for (int n = m + 1; n < 3; ++n) {
      SCOPED_TRACE(to_string(modes[m]) + " vs " + to_string(modes[n]));
      EXPECT_FALSE(same(out_of[m].y, out_of[n].y)) << "SsdParams::precision made no difference to y";
      EXPECT_FALSE(same(out_of[m].states, out_of[n].states)) << "... to the chunk states";
      EXPECT_FALSE(same(out_of[m].dxbc, out_of[n].dxbc)) << "... to dx, dB, dC";
    }
}

// ----- the chunk walks (ssd_fwd_walk.cu, ssd_bwd_walk.cu): SsdAlgo::kAuto takes them for P <= 64, N <= 128 and
// at most 64 chunks, so the tests above run them on every such shape and the chunk-parallel kernels on the others.
// Here: every cluster arrangement of the reverse walk (clusters of 8, 4, 2 heads holding whole groups, clusters
// that leave partials for group_sum, no cluster), ragged chunks, chunks shorter than the 64-row tiles, odd P and N
// (scalar staging), in every mode; and the chunk-parallel path kept for its own shapes.
const Shape kWalkShapes[] = {
    {2, 100, 8, 32, 1, 64, 64},      // 'S' head, 8 heads a group: clusters of 8; a last chunk of 36
    {1, 64, 4, 16, 1, 32, 64},       // 4 heads: clusters of 4; one full chunk
    {2, 70, 6, 8, 1, 16, 64},        // 6 heads a group: clusters of 2, three partials a group
    {1, 50, 3, 16, 1, 16, 64},       // 3 heads: no cluster, a partial per head
    {2, 90, 4, 16, 2, 24, 32},       // 2 heads a group, G = 2: clusters of 2, whole groups; T = 32
    {2, 45, 3, 12, 2, 8, 16},        // H not a multiple of G: no clusters; T = 16; N = 8
    {3, 1, 8, 32, 1, 64, 64},        // L = 1
    {1, 130, 16, 64, 1, 128, 64},    // 'L' head, 16 heads: clusters of 8, two partials; a last chunk of 2
    {1, 77, 2, 5, 1, 7, 64, 1},      // odd P and N, padded ld: scalar staging
    {2, 200, 12, 64, 3, 64, 64},     // 'M' head, 3 groups of 4 heads
    {1, 640, 2, 32, 1, 64, 64, 0, 0.3, 1.5},  // strong decay over 10 chunks
};

TEST(SsdGpu, WalkShapes) {
  const Precision modes[] = {Precision::FP32, Precision::TF32, Precision::BF16};
  uint64_t salt = 1;
  for (const Precision m : modes)
    for (const Shape& s : kWalkShapes) check_against_ref(s, 800 + salt++, m, SsdAlgo::kWalk);
}

// The smallest walk shapes, for the sanitizers: clusters of 8 with a ragged chunk, partials with group_sum,
// no cluster with scalar staging; clusters of 2 in place of 8 (whole groups, and partials in runs of 4).
TEST(SsdGpu, WalkSmall) {
  check_against_ref({1, 70, 8, 32, 1, 64, 64}, 901, Precision::BF16, SsdAlgo::kWalk);
  check_against_ref({1, 70, 8, 32, 1, 64, 64}, 902, Precision::FP32, SsdAlgo::kWalk);
  check_against_ref({1, 40, 6, 8, 1, 16, 64}, 903, Precision::BF16, SsdAlgo::kWalk);
  check_against_ref({1, 33, 3, 5, 2, 7, 16, 1}, 904, Precision::TF32, SsdAlgo::kWalk);
  check_against_ref({1, 70, 4, 64, 1, 128, 64}, 905, Precision::BF16, SsdAlgo::kWalk);
  gpu::ssd_walk_bwd_force_cluster_heads(2);  // pairs and group_sum's runs where clusters of 8 would fit
  check_against_ref({1, 70, 8, 32, 1, 64, 64}, 906, Precision::BF16, SsdAlgo::kWalk);
  check_against_ref({1, 70, 16, 64, 1, 128, 64}, 907, Precision::BF16, SsdAlgo::kWalk);
  gpu::ssd_walk_bwd_force_cluster_heads(0);
}

// The chunk-parallel kernels on shapes the walks would take (SsdAlgo::kChunked), every mode.
TEST(SsdGpu, ChunkedPath) {
  const Precision modes[] = {Precision::FP32, Precision::TF32, Precision::BF16};
  uint64_t salt = 1;
  for (const Precision m : modes) {
    check_against_ref({4, 256, 8, 32, 1, 64, 64}, 950 + salt++, m, SsdAlgo::kChunked);
    check_against_ref({3, 70, 3, 7, 2, 3, 32, 1}, 950 + salt++, m, SsdAlgo::kChunked);
    check_against_ref({1, 100, 8, 64, 1, 128, 64}, 950 + salt++, m, SsdAlgo::kChunked);
  }
}

// The walks give identical bits run after run (clusters, partials and group_sum, the parameter sums), and the
// two paths agree with each other as each agrees with the oracle.
TEST(SsdGpu, WalkDeterministic) {
  auto same = [](const std::vector<float>& u, const std::vector<float>& v) {
    return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0;
  };
  for (const Shape& s : {Shape{2, 130, 16, 64, 1, 128, 64}, Shape{2, 70, 6, 8, 1, 16, 64}})
    for (const Precision m : {Precision::FP32, Precision::BF16}) {
      SCOPED_TRACE(name(s) + " " + to_string(m));
      Inputs in = make_inputs(s, 990);
      in.p.precision = m;
      in.p.algo = SsdAlgo::kWalk;
      const Outputs a = run_gpu(in), b = run_gpu(in);
      EXPECT_TRUE(same(a.y, b.y));
      EXPECT_TRUE(same(a.states, b.states));
      EXPECT_TRUE(same(a.dxbc, b.dxbc));
      EXPECT_TRUE(same(a.ddelta, b.ddelta));
      EXPECT_TRUE(same(a.dA_log, b.dA_log));
      EXPECT_TRUE(same(a.dD, b.dD));
    }
}

// The reverse walk takes clusters of 2 at run time where its larger clusters would take two rounds
// (ssd_walk_bwd_cluster_heads); its sums keep one order (pairs of heads, then the pairs in order, then the larger
// clusters' runs of pairs in order), so both sizes give the same bits: whole groups against 4 pairs a group,
// the 'L' head's 2 partials of 8 heads against 8 pairs, clusters of 4 against 2, G = 3.
TEST(SsdGpu, WalkClusterSizesSameBits) {
  auto same = [](const std::vector<float>& u, const std::vector<float>& v) {
    return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) == 0;
  };
  const Shape shapes[] = {{2, 100, 8, 32, 1, 64, 64}, {1, 130, 16, 64, 1, 128, 64}, {1, 64, 4, 16, 1, 32, 64},
                          {2, 200, 12, 64, 3, 64, 64}};
  for (const Shape& s : shapes)
    for (const Precision m : {Precision::FP32, Precision::BF16}) {
      SCOPED_TRACE(name(s) + " " + to_string(m));
      Inputs in = make_inputs(s, 995);
      in.p.precision = m;
      in.p.algo = SsdAlgo::kWalk;
      const int largest = (s.H / s.G) % 8 == 0 ? 8 : 4;
      gpu::ssd_walk_bwd_force_cluster_heads(largest);
      EXPECT_EQ(largest, gpu::ssd_walk_bwd_cluster_heads(in.p));
      const Outputs a = run_gpu(in);
      gpu::ssd_walk_bwd_force_cluster_heads(2);
      EXPECT_EQ(2, gpu::ssd_walk_bwd_cluster_heads(in.p));
      const Outputs b = run_gpu(in);
      gpu::ssd_walk_bwd_force_cluster_heads(0);
      EXPECT_TRUE(same(a.dxbc, b.dxbc));
      EXPECT_TRUE(same(a.ddelta, b.ddelta));
      EXPECT_TRUE(same(a.dA_log, b.dA_log));
      EXPECT_TRUE(same(a.dD, b.dD));
    }
  check_against_ref({2, 100, 8, 32, 1, 64, 64}, 996, Precision::BF16, SsdAlgo::kWalk);  // the choice, restored
}

// A population's members in one call (SsdParams::members, issue 38): E members' windows member-major in every
// (B, ...) array, each member's A_log, D (and dA_log, dD) at m·stride in a padded arena. Every member's outputs
// must be bitwise those of a call on its windows and parameters alone, on both paths (fp32: chunk-parallel;
// fp32 forced onto the walks; bf16: walks) and the reverse walk's cluster sizes; the arena's padding between
// members must stay as it was; and the batched call must match the double oracle, which honours members too.
Inputs batch_members(const std::vector<Inputs>& solo, size_t stride) {
  Inputs all = solo[0];
  const int E = int(solo.size());
  all.p.B = E * solo[0].p.B;
  all.p.members = E;
  all.p.member_stride = stride;
  all.xbc.clear(), all.delta.clear(), all.dy.clear();
  auto rng = make_rng(4242);
  all.A_log = random_vec<float>(E * stride, rng, -3.0, 3.0);  // the padding: values no member may read or write
  all.D = random_vec<float>(E * stride, rng, -3.0, 3.0);
  all.dA_log0 = random_vec<float>(E * stride, rng, -3.0, 3.0);
  all.dD0 = random_vec<float>(E * stride, rng, -3.0, 3.0);
  for (int m = 0; m < E; ++m) {
    const Inputs& s = solo[size_t(m)];
    all.xbc.insert(all.xbc.end(), s.xbc.begin(), s.xbc.end());
    all.delta.insert(all.delta.end(), s.delta.begin(), s.delta.end());
    all.dy.insert(all.dy.end(), s.dy.begin(), s.dy.end());
    std::copy(s.A_log.begin(), s.A_log.end(), all.A_log.begin() + m * stride);
    std::copy(s.D.begin(), s.D.end(), all.D.begin() + m * stride);
    std::copy(s.dA_log0.begin(), s.dA_log0.end(), all.dA_log0.begin() + m * stride);
    std::copy(s.dD0.begin(), s.dD0.end(), all.dD0.begin() + m * stride);
  }
  return all;
}

TEST(SsdGpu, MembersBatchedSameBitsAsSolo) {
  auto slice_same = [](const std::vector<float>& all, const std::vector<float>& one, size_t m) {
    return all.size() >= (m + 1) * one.size() &&
           std::memcmp(all.data() + m * one.size(), one.data(), one.size() * sizeof(float)) == 0;
  };
  struct Case {
    Shape s;
    Precision precision;
    SsdAlgo algo;
    int cluster_heads;  // the reverse walk's cluster size forced (0: the run-time choice)
  };
  const Case cases[] = {
      {{2, 100, 8, 32, 1, 64, 64}, Precision::FP32, SsdAlgo::kAuto, 0},   // 'S' head, chunk-parallel path
      {{2, 100, 8, 32, 1, 64, 64}, Precision::BF16, SsdAlgo::kAuto, 0},   // 'S' head, walks
      {{2, 100, 8, 32, 1, 64, 64}, Precision::BF16, SsdAlgo::kWalk, 2},   // walks in clusters of 2 + group_sum
      {{1, 130, 8, 64, 2, 64, 64}, Precision::FP32, SsdAlgo::kWalk, 0},   // 'M' head, G = 2, fp32 walks
      {{2, 70, 3, 7, 2, 3, 32, 1}, Precision::FP32, SsdAlgo::kAuto, 0},   // generic kernels, H not a multiple of G
      {{1, 1100, 2, 16, 1, 16, 16}, Precision::FP32, SsdAlgo::kAuto, 0},  // 69 chunks: segmented chunk walks
  };
  const int E = 3;
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c.s) + " " + to_string(c.precision) + (c.algo == SsdAlgo::kWalk ? " walk" : " auto") +
                 " clusters " + std::to_string(c.cluster_heads));
    gpu::ssd_walk_bwd_force_cluster_heads(c.cluster_heads);
    std::vector<Inputs> solo;
    std::vector<Outputs> solo_out;
    for (int m = 0; m < E; ++m) {
      solo.push_back(make_inputs(c.s, 7000 + 10 * uint64_t(m)));
      solo.back().p.precision = c.precision;
      solo.back().p.algo = c.algo;
      solo_out.push_back(run_gpu(solo.back()));
    }
    const size_t stride = size_t(c.s.H) + 5;  // a member's parameters and the next member's: 5 floats apart
    const Inputs all = batch_members(solo, stride);
    ASSERT_EQ(gpu::ssd_uses_walk(all.p), gpu::ssd_uses_walk(solo[0].p));
    const Outputs got = run_gpu(all);
    for (int m = 0; m < E; ++m) {
      SCOPED_TRACE("member " + std::to_string(m));
      const Outputs& one = solo_out[size_t(m)];
      EXPECT_TRUE(slice_same(got.y, one.y, size_t(m)));
      EXPECT_TRUE(slice_same(got.states, one.states, size_t(m)));
      EXPECT_TRUE(slice_same(got.dxbc, one.dxbc, size_t(m)));
      EXPECT_TRUE(slice_same(got.ddelta, one.ddelta, size_t(m)));
      const size_t H = size_t(c.s.H), o = size_t(m) * stride;
      EXPECT_EQ(0, std::memcmp(got.dA_log.data() + o, one.dA_log.data(), H * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(got.dD.data() + o, one.dD.data(), H * sizeof(float)));
      for (size_t i = o + H; i < o + stride; ++i) {  // the padding after member m's parameters: untouched
        EXPECT_EQ(got.dA_log[i], all.dA_log0[i]) << "dA_log padding at " << i;
        EXPECT_EQ(got.dD[i], all.dD0[i]) << "dD padding at " << i;
      }
    }
    gpu::ssd_walk_bwd_force_cluster_heads(0);
    check_inputs_against_ref(all);
  }
}

// dA_log's and dD's sums deferred to a model's ColsumBatch (gpu::SsdParamDefer: ColsumOrder::kBlock512 jobs in
// param_reduce's order, the partials in the caller's region): bitwise the immediate call's dA_log, dD (and every
// other output), against the double oracle at the usual tolerances, and bitwise the same run after run; on the
// walks' shapes (S's head, clusters of 2 with group_sum, odd P and N, more than 512 windows: the block's rows
// strided twice), members batched (one job per member, the arena's padding untouched), and the chunk-parallel path
// (the batch unused).
TEST(SsdGpu, DeferredParamSumsSameBits) {
  struct Case {
    Shape s;
    Precision precision;
    SsdAlgo algo;
    int cluster_heads;
  };
  const Case cases[] = {
      {{4, 256, 8, 32, 1, 64, 64}, Precision::BF16, SsdAlgo::kAuto, 0},  // the 'S' head on the walks
      {{2, 100, 8, 32, 1, 64, 64}, Precision::BF16, SsdAlgo::kWalk, 2},  // clusters of 2 + group_sum
      {{1, 33, 3, 5, 2, 7, 16, 1}, Precision::TF32, SsdAlgo::kWalk, 0},  // odd P and N
      {{1100, 8, 2, 8, 1, 16, 64}, Precision::BF16, SsdAlgo::kWalk, 0},  // 1,100 windows: 3 rows a thread
      {{3, 70, 3, 7, 2, 3, 32, 1}, Precision::FP32, SsdAlgo::kChunked, 0},  // chunk-parallel: no job
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c.s) + " " + to_string(c.precision));
    gpu::ssd_walk_bwd_force_cluster_heads(c.cluster_heads);
    Inputs in = make_inputs(c.s, 8100);
    in.p.precision = c.precision;
    in.p.algo = c.algo;
    const Outputs now = run_gpu(in), later = run_gpu(in, true), again = run_gpu(in, true);
    EXPECT_TRUE(same_bits(later.dA_log, now.dA_log)) << "dA_log";
    EXPECT_TRUE(same_bits(later.dD, now.dD)) << "dD";
    EXPECT_TRUE(same_bits(later.dxbc, now.dxbc)) << "dx, dB, dC";
    EXPECT_TRUE(same_bits(later.ddelta, now.ddelta)) << "ddelta";
    EXPECT_TRUE(same_bits(again.dA_log, later.dA_log) && same_bits(again.dD, later.dD)) << "repeat";
    check_inputs_against_ref(in, true);
    gpu::ssd_walk_bwd_force_cluster_heads(0);
  }
  // members: E = 3 in one call, each member's sums one job of its own windows into its own slot
  std::vector<Inputs> solo;
  for (int m = 0; m < 3; ++m) {
    solo.push_back(make_inputs({2, 100, 8, 32, 1, 64, 64}, 8200 + uint64_t(m)));
    solo.back().p.precision = Precision::BF16;
  }
  const Inputs all = batch_members(solo, 8 + 5);
  const Outputs now = run_gpu(all), later = run_gpu(all, true);
  EXPECT_TRUE(same_bits(later.dA_log, now.dA_log)) << "members' dA_log (and the padding)";
  EXPECT_TRUE(same_bits(later.dD, now.dD)) << "members' dD (and the padding)";
  check_inputs_against_ref(all, true);
}

// The member-batched call is checked before anything is written: members must divide B, and the members'
// parameters must not overlap.
TEST(SsdGpu, MembersRejected) {
  Inputs in = make_inputs({4, 20, 2, 4, 1, 4, 16}, 7100);
  in.p.members = 3;  // does not divide B = 4
  in.p.member_stride = 2;
  EXPECT_THROW(run_gpu(in), Error);
  in.p.members = 2;
  in.p.member_stride = 1;  // < H = 2: member 1's A_log would start inside member 0's
  EXPECT_THROW(run_gpu(in), Error);
  in.p.member_stride = 2;
  in.A_log.resize(4), in.D.resize(4), in.dA_log0.resize(4), in.dD0.resize(4);
  EXPECT_NO_THROW(run_gpu(in));
}

// bf16 x, B, C (SsdXbcBf16: the model's xbc in bf16 where the walks run) and, in the reverse walk, bf16 dy (the
// gated norm's backward writes it so there). The walks' tiles hold x, B, C, dy rounded to bf16 either way (cvt.rn
// when staging fp32, a copy of the bf16 source), and every later read of x and dy in the walks (the products,
// D·x, D·dy, dD's Σ dy·x, x·v) is of the tiles, so the walks given the rounded values in bf16 write the bits of
// the walks given the fp32 values: y16, the saved states, h_last, dx, dB, dC, dΔ, dA_log, dD, dh0. On every walk
// shape (clusters, partials, ragged chunks, odd P and N with scalar staging), with and without a carried state.
void check_bf16_inputs_same_bits(const Shape& s, uint64_t salt, bool carry) {
  Inputs in = make_inputs(s, salt);
  in.p.precision = Precision::BF16;
  in.p.algo = SsdAlgo::kWalk;
  const SsdParams& p = in.p;
  SCOPED_TRACE(name(s) + (carry ? " carried state" : ""));
  const size_t rows = size_t(p.B) * p.L, ny = rows * p.H * p.P, nh = size_t(p.B) * p.H * p.P * p.N;
  std::vector<__nv_bfloat16> xbc16_host(in.xbc.size()), dy16_host(in.dy.size());
  for (size_t i = 0; i < in.xbc.size(); ++i) xbc16_host[i] = __float2bfloat16_rn(in.xbc[i]);
  for (size_t i = 0; i < in.dy.size(); ++i) dy16_host[i] = __float2bfloat16_rn(in.dy[i]);
  auto rng = make_rng(salt + 1000);
  const std::vector<float> h0_host = random_vec<float>(nh, rng);
  auto xbc = to_device(in.xbc), delta = to_device(in.delta), A_log = to_device(in.A_log), D = to_device(in.D),
       dy = to_device(in.dy), h0 = to_device(h0_host);
  DeviceBuffer<__nv_bfloat16> xbc16(xbc16_host.size()), dy16(dy16_host.size());
  xbc16.upload(xbc16_host);
  dy16.upload(dy16_host);
  struct Run {
    std::vector<__nv_bfloat16> y16;
    std::vector<float> saved, h_last, dxbc, ddelta, dA_log, dD, dh0;
  };
  auto run = [&](bool bf16_in) {
    DeviceBuffer<__nv_bfloat16> y16(ny);
    y16.fill_bytes(0xFF);
    auto saved = poisoned(gpu::ssd_saved_floats(p)), h_last = poisoned(nh);
    const SsdInputs<float> args{.x = bf16_in ? nullptr : xbc.data(), .delta = delta.data(), .A_log = A_log.data(),
                                .Bm = bf16_in ? nullptr : xbc.data() + in.bo,
                                .Cm = bf16_in ? nullptr : xbc.data() + in.co, .Dskip = D.data(),
                                .h0 = carry ? h0.data() : nullptr, .h_last = carry ? h_last.data() : nullptr};
    const SsdXbcBf16 x16{.x = xbc16.data(), .Bm = xbc16.data() + in.bo, .Cm = xbc16.data() + in.co};
    if (bf16_in) gpu::ssd_fwd_bf16(p, args, x16, y16.data(), saved.data(), nullptr);
    else gpu::ssd_fwd_bf16(p, args, y16.data(), saved.data(), nullptr);
    auto dxbc = poisoned(rows * p.ld), ddelta = poisoned(rows * p.H), dh0 = poisoned(nh);
    auto ws = poisoned(gpu::ssd_bwd_workspace_floats(p));
    auto dA_log = to_device(in.dA_log0), dD = to_device(in.dD0);
    const SsdGrads<float> g{.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA_log.data(),
                            .dB = dxbc.data() + in.bo, .dC = dxbc.data() + in.co, .dD = dD.data(),
                            .dh0 = carry ? dh0.data() : nullptr};
    if (bf16_in) gpu::ssd_bwd(p, args, x16, saved.data(), dy16.data(), g, ws.data(), nullptr);
    else gpu::ssd_bwd(p, args, saved.data(), dy.data(), g, ws.data(), nullptr);
    return Run{y16.download(),     from_device(saved),  from_device(h_last), from_device(dxbc),
               from_device(ddelta), from_device(dA_log), from_device(dD),     from_device(dh0)};
  };
  const Run a = run(false), b = run(true);
  // the fp32-input call wrote real values (WalkShapes checks them against the reference), so equal bits below
  // cannot be two untouched poisons
  size_t finite = 0;
  for (const float v : a.ddelta) finite += std::isfinite(v);
  EXPECT_EQ(finite, a.ddelta.size()) << "ddelta of the fp32-input call";
  ASSERT_EQ(a.y16.size(), b.y16.size());
  EXPECT_EQ(std::memcmp(a.y16.data(), b.y16.data(), a.y16.size() * sizeof(__nv_bfloat16)), 0) << "y16";
  EXPECT_TRUE(test::same_bits(a.saved, b.saved)) << "saved states";
  EXPECT_TRUE(test::same_bits(a.h_last, b.h_last)) << "h_last";
  EXPECT_TRUE(test::same_bits(a.dxbc, b.dxbc)) << "dx, dB, dC";
  EXPECT_TRUE(test::same_bits(a.ddelta, b.ddelta)) << "ddelta";
  EXPECT_TRUE(test::same_bits(a.dA_log, b.dA_log)) << "dA_log";
  EXPECT_TRUE(test::same_bits(a.dD, b.dD)) << "dD";
  EXPECT_TRUE(test::same_bits(a.dh0, b.dh0)) << "dh0";
}

TEST(SsdGpu, WalksReadBf16XbcDySameBits) {
  uint64_t salt = 7300;
  int k = 0;
  for (const Shape& s : kWalkShapes) check_bf16_inputs_same_bits(s, salt += 2, k++ % 2 == 1);
}

// The same on small shapes of the three reverse-walk instances, for the sanitizers: the 'S' head (clusters of 8, a
// ragged chunk, a carried state), odd P and N (scalar staging), the 'M' head (a pair of heads; the pipelined walk:
// the ragged last chunk's x, B, C copied before the walk, the first's during the last's step) and the 'L' head
// (clusters of 4, a carried state).
TEST(SsdGpu, WalkSmallBf16XbcDy) {
  check_bf16_inputs_same_bits({1, 70, 8, 32, 1, 64, 64}, 7500, true);
  check_bf16_inputs_same_bits({1, 33, 3, 5, 2, 7, 16, 1}, 7502, false);
  check_bf16_inputs_same_bits({1, 70, 2, 64, 1, 64, 64}, 7504, false);
  check_bf16_inputs_same_bits({1, 70, 4, 64, 1, 128, 64}, 7506, true);
}

// bf16 x, B, C (and the backward's bf16 dy) are the walks' alone, and one source of each: the chunk-parallel path,
// a null bf16 pointer (dy16 too), or fp32 pointers beside the bf16 ones are rejected before anything runs.
TEST(SsdGpu, Bf16XbcRejected) {
  Inputs in = make_inputs({1, 70, 8, 32, 1, 64, 64}, 7400);
  in.p.precision = Precision::BF16;
  const SsdParams& p = in.p;
  const size_t rows = size_t(p.B) * p.L;
  auto xbc = to_device(in.xbc), delta = to_device(in.delta), A_log = to_device(in.A_log), D = to_device(in.D);
  DeviceBuffer<__nv_bfloat16> xbc16(in.xbc.size()), y16(rows * p.H * p.P);
  xbc16.fill_bytes(0);
  auto saved = poisoned(gpu::ssd_saved_floats(p));
  const SsdInputs<float> args{.delta = delta.data(), .A_log = A_log.data(), .Dskip = D.data()};
  const SsdXbcBf16 x16{.x = xbc16.data(), .Bm = xbc16.data() + in.bo, .Cm = xbc16.data() + in.co};
  SsdParams chunked = p;
  chunked.algo = SsdAlgo::kChunked;
  EXPECT_THROW(gpu::ssd_fwd_bf16(chunked, args, x16, y16.data(), saved.data(), nullptr), Error);
  SsdParams fp32 = p;
  fp32.precision = Precision::FP32;  // kAuto takes the chunk-parallel path in fp32
  EXPECT_THROW(gpu::ssd_fwd_bf16(fp32, args, x16, y16.data(), saved.data(), nullptr), Error);
  SsdXbcBf16 no_c = x16;
  no_c.Cm = nullptr;
  EXPECT_THROW(gpu::ssd_fwd_bf16(p, args, no_c, y16.data(), saved.data(), nullptr), Error);
  SsdInputs<float> both = args;
  both.x = xbc.data();
  EXPECT_THROW(gpu::ssd_fwd_bf16(p, both, x16, y16.data(), saved.data(), nullptr), Error);
  EXPECT_NO_THROW(gpu::ssd_fwd_bf16(p, args, x16, y16.data(), saved.data(), nullptr));
  EXPECT_NO_THROW(y16.download());  // the launch's errors surface here
  // the backward: bf16 dy required with bf16 x, B, C; the same refusals (nothing is launched, so no buffers)
  DeviceBuffer<__nv_bfloat16> dy16(rows * p.H * p.P);
  const SsdGrads<float> none{};
  EXPECT_THROW(gpu::ssd_bwd(p, args, x16, saved.data(), nullptr, none, nullptr, nullptr), Error);
  EXPECT_THROW(gpu::ssd_bwd(chunked, args, x16, saved.data(), dy16.data(), none, nullptr, nullptr), Error);
  EXPECT_THROW(gpu::ssd_bwd(fp32, args, x16, saved.data(), dy16.data(), none, nullptr, nullptr), Error);
  EXPECT_THROW(gpu::ssd_bwd(p, args, no_c, saved.data(), dy16.data(), none, nullptr, nullptr), Error);
  EXPECT_THROW(gpu::ssd_bwd(p, both, x16, saved.data(), dy16.data(), none, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace mlalpha::test
