#pragma once
// Δ = clamp(softplus(dt + dt_bias), lo, hi) (DESIGN section 1; no clamp by default: lo = 0, hi = inf).
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

}  // namespace mlalpha
