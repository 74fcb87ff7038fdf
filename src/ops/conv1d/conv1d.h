#pragma once
// Causal depthwise conv1d + bias + SiLU over the xBC channels of the Mamba2 in_proj output
// (DESIGN section 1):  y[b,t,c] = SiLU(bias[c] + Σ_{k<W} w[c,k] · x[b, t−(W−1)+k, c]), x = 0 before t = 0.
// GPU: conv1d.cu. CPU: conv1d_ref.cpp (the oracle).
#include <cuda_runtime.h>

#include <cstddef>

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

namespace gpu {
// Widest kernel the GPU supports (the register window is sized at compile time).
constexpr int kConv1dMaxW = 8;

// x (B, L, ld_x) first C columns used, w (C, W), bias (C), y (B, L, C) written.
void conv1d_silu_fwd(const Conv1dParams& p, const float* x, const float* w, const float* bias, float* y,
                     cudaStream_t stream);

// Floats of scratch conv1d_silu_bwd needs: one partial of dw (C, W) and of dbias (C) per block of
// 128 time steps of one sequence, i.e. B · ceil(L / 128) · (W + 1) · C (all dw partials, then all dbias).
size_t conv1d_silu_bwd_workspace_floats(const Conv1dParams& p);

// x (B, L, ld_x), w (C, W), bias (C), dy (B, L, C); dx (B, L, ld_x): the C columns written (the other
// columns untouched); dw (C, W) +=; dbias (C) +=; workspace (conv1d_silu_bwd_workspace_floats(p) floats).
// The pre-activation is recomputed; dw, dbias are summed as per-block partials, then in a fixed order
// (colsum_add): bitwise reproducible. Fast path (float4) when C % 4 == 0, ld_x % 4 == 0 and x, dy, dx
// (fwd: x, y) are 16-byte aligned; otherwise a scalar path with the same bits.
void conv1d_silu_bwd(const Conv1dParams& p, const float* x, const float* w, const float* bias, const float* dy,
                     float* dx, float* dw, float* dbias, float* workspace, cudaStream_t stream);
}  // namespace gpu

}  // namespace mlalpha
