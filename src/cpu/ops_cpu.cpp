#include "cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"
#include "cpu/thread_pool.h"

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

void rmsnorm_fwd(int r0, int r1, int D, float eps, const float* x, const float* w, float* y, float* rstd) {
  for (int r = r0; r < r1; ++r) {
    const float* xr = x + size_t(r) * D;
    float* yr = y + size_t(r) * D;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < D; ++i) ss += xr[i] * xr[i];
    const float rs = 1.0f / std::sqrt(ss / float(D) + eps);
    rstd[r] = rs;
#pragma omp simd
    for (int i = 0; i < D; ++i) yr[i] = xr[i] * rs * w[i];
  }
}

void rmsnorm_bwd(int r0, int r1, int D, const float* x, const float* w, const float* rstd, const float* dy,
                 float* dx, bool accumulate, float* dw_part) {
  std::fill(dw_part, dw_part + D, 0.0f);
  for (int r = r0; r < r1; ++r) {
    const float* xr = x + size_t(r) * D;
    const float* dyr = dy + size_t(r) * D;
    float* dxr = dx + size_t(r) * D;
    const float rs = rstd[r];
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < D; ++i) dot += dyr[i] * w[i] * xr[i];
    const float c = rs * rs * rs * dot / float(D);
    const float keep = accumulate ? 1.0f : 0.0f;
#pragma omp simd
    for (int i = 0; i < D; ++i) {
      dxr[i] = keep * dxr[i] + (rs * w[i] * dyr[i] - xr[i] * c);
      dw_part[i] += dyr[i] * xr[i] * rs;
    }
  }
}

namespace {
// pre (C) = bias + Σ_k w[·, k] ⊙ x[t − (W − 1) + k] for row r (time t = r mod L; x = 0 before t = 0).
void conv_pre_row(int r, int L, int C, int W, const float* x, int ldx, const float* wT, const float* bias,
                  float* pre) {
  const int t = r % L;
  std::copy(bias, bias + C, pre);
  for (int k = 0; k < W; ++k) {
    const int s = t - (W - 1) + k;
    if (s < 0) continue;
    const float* xs = x + size_t(r - t + s) * ldx;
    const float* wk = wT + size_t(k) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) pre[c] += wk[c] * xs[c];
  }
}
}  // namespace

void conv_silu_fwd(int r0, int r1, int L, int C, int W, const float* x, int ldx, const float* wT, const float* bias,
                   float* y) {
  for (int r = r0; r < r1; ++r) {
    float* yr = y + size_t(r) * C;
    conv_pre_row(r, L, C, W, x, ldx, wT, bias, yr);
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = vsilu(yr[c]);
  }
}

void conv_silu_bwd_pre(int r0, int r1, int L, int C, int W, const float* x, int ldx, const float* wT,
                       const float* bias, const float* dy, float* dpre, float* dw_part, float* db_part) {
  std::fill(dw_part, dw_part + size_t(W) * C, 0.0f);
  std::fill(db_part, db_part + C, 0.0f);
  for (int r = r0; r < r1; ++r) {
    const int t = r % L;
    float* pr = dpre + size_t(r) * C;
    conv_pre_row(r, L, C, W, x, ldx, wT, bias, pr);  // the pre-activation first, in dpre's row
    const float* dyr = dy + size_t(r) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      pr[c] = dyr[c] * vsilu_grad(pr[c]);
      db_part[c] += pr[c];
    }
    for (int k = 0; k < W; ++k) {
      const int s = t - (W - 1) + k;
      if (s < 0) continue;
      const float* xs = x + size_t(r - t + s) * ldx;
      float* dwk = dw_part + size_t(k) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dwk[c] += pr[c] * xs[c];
    }
  }
}

void conv_bwd_dx(int r0, int r1, int L, int C, int W, const float* wT, const float* dpre, float* dx, int ldx) {
  for (int r = r0; r < r1; ++r) {
    const int s = r % L;
    float* dxr = dx + size_t(r) * ldx;
    std::fill(dxr, dxr + C, 0.0f);
    for (int k = 0; k < W; ++k) {  // x[s] feeds t = s + (W − 1) − k
      const int t = s + (W - 1) - k;
      if (t >= L) continue;
      const float* pt = dpre + size_t(r - s + t) * C;
      const float* wk = wT + size_t(k) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dxr[c] += wk[c] * pt[c];
    }
  }
}

void dt_fwd(int r0, int r1, int H, const float* dt, int lddt, const float* dt_bias, float lo, float hi, float* delta) {
  for (int r = r0; r < r1; ++r)
    for (int h = 0; h < H; ++h) {
      const float u = dt[size_t(r) * lddt + h] + dt_bias[h];
      float v = u > 20.0f ? u : std::log1p(std::exp(u));
      v = v < lo ? lo : (v > hi ? hi : v);
      delta[size_t(r) * H + h] = v;
    }
}

void dt_bwd(int r0, int r1, int H, const float* dt, int lddt, const float* dt_bias, float lo, float hi,
            const float* ddelta, float* ddt, float* ddt_bias_part) {
  std::fill(ddt_bias_part, ddt_bias_part + H, 0.0f);
  for (int r = r0; r < r1; ++r)
    for (int h = 0; h < H; ++h) {
      const float u = dt[size_t(r) * lddt + h] + dt_bias[h];
      const float v = u > 20.0f ? u : std::log1p(std::exp(u));
      const bool pass = v >= lo && v <= hi;
      const float g = pass ? ddelta[size_t(r) * H + h] * (u > 20.0f ? 1.0f : 1.0f / (1.0f + std::exp(-u))) : 0.0f;
      ddt[size_t(r) * lddt + h] = g;
      ddt_bias_part[h] += g;
    }
}

void gated_fwd(int r0, int r1, int Dn, int G, float eps, const float* y, const float* z, int ldz, const float* w,
               float* out, float* rstd) {
  const int gs = Dn / G;
  for (int r = r0; r < r1; ++r) {
    const float* yr = y + size_t(r) * Dn;
    const float* zr = z + size_t(r) * ldz;
    float* orow = out + size_t(r) * Dn;
#pragma omp simd
    for (int i = 0; i < Dn; ++i) orow[i] = yr[i] * vsilu(zr[i]);  // u, then scaled below
    for (int g = 0; g < G; ++g) {
      float* u = orow + size_t(g) * gs;
      float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
      for (int i = 0; i < gs; ++i) ss += u[i] * u[i];
      const float rs = 1.0f / std::sqrt(ss / float(gs) + eps);
      rstd[size_t(r) * G + g] = rs;
      const float* wg = w + size_t(g) * gs;
#pragma omp simd
      for (int i = 0; i < gs; ++i) u[i] = u[i] * rs * wg[i];
    }
  }
}

void gated_bwd(int r0, int r1, int Dn, int G, const float* y, const float* z, int ldz, const float* w,
               const float* rstd, const float* dout, float* dy, float* dz, float* dw_part) {
  const int gs = Dn / G;
  std::fill(dw_part, dw_part + Dn, 0.0f);
  for (int r = r0; r < r1; ++r)
    for (int g = 0; g < G; ++g) {
      const size_t o = size_t(g) * gs;
      const float* yr = y + size_t(r) * Dn + o;
      const float* zr = z + size_t(r) * ldz + o;
      const float* dr = dout + size_t(r) * Dn + o;
      const float* wg = w + o;
      float* dyr = dy + size_t(r) * Dn + o;
      float* dzr = dz + size_t(r) * ldz + o;
      float* dwg = dw_part + o;
      const float rs = rstd[size_t(r) * G + g];
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int i = 0; i < gs; ++i) dot += dr[i] * wg[i] * (yr[i] * vsilu(zr[i]));
      const float c = rs * rs * rs * dot / float(gs);
#pragma omp simd
      for (int i = 0; i < gs; ++i) {
        const float s = vsigmoid(zr[i]);
        const float sl = zr[i] * s;                         // SiLU(z)
        const float sg = s * (1.0f + zr[i] * (1.0f - s));  // SiLU'(z)
        const float u = yr[i] * sl;
        const float du = rs * wg[i] * dr[i] - u * c;
        dwg[i] += dr[i] * u * rs;
        dyr[i] = du * sl;
        dzr[i] = du * yr[i] * sg;
      }
    }
}

void colsum(int r0, int r1, int n, const float* a, int lda, float* part) {
  std::fill(part, part + n, 0.0f);
  for (int r = r0; r < r1; ++r) {
    const float* ar = a + size_t(r) * lda;
#pragma omp simd
    for (int i = 0; i < n; ++i) part[i] += ar[i];
  }
}

void reduce_partials(ThreadPool& pool, const float* part, int blocks, int n, float* out) {
  constexpr int kCols = 512;
  pool.run((n + kCols - 1) / kCols, [&](int t, int) {
    const int c0 = t * kCols, c1 = std::min(n, c0 + kCols);
    for (int b = 0; b < blocks; ++b) {
      const float* p = part + size_t(b) * n;
#pragma omp simd
      for (int i = c0; i < c1; ++i) out[i] += p[i];
    }
  });
}

}  // namespace mlalpha::cpu
MLALPHA_CPU_KERNELS_END
