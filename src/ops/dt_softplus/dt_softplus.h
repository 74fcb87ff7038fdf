#pragma once
// Δ = clamp(softplus(dt + dt_bias), lo, hi) (DESIGN section 1; no clamp by default: lo = 0, hi = inf).
#include <cuda_runtime.h>

#include <cstddef>

namespace mlalpha {

struct DtParams {
  int M = 0;       // rows (B*L)
  int H = 0;       // heads
  int ld_dt = 0;   // row stride of dt / ddt (dt is the last H columns of the in_proj output)
  float lo = 0.0f, hi = 0.0f;  // clamp range; hi = +inf disables the upper clamp
};

namespace ref {
// dt (M, ld_dt) first H columns, dt_bias (H), delta (M, H)
template <typename T>
void dt_softplus_fwd(const DtParams& p, const T* dt, const T* dt_bias, T* delta);
// ddt (M, ld_dt): the H columns written; ddt_bias (H) +=. Zero gradient where the clamp is active.
template <typename T>
void dt_softplus_bwd(const DtParams& p, const T* dt, const T* dt_bias, const T* ddelta, T* ddt, T* ddt_bias);
}  // namespace ref

namespace gpu {
// Same semantics as ref:: (float, device pointers); ld_dt >= H, lo <= hi.
// dt (M, ld_dt) first H columns, dt_bias (H) -> delta (M, H)
void dt_softplus_fwd(const DtParams& p, const float* dt, const float* dt_bias, float* delta, cudaStream_t stream);
// Floats of scratch dt_softplus_bwd needs: one ddt_bias partial (H) per block of 64 rows.
size_t dt_softplus_bwd_workspace_floats(const DtParams& p);
// dt (M, ld_dt), dt_bias (H), ddelta (M, H) -> ddt (M, ld_dt): the H columns written, the others untouched;
// ddt_bias (H) +=. workspace: dt_softplus_bwd_workspace_floats(p) floats.
void dt_softplus_bwd(const DtParams& p, const float* dt, const float* dt_bias, const float* ddelta, float* ddt,
                     float* ddt_bias, float* workspace, cudaStream_t stream);
}  // namespace gpu

}  // namespace mlalpha
