#include "ops/mamba_step/mamba_step_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/simd.h"

#if defined(__x86_64__) && !defined(MLALPHA_CPU_NO_AVX2)
#include <immintrin.h>
#define MLALPHA_STEP_AVX2 1
#endif

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

namespace {

constexpr int kPanel = PackedLinear::kPanel;
constexpr int kRowsPerKernel = 6;  // 6 rows × 16 outputs: 12 accumulators, 2 weight vectors, 1 broadcast

// y (R, ldy), the first nout (<= kPanel) columns: init (kPanel) or 0, then fma over the IN inputs of each of the R
// rows of x against the panel wp (IN, kPanel); written, or added to y when add.
template <int R>
void panel_rows(int IN, const float* x, int ldx, const float* wp, const float* init, float* y, int ldy, int nout,
                bool add) {
  alignas(32) float res[R][kPanel];
#ifdef MLALPHA_STEP_AVX2
  __m256 lo[R], hi[R];
  const __m256 i0 = init ? _mm256_loadu_ps(init) : _mm256_setzero_ps();
  const __m256 i1 = init ? _mm256_loadu_ps(init + 8) : _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) lo[r] = i0, hi[r] = i1;
  for (int i = 0; i < IN; ++i) {
    const __m256 w0 = _mm256_loadu_ps(wp + size_t(i) * kPanel), w1 = _mm256_loadu_ps(wp + size_t(i) * kPanel + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + size_t(r) * ldx + i);
      lo[r] = _mm256_fmadd_ps(xv, w0, lo[r]);
      hi[r] = _mm256_fmadd_ps(xv, w1, hi[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) _mm256_store_ps(res[r], lo[r]), _mm256_store_ps(res[r] + 8, hi[r]);
#else
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < kPanel; ++o) res[r][o] = init ? init[o] : 0.0f;
  for (int i = 0; i < IN; ++i)
    for (int r = 0; r < R; ++r) {
      const float xv = x[size_t(r) * ldx + i];
      for (int o = 0; o < kPanel; ++o) res[r][o] = std::fma(xv, wp[size_t(i) * kPanel + o], res[r][o]);
    }
#endif
  for (int r = 0; r < R; ++r) {
    float* yr = y + size_t(r) * ldy;
    if (add)
      for (int o = 0; o < nout; ++o) yr[o] += res[r][o];
    else
      std::memcpy(yr, res[r], sizeof(float) * size_t(nout));
  }
}

using PanelFn = void (*)(int, const float*, int, const float*, const float*, float*, int, int, bool);
constexpr PanelFn kPanelFns[kRowsPerKernel + 1] = {nullptr,          panel_rows<1>, panel_rows<2>, panel_rows<3>,
                                                   panel_rows<4>,    panel_rows<5>, panel_rows<6>};

// One state row s (N) of a head: s ← a s + dx B (written when Keep), returns Σ_n s[n] C[n] (the header's order).
template <bool Keep>
inline float state_row(int N, float a, float dx, const float* B, const float* C, float* s) {
  const int N8 = N / 8 * 8;
  float sum = 0.0f;
#ifdef MLALPHA_STEP_AVX2
  if (N8 > 0) {
    const __m256 av = _mm256_set1_ps(a), dxv = _mm256_set1_ps(dx);
    __m256 acc = _mm256_setzero_ps();
    for (int n = 0; n < N8; n += 8) {
      const __m256 sv = _mm256_fmadd_ps(av, _mm256_loadu_ps(s + n), _mm256_mul_ps(dxv, _mm256_loadu_ps(B + n)));
      if (Keep) _mm256_storeu_ps(s + n, sv);
      acc = _mm256_fmadd_ps(sv, _mm256_loadu_ps(C + n), acc);
    }
    // lanes (0+4, 1+5, 2+6, 3+7), then (0+2, 1+3), then 0+1
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    const __m128 h = _mm_add_ps(q, _mm_movehl_ps(q, q));
    sum = _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
  }
#else
  if (N8 > 0) {
    float acc[8] = {};
    for (int n = 0; n < N8; n += 8)
      for (int j = 0; j < 8; ++j) {
        const float sv = std::fma(a, s[n + j], dx * B[n + j]);
        if (Keep) s[n + j] = sv;
        acc[j] = std::fma(sv, C[n + j], acc[j]);
      }
    float q[4], h[2];
    for (int j = 0; j < 4; ++j) q[j] = acc[j] + acc[j + 4];
    for (int j = 0; j < 2; ++j) h[j] = q[j] + q[j + 2];
    sum = h[0] + h[1];
  }
#endif
  for (int n = N8; n < N; ++n) {
    const float sv = std::fma(a, s[n], dx * B[n]);
    if (Keep) s[n] = sv;
    sum = std::fma(sv, C[n], sum);
  }
  return sum;
}

// One instrument's heads (ssd_step's loop body for row m).
template <bool Keep>
void ssd_row(const StepDims& d, const float* xr, const float* dtr, const float* A_log, const float* Br,
             const float* Cr, const float* Dskip, float* st, float* yr) {
  for (int h = 0; h < d.H; ++h) {
    const int g = h * d.G / d.H;
    const float* B = Br + size_t(g) * d.N;
    const float* C = Cr + size_t(g) * d.N;
    const float dt = dtr[h], a = std::exp(dt * -std::exp(A_log[h]));
    const float* xh = xr + size_t(h) * d.P;
    float* s = st + size_t(h) * d.P * d.N;  // (P, N)
    for (int p = 0; p < d.P; ++p)
      yr[size_t(h) * d.P + p] = std::fma(Dskip[h], xh[p], state_row<Keep>(d.N, a, dt * xh[p], B, C, s + size_t(p) * d.N));
  }
}

}  // namespace

PackedLinear::PackedLinear(const float* w, const float* bias, int out, int in)
    : in_(in), out_(out), panels_((out + kPanel - 1) / kPanel) {
  w_.assign(size_t(panels_) * in * kPanel, 0.0f);
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i) w_[(size_t(o / kPanel) * in + i) * kPanel + o % kPanel] = w[size_t(o) * in + i];
  if (bias) {
    bias_.assign(size_t(panels_) * kPanel, 0.0f);
    std::copy(bias, bias + out, bias_.begin());
  }
}

void PackedLinear::apply(int M, const float* x, int ldx, float* y, int ldy, bool add) const {
  // Panel-major: one panel (IN·kPanel floats, 16 KB at IN = 256) serves every row of the block from L1.
  for (int pnl = 0; pnl < panels_; ++pnl) {
    const float* wp = w_.data() + size_t(pnl) * in_ * kPanel;
    const float* init = !add && !bias_.empty() ? bias_.data() + size_t(pnl) * kPanel : nullptr;
    const int o0 = pnl * kPanel, nout = std::min(kPanel, out_ - o0);
    for (int r0 = 0; r0 < M; r0 += kRowsPerKernel) {
      const int R = std::min(kRowsPerKernel, M - r0);
      kPanelFns[R](in_, x + size_t(r0) * ldx, ldx, wp, init, y + size_t(r0) * ldy + o0, ldy, nout, add);
    }
  }
}

void conv_step(int M, int C, int W, int ld_x, const float* xnew, const float* wT, const float* bias, float* window,
               float* y, const uint8_t* commit) {
  const int taps = W - 1;
  for (int m = 0; m < M; ++m) {
    const float* xr = xnew + size_t(m) * ld_x;
    float* win = window + size_t(m) * taps * C;  // (W − 1, C), oldest row first
    float* yr = y + size_t(m) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = bias[c];
    for (int k = 0; k < taps; ++k) {
      const float *wk = wT + size_t(k) * C, *xk = win + size_t(k) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) yr[c] = std::fma(wk[c], xk[c], yr[c]);
    }
    const float* wl = wT + size_t(taps) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = vsilu(std::fma(wl[c], xr[c], yr[c]));
    if ((commit != nullptr && commit[m] == 0) || taps == 0) continue;
    std::memmove(win, win + C, sizeof(float) * size_t(taps - 1) * C);
    std::memcpy(win + size_t(taps - 1) * C, xr, sizeof(float) * size_t(C));
  }
}

void ssd_step(const StepDims& d, int M, int ld, const float* x, const float* delta, const float* A_log,
              const float* Bm, const float* Cm, const float* Dskip, float* state, float* y, const uint8_t* commit) {
  const size_t spi = size_t(d.H) * d.P * d.N;
  for (int m = 0; m < M; ++m) {
    const size_t row = size_t(m) * ld;
    float* st = state + m * spi;
    float* yr = y + size_t(m) * d.H * d.P;
    if (commit == nullptr || commit[m] != 0)
      ssd_row<true>(d, x + row, delta + size_t(m) * d.H, A_log, Bm + row, Cm + row, Dskip, st, yr);
    else
      ssd_row<false>(d, x + row, delta + size_t(m) * d.H, A_log, Bm + row, Cm + row, Dskip, st, yr);
  }
}

}  // namespace mlalpha::cpu
MLALPHA_CPU_KERNELS_END
