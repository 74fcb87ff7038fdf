#include "ops/dt_softplus/dt_softplus_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

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

}  // namespace mlalpha::cpu
