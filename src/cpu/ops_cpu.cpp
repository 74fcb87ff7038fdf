#include "cpu/ops_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"
#include "cpu/thread_pool.h"

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

void rmsnorm_fwd(Rows rows, const RmsNormParams& p, const RmsNormInputs<float>& in, float* y, float* rstd) {
  const int D = p.D;
  const float *x = in.x, *w = in.w, eps = p.eps;
  for (int r = rows.begin; r < rows.end; ++r) {
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

void rmsnorm_bwd(Rows rows, const RmsNormParams& p, const RmsNormInputs<float>& in, const float* rstd,
                 const float* dy, const RmsNormGrads<float>& g, bool accumulate) {
  const int D = p.D;
  const float *x = in.x, *w = in.w;
  float *dx = g.dx, *dw_part = g.dw;
  std::fill(dw_part, dw_part + D, 0.0f);
  for (int r = rows.begin; r < rows.end; ++r) {
    const float* xr = x + size_t(r) * D;
    const float* dyr = dy + size_t(r) * D;
    float* dxr = dx + size_t(r) * D;
    const float rs = rstd[r];
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < D; ++i) dot += dyr[i] * w[i] * xr[i];
    const float c = rs * rs * rs * dot / float(D);
    // Written, not 0 · old + new: the buffer may hold a non-finite value of an earlier (skipped) step.
    if (accumulate) {
#pragma omp simd
      for (int i = 0; i < D; ++i) dxr[i] += rs * w[i] * dyr[i] - xr[i] * c;
    } else {
#pragma omp simd
      for (int i = 0; i < D; ++i) dxr[i] = rs * w[i] * dyr[i] - xr[i] * c;
    }
#pragma omp simd
    for (int i = 0; i < D; ++i) dw_part[i] += dyr[i] * xr[i] * rs;
  }
}

namespace {
// pre (C) = bias + Σ_k w[·, k] ⊙ x[t − (W − 1) + k] for row r (time t = r mod L; x = 0 before t = 0).
void conv_pre_row(int r, const Conv1dParams& p, const ConvInputsT& in, float* pre) {
  const int t = r % p.L, C = p.C;
  std::copy(in.bias, in.bias + C, pre);
  for (int k = 0; k < p.W; ++k) {
    const int s = t - (p.W - 1) + k;
    if (s < 0) continue;
    const float* xs = in.x + size_t(r - t + s) * p.ld_x;
    const float* wk = in.wT + size_t(k) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) pre[c] += wk[c] * xs[c];
  }
}
}  // namespace

void conv_silu_fwd(Rows rows, const Conv1dParams& p, const ConvInputsT& in, float* y) {
  const int C = p.C;
  for (int r = rows.begin; r < rows.end; ++r) {
    float* yr = y + size_t(r) * C;
    conv_pre_row(r, p, in, yr);
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = vsilu(yr[c]);
  }
}

void conv_silu_bwd_pre(Rows rows, const Conv1dParams& p, const ConvInputsT& in, const float* dy, float* dpre,
                       const Conv1dGrads<float>& g) {
  const int C = p.C, W = p.W;
  float *dw_part = g.dw, *db_part = g.dbias;
  std::fill(dw_part, dw_part + size_t(W) * C, 0.0f);
  std::fill(db_part, db_part + C, 0.0f);
  for (int r = rows.begin; r < rows.end; ++r) {
    const int t = r % p.L;
    float* pr = dpre + size_t(r) * C;
    conv_pre_row(r, p, in, pr);  // the pre-activation first, in dpre's row
    const float* dyr = dy + size_t(r) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      pr[c] = dyr[c] * vsilu_grad(pr[c]);
      db_part[c] += pr[c];
    }
    for (int k = 0; k < W; ++k) {
      const int s = t - (W - 1) + k;
      if (s < 0) continue;
      const float* xs = in.x + size_t(r - t + s) * p.ld_x;
      float* dwk = dw_part + size_t(k) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dwk[c] += pr[c] * xs[c];
    }
  }
}

void conv_bwd_dx(Rows rows, const Conv1dParams& p, const float* wT, const float* dpre, float* dx) {
  const int C = p.C, W = p.W, L = p.L;
  for (int r = rows.begin; r < rows.end; ++r) {
    const int s = r % L;
    float* dxr = dx + size_t(r) * p.ld_x;
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

void dt_fwd(Rows rows, const DtParams& p, const DtInputs<float>& in, float* delta) {
  const int H = p.H, lddt = p.ld_dt;
  const float *dt = in.dt, *dt_bias = in.dt_bias, lo = p.lo, hi = p.hi;
  for (int r = rows.begin; r < rows.end; ++r)
    for (int h = 0; h < H; ++h) {
      const float u = dt[size_t(r) * lddt + h] + dt_bias[h];
      float v = u > 20.0f ? u : std::log1p(std::exp(u));
      v = v < lo ? lo : (v > hi ? hi : v);
      delta[size_t(r) * H + h] = v;
    }
}

void dt_bwd(Rows rows, const DtParams& p, const DtInputs<float>& in, const float* ddelta, const DtGrads<float>& g) {
  const int H = p.H, lddt = p.ld_dt;
  const float *dt = in.dt, *dt_bias = in.dt_bias, lo = p.lo, hi = p.hi;
  float *ddt = g.ddt, *ddt_bias_part = g.ddt_bias;
  std::fill(ddt_bias_part, ddt_bias_part + H, 0.0f);
  for (int r = rows.begin; r < rows.end; ++r)
    for (int h = 0; h < H; ++h) {
      const float u = dt[size_t(r) * lddt + h] + dt_bias[h];
      const float v = u > 20.0f ? u : std::log1p(std::exp(u));
      const bool pass = v >= lo && v <= hi;
      const float g = pass ? ddelta[size_t(r) * H + h] * (u > 20.0f ? 1.0f : 1.0f / (1.0f + std::exp(-u))) : 0.0f;
      ddt[size_t(r) * lddt + h] = g;
      ddt_bias_part[h] += g;
    }
}

void gated_fwd(Rows rows, const GatedNormParams& p, const GatedNormInputs<float>& in, float* out, float* rstd) {
  const int Dn = p.Dn, G = p.G, ldz = p.ld_z, gs = Dn / G;
  const float *y = in.y, *z = in.z, *w = in.w, eps = p.eps;
  for (int r = rows.begin; r < rows.end; ++r) {
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

void gated_bwd(Rows rows, const GatedNormParams& p, const GatedNormInputs<float>& in, const float* rstd,
               const float* dout, const GatedNormGrads<float>& g) {
  const int Dn = p.Dn, G = p.G, ldz = p.ld_z, gs = Dn / G;
  const float *y = in.y, *z = in.z, *w = in.w;
  float *dy = g.dy, *dz = g.dz, *dw_part = g.dw;
  std::fill(dw_part, dw_part + Dn, 0.0f);
  for (int r = rows.begin; r < rows.end; ++r)
    for (int gi = 0; gi < G; ++gi) {
      const size_t o = size_t(gi) * gs;
      const float* yr = y + size_t(r) * Dn + o;
      const float* zr = z + size_t(r) * ldz + o;
      const float* dr = dout + size_t(r) * Dn + o;
      const float* wg = w + o;
      float* dyr = dy + size_t(r) * Dn + o;
      float* dzr = dz + size_t(r) * ldz + o;
      float* dwg = dw_part + o;
      const float rs = rstd[size_t(r) * G + gi];
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

void colsum(Rows rows, int n, const float* a, int lda, float* part) {
  std::fill(part, part + n, 0.0f);
  for (int r = rows.begin; r < rows.end; ++r) {
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
