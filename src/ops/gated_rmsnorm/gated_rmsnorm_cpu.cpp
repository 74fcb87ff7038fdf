#include "ops/gated_rmsnorm/gated_rmsnorm_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

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

}  // namespace mlalpha::cpu
