#pragma once
// Δ = clamp(softplus(dt + dt_bias), lo, hi) (DESIGN section 1; no clamp by default: lo = 0, hi = inf).
#include <cstddef>

#include "core/cuda_fwd.h"
#include "ops/common/colsum.h"

namespace mlalpha {

struct DtParams {
  int M = 0;       // rows (B*L)
  int H = 0;       // heads
  int ld_dt = 0;   // row stride of dt / ddt (dt is the last H columns of the in_proj output)
  float lo = 0.0f, hi = 0.0f;  // clamp range; hi = +inf disables the upper clamp
};

// The op's inputs and the gradients with respect to them.
template <typename T>
struct DtInputs {
  const T* dt = nullptr;       // (M, ld_dt) first H columns used
  const T* dt_bias = nullptr;  // (H)
};
template <typename T>
struct DtGrads {
  T* ddt = nullptr;       // (M, ld_dt): the H columns written, the others untouched
  T* ddt_bias = nullptr;  // (H) +=
};

namespace ref {
// delta (M, H) written
template <typename T>
void dt_softplus_fwd(const DtParams& p, const DtInputs<T>& in, T* delta);
// ddelta (M, H) -> g. Zero gradient where the clamp is active.
template <typename T>
void dt_softplus_bwd(const DtParams& p, const DtInputs<T>& in, const T* ddelta, const DtGrads<T>& g);
}  // namespace ref

namespace gpu {
// Same semantics as ref:: (float, device pointers); ld_dt >= H, lo <= hi.
// delta (M, H) written
void dt_softplus_fwd(const DtParams& p, const DtInputs<float>& in, float* delta, cudaStream_t stream);
// bf16 precision: dt is the bf16 in_proj output, read as bf16 and widened exactly to fp32 (the math stays fp32):
// bitwise the fp32 op given dt's values as floats.
struct DtInputsBf16 {
  const __nv_bfloat16* dt = nullptr;  // (M, ld_dt) first H columns used
  const float* dt_bias = nullptr;     // (H)
};
void dt_softplus_fwd(const DtParams& p, const DtInputsBf16& in, float* delta, cudaStream_t stream);
// Floats of scratch dt_softplus_bwd needs: one ddt_bias partial (H) per block of 64 rows.
size_t dt_softplus_bwd_workspace_floats(const DtParams& p);
// ddelta (M, H) -> g (DtGrads says what is written and what accumulated). workspace:
// dt_softplus_bwd_workspace_floats(p) floats.
// ddt16 (M, ld_dt), when non-null, receives ddt rounded to bf16 instead of g.ddt (bf16 mode: in_proj's dy).
// defer, when non-null, records the fixed-order sum of the parameter partials instead of launching it
// (ColsumBatch, ops/common/colsum.h): the workspace must then stay untouched until the batch runs.
void dt_softplus_bwd(const DtParams& p, const DtInputs<float>& in, const float* ddelta, const DtGrads<float>& g,
                     float* workspace, cudaStream_t stream, __nv_bfloat16* ddt16 = nullptr,
                     ColsumBatch* defer = nullptr);
// bf16 dt (DtInputsBf16): ddt written in bf16 only (ddt16, required; g.ddt not read).
void dt_softplus_bwd(const DtParams& p, const DtInputsBf16& in, const float* ddelta, const DtGrads<float>& g,
                     float* workspace, cudaStream_t stream, __nv_bfloat16* ddt16, ColsumBatch* defer = nullptr);
}  // namespace gpu

}  // namespace mlalpha
