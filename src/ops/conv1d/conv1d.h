#pragma once
// Causal depthwise conv1d + bias + SiLU over the xBC channels of the Mamba2 in_proj output
// (DESIGN section 1):  y[b,t,c] = SiLU(bias[c] + Σ_{k<W} w[c,k] · x[b, t−(W−1)+k, c]), x = 0 before t = 0.
namespace mlalpha {

struct Conv1dParams {
  int B = 0, L = 0;
  int C = 0;     // channels (conv_dim = d_inner + 2·G·N)
  int W = 4;     // kernel width
  int ld_x = 0;  // row stride of x and dx in elements (x is a column slice of the in_proj output)
};

namespace ref {
// x (B, L, ld_x) first C columns used, w (C, W), bias (C), y (B, L, C)
template <typename T>
void conv1d_silu_fwd(const Conv1dParams& p, const T* x, const T* w, const T* bias, T* y);
// dx (B, L, ld_x): the C columns written; dw (C, W) +=; dbias (C) +=. The pre-activation is recomputed.
template <typename T>
void conv1d_silu_bwd(const Conv1dParams& p, const T* x, const T* w, const T* bias, const T* dy, T* dx, T* dw,
                     T* dbias);
}  // namespace ref

}  // namespace mlalpha
