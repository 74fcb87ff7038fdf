#pragma once
// RMSNorm (DESIGN section 1): y = x · rsqrt(mean(x²) + eps) ⊙ w, per row of D.
#include <cuda_runtime.h>

#include <cstddef>

namespace mlalpha {

struct RmsNormParams {
  int M = 0;          // rows (B*L)
  int D = 0;          // row width
  float eps = 1e-5f;
};

namespace ref {
// y (M, D), rstd (M) saved for backward
template <typename T>
void rmsnorm_fwd(const RmsNormParams& p, const T* x, const T* w, T* y, T* rstd);
// dx (M, D): written, or added to when accumulate (the residual stream); dw (D) +=
template <typename T>
void rmsnorm_bwd(const RmsNormParams& p, const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw,
                 bool accumulate);
}  // namespace ref

namespace gpu {
// Same semantics as ref:: (float, device pointers). A team of threads holds one row in registers
// (ops/common/row_team.cuh); 1 <= D <= 8192. float4 loads where D % 4 == 0 and the pointers are 16-byte
// aligned, else scalar: the same bits.
// x (M, D), w (D) -> y (M, D), rstd (M) (rstd may be null when no backward follows)
void rmsnorm_fwd(const RmsNormParams& p, const float* x, const float* w, float* y, float* rstd, cudaStream_t stream);
// Floats of scratch rmsnorm_bwd needs: one dw partial (D) per block of 16 rows.
size_t rmsnorm_bwd_workspace_floats(const RmsNormParams& p);
// x, dy (M, D), w (D), rstd (M) -> dx (M, D) written, or added to when accumulate; dw (D) +=.
// workspace: rmsnorm_bwd_workspace_floats(p) floats, contents need not be initialised.
void rmsnorm_bwd(const RmsNormParams& p, const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                 float* dw, bool accumulate, float* workspace, cudaStream_t stream);
}  // namespace gpu

}  // namespace mlalpha
