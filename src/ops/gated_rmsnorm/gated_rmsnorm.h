#pragma once
// Gated RMSNorm of the Mamba2 mixer (norm_before_gate = False, DESIGN section 1):
//   u = y ⊙ SiLU(z);  out = u · rsqrt(mean_group(u²) + eps) ⊙ w,  groups of Dn / G consecutive channels.
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

}  // namespace mlalpha
