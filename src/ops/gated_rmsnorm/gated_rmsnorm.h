#pragma once
// Gated RMSNorm of the Mamba2 mixer (norm_before_gate = False, DESIGN section 1):
//   u = y ⊙ SiLU(z);  out = u · rsqrt(mean_group(u²) + eps) ⊙ w,  groups of Dn / G consecutive channels.
#include <cuda_runtime.h>

#include <cstddef>

namespace mlalpha {

struct GatedNormParams {
  int M = 0;         // rows (B*L)
  int Dn = 0;        // channels (d_inner)
  int G = 1;         // norm groups
  int ld_z = 0;      // row stride of z / dz (z is the first d_inner columns of the in_proj output)
  float eps = 1e-5f;
};

namespace ref {
// y (M, Dn), z (M, ld_z), w (Dn) -> out (M, Dn), rstd (M, G)
template <typename T>
void gated_rmsnorm_fwd(const GatedNormParams& p, const T* y, const T* z, const T* w, T* out, T* rstd);
// dy (M, Dn) written; dz (M, ld_z) Dn columns written; dw (Dn) +=
template <typename T>
void gated_rmsnorm_bwd(const GatedNormParams& p, const T* y, const T* z, const T* w, const T* rstd, const T* dout,
                       T* dy, T* dz, T* dw);
}  // namespace ref

namespace gpu {
// Same semantics as ref:: (float, device pointers). A team of threads holds one (row, group) in registers
// (ops/common/row_team.cuh); Dn % G == 0, G <= 65535, group size Dn / G <= 8192, ld_z >= Dn. float4 loads
// where Dn / G and ld_z are multiples of 4 and the pointers 16-byte aligned, else scalar: the same bits.
// y (M, Dn), z (M, ld_z), w (Dn) -> out (M, Dn), rstd (M, G)
void gated_rmsnorm_fwd(const GatedNormParams& p, const float* y, const float* z, const float* w, float* out,
                       float* rstd, cudaStream_t stream);
// Floats of scratch gated_rmsnorm_bwd needs: one dw partial (Dn) per block of 16 rows.
size_t gated_rmsnorm_bwd_workspace_floats(const GatedNormParams& p);
// y (M, Dn), z (M, ld_z), w (Dn), rstd (M, G), dout (M, Dn) -> dy (M, Dn) written; dz (M, ld_z): the first Dn
// columns written, the others untouched; dw (Dn) +=. workspace: gated_rmsnorm_bwd_workspace_floats(p) floats.
void gated_rmsnorm_bwd(const GatedNormParams& p, const float* y, const float* z, const float* w, const float* rstd,
                       const float* dout, float* dy, float* dz, float* dw, float* workspace, cudaStream_t stream);
}  // namespace gpu

}  // namespace mlalpha
