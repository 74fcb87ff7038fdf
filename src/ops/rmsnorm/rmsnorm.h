#pragma once
// RMSNorm (DESIGN section 1): y = x · rsqrt(mean(x²) + eps) ⊙ w, per row of D.
#include <cstddef>

#include "core/cuda_fwd.h"
#include "ops/common/colsum.h"

namespace mlalpha {

struct RmsNormParams {
  int M = 0;          // rows (B*L)
  int D = 0;          // row width
  float eps = 1e-5f;
};

// The op's inputs and the gradients with respect to them.
template <typename T>
struct RmsNormInputs {
  const T* x = nullptr;  // (M, D)
  const T* w = nullptr;  // (D)
};
template <typename T>
struct RmsNormGrads {
  T* dx = nullptr;  // (M, D): written, or added to when the backward's accumulate is set (the residual stream)
  T* dw = nullptr;  // (D) +=
};

namespace ref {
// y (M, D), rstd (M) saved for backward
template <typename T>
void rmsnorm_fwd(const RmsNormParams& p, const RmsNormInputs<T>& in, T* y, T* rstd);
// rstd (M), dy (M, D) -> g; g.dx written, or added to when accumulate
template <typename T>
void rmsnorm_bwd(const RmsNormParams& p, const RmsNormInputs<T>& in, const T* rstd, const T* dy,
                 const RmsNormGrads<T>& g, bool accumulate);
}  // namespace ref

namespace gpu {
// Same semantics as ref:: (float, device pointers). A team of threads holds one row in registers
// (ops/common/row_team.cuh); 1 <= D <= 8192. float4 loads where D % 4 == 0 and the pointers are 16-byte
// aligned, else scalar: the same bits.
// y (M, D), rstd (M) written (rstd may be null when no backward follows)
void rmsnorm_fwd(const RmsNormParams& p, const RmsNormInputs<float>& in, float* y, float* rstd, cudaStream_t stream);
// The same with y rounded to bf16 (round to nearest even) as it is stored: the bf16 mode's GEMM operand.
void rmsnorm_fwd(const RmsNormParams& p, const RmsNormInputs<float>& in, __nv_bfloat16* y, float* rstd,
                 cudaStream_t stream);
// Floats of scratch rmsnorm_bwd needs: one dw partial (D) per block of 16 rows.
size_t rmsnorm_bwd_workspace_floats(const RmsNormParams& p);
// rstd (M), dy (M, D) -> g: g.dx written, or added to when accumulate; g.dw +=.
// workspace: rmsnorm_bwd_workspace_floats(p) floats, contents need not be initialised. dx16 (M, D), when
// non-null, also receives the final g.dx rounded to bf16 (the bf16 mode's dy of the GEMMs that produced x).
// defer, when non-null, records the fixed-order sum of the parameter partials instead of launching it
// (ColsumBatch, ops/common/colsum.h): the workspace must then stay untouched until the batch runs.
void rmsnorm_bwd(const RmsNormParams& p, const RmsNormInputs<float>& in, const float* rstd, const float* dy,
                 const RmsNormGrads<float>& g, bool accumulate, float* workspace, cudaStream_t stream,
                 __nv_bfloat16* dx16 = nullptr, ColsumBatch* defer = nullptr);
}  // namespace gpu

}  // namespace mlalpha
