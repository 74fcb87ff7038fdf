#pragma once
// Gated RMSNorm of the Mamba2 mixer (norm_before_gate = False, DESIGN section 1):
//   u = y ⊙ SiLU(z);  out = u · rsqrt(mean_group(u²) + eps) ⊙ w,  groups of Dn / G consecutive channels.
#include <cstddef>

#include "core/cuda_fwd.h"
#include "ops/common/colsum.h"

namespace mlalpha {

struct GatedNormParams {
  int M = 0;         // rows (B*L)
  int Dn = 0;        // channels (d_inner)
  int G = 1;         // norm groups
  int ld_z = 0;      // row stride of z / dz (z is the first d_inner columns of the in_proj output)
  float eps = 1e-5f;
};

// The op's inputs and the gradients with respect to them.
template <typename T>
struct GatedNormInputs {
  const T* y = nullptr;  // (M, Dn) the SSD output
  const T* z = nullptr;  // (M, ld_z) first Dn columns: the gate
  const T* w = nullptr;  // (Dn)
};
template <typename T>
struct GatedNormGrads {
  T* dy = nullptr;  // (M, Dn) written
  T* dz = nullptr;  // (M, ld_z): the first Dn columns written, the others untouched
  T* dw = nullptr;  // (Dn) +=
};

namespace ref {
// out (M, Dn), rstd (M, G) written
template <typename T>
void gated_rmsnorm_fwd(const GatedNormParams& p, const GatedNormInputs<T>& in, T* out, T* rstd);
// rstd (M, G) from the forward, dout (M, Dn) -> g
template <typename T>
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputs<T>& in, const T* rstd, const T* dout,
                       const GatedNormGrads<T>& g);
}  // namespace ref

namespace gpu {
// Same semantics as ref:: (float, device pointers). A team of threads holds one (row, group) in registers
// (ops/common/row_team.cuh); Dn % G == 0, G <= 65535, group size Dn / G <= 8192, ld_z >= Dn. float4 loads
// where Dn / G and ld_z are multiples of 4 and the pointers 16-byte aligned, else scalar: the same bits.
// out (M, Dn), rstd (M, G) written
void gated_rmsnorm_fwd(const GatedNormParams& p, const GatedNormInputs<float>& in, float* out, float* rstd,
                       cudaStream_t stream);
// The same with out rounded to bf16 as it is stored (the bf16 mode's out_proj operand).
void gated_rmsnorm_fwd(const GatedNormParams& p, const GatedNormInputs<float>& in, __nv_bfloat16* out, float* rstd,
                       cudaStream_t stream);
// bf16 precision: y (the SSD's output) and z (in_proj's) in bf16, read as bf16 and widened exactly to fp32 (all
// math stays fp32); out in bf16 (out_proj's operand). Bitwise the fp32 op given y's and z's values as floats.
struct GatedNormInputsBf16 {
  const __nv_bfloat16* y = nullptr;  // (M, Dn)
  const __nv_bfloat16* z = nullptr;  // (M, ld_z) first Dn columns
  const float* w = nullptr;          // (Dn)
};
void gated_rmsnorm_fwd(const GatedNormParams& p, const GatedNormInputsBf16& in, __nv_bfloat16* out, float* rstd,
                       cudaStream_t stream);
// Floats of scratch gated_rmsnorm_bwd needs: one dw partial (Dn) per block of 16 rows.
size_t gated_rmsnorm_bwd_workspace_floats(const GatedNormParams& p);
// rstd (M, G), dout (M, Dn) -> g (GatedNormGrads says what is written and what accumulated).
// workspace: gated_rmsnorm_bwd_workspace_floats(p) floats.
// dz16 (M, ld_z), when non-null, receives dz rounded to bf16 instead of g.dz (then not read): the bf16
// mode's dy of in_proj, whose other columns dt_softplus_bwd and conv1d_silu_bwd write likewise.
// defer, when non-null, records the fixed-order sum of the parameter partials instead of launching it
// (ColsumBatch, ops/common/colsum.h): the workspace must then stay untouched until the batch runs.
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputs<float>& in, const float* rstd,
                       const float* dout, const GatedNormGrads<float>& g, float* workspace, cudaStream_t stream,
                       __nv_bfloat16* dz16 = nullptr, ColsumBatch* defer = nullptr);
// bf16 precision: bf16 z (GatedNormInputsBf16) and dout fp32 or bf16 (out_proj's dx written in bf16), each widened
// exactly as it is loaded; dz written in bf16 only (dz16, required; g.dz not read). Bitwise the fp32 op's results
// given the same values as floats, dz then rounded.
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputsBf16& in, const float* rstd, const float* dout,
                       const GatedNormGrads<float>& g, float* workspace, cudaStream_t stream, __nv_bfloat16* dz16,
                       ColsumBatch* defer = nullptr);
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputsBf16& in, const float* rstd,
                       const __nv_bfloat16* dout, const GatedNormGrads<float>& g, float* workspace, cudaStream_t stream,
                       __nv_bfloat16* dz16, ColsumBatch* defer = nullptr);
// The same with dy (M, Dn) written in bf16 only (dy16, required; g.dy and g.dz must be null): bf16 precision where
// the SSD takes the walks (gpu::ssd_uses_walk), whose reverse walk reads dy in bf16 (ssd_bwd with SsdXbcBf16). Each
// element the round to nearest even of the fp32 dy the call above writes; dz16 and dw its bits.
void gated_rmsnorm_bwd(const GatedNormParams& p, const GatedNormInputsBf16& in, const float* rstd,
                       const __nv_bfloat16* dout, const GatedNormGrads<float>& g, float* workspace, cudaStream_t stream,
                       __nv_bfloat16* dz16, __nv_bfloat16* dy16, ColsumBatch* defer);
}  // namespace gpu

}  // namespace mlalpha
