#pragma once
// SSD: the Mamba2 selective state-space scan (DESIGN section 1). Per batch b and head h (group g(h)):
//   a_t = exp(Δ_t A_h),  A_h = −exp(A_log_h)
//   s_t = a_t s_{t−1} + Δ_t x_t B_tᵀ        (state P×N, s_{−1} = 0)
//   y_t = s_t C_t + D_h x_t
// x, B, C are column slices of one activation (B, L, ld): x at column h·P + p, B at g·N + n, C at g·N + n,
// each through its own base pointer; head h reads group ⌊h·G/H⌋.
namespace mlalpha {

struct SsdParams {
  int B = 0, L = 0;
  int H = 0, P = 0;  // heads, head dim
  int G = 1, N = 0;  // groups, state size
  int Q = 64;        // chunk length (chunked form and the backward's recompute granularity)
  int ld = 0;        // row stride (elements) of x, Bm, Cm and of their gradients
};

namespace ref {
// x (B, L, ld)→(H, P); delta (B, L, H); A_log (H); Bm, Cm (B, L, ld)→(G, N); Dskip (H); y (B, L, H, P)
template <typename T>
void ssd_fwd_recurrent(const SsdParams& p, const T* x, const T* delta, const T* A_log, const T* Bm, const T* Cm,
                       const T* Dskip, T* y);
// The same function through the chunked form: chunk cumsum of ΔA, intra-chunk (C·Bᵀ ⊙ decay)·(Δx),
// chunk states, sequential state passing, state → output. Any Q ≥ 1, L need not be a multiple of Q.
template <typename T>
void ssd_fwd_chunked(const SsdParams& p, const T* x, const T* delta, const T* A_log, const T* Bm, const T* Cm,
                     const T* Dskip, T* y);
// The recurrence's backward (DESIGN section 1 formulas). dx, dB, dC: the used columns of (B, L, ld) written;
// ddelta (B, L, H) written; dA_log (H) += ; dD (H) +=. States are recomputed per chunk of Q steps.
template <typename T>
void ssd_bwd(const SsdParams& p, const T* x, const T* delta, const T* A_log, const T* Bm, const T* Cm, const T* Dskip,
             const T* dy, T* dx, T* ddelta, T* dA_log, T* dB, T* dC, T* dD);
}  // namespace ref

}  // namespace mlalpha
