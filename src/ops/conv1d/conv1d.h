#pragma once
// Causal depthwise conv1d + bias + SiLU over the xBC channels of the Mamba2 in_proj output
// (DESIGN section 1):  y[b,t,c] = SiLU(bias[c] + Σ_{k<W} w[c,k] · x[b, t−(W−1)+k, c]), x = 0 before t = 0,
// or, for a window that continues an earlier one (stateful training, docs/decisions.md "Stateful training: the
// plan"), x before t = 0 is the earlier window's last W − 1 rows: x[b, −(W−1)+j, c] = window0[b, j, c]. The
// window is the stream's conv state (ops/mamba_step/mamba_step.h), oldest row first.
// GPU: conv1d.cu. CPU: conv1d_ref.cpp (the oracle), conv1d_cpu.cpp (the fast path).
#include <cstddef>

#include "core/cuda_fwd.h"
#include "ops/common/colsum.h"
#include "ops/dt_softplus/dt_softplus.h"

namespace mlalpha {

struct Conv1dParams {
  int B = 0, L = 0;
  int C = 0;     // channels (conv_dim = d_inner + 2·G·N)
  int W = 4;     // kernel width
  int ld_x = 0;  // row stride of x and dx in elements (x is a column slice of the in_proj output)
};

// The op's inputs and the gradients with respect to them.
template <typename T>
struct Conv1dInputs {
  const T* x = nullptr;     // (B, L, ld_x) first C columns used
  const T* w = nullptr;     // (C, W)
  const T* bias = nullptr;  // (C)
  // The carried window (CPU and GPU): null is today's op, bit for bit, with zeros before t = 0.
  const T* window0 = nullptr;  // (B, W−1, C) the W − 1 inputs before t = 0, oldest first; null: zeros
  T* window_last = nullptr;    // (B, W−1, C) written when non-null: the last W − 1 inputs (of window0 and x
                               // together when L < W − 1), the next window's window0; no adjoint flows
                               // back. Not window0 itself (the fast path's row blocks read window0 meanwhile)
};
template <typename T>
struct Conv1dGrads {
  T* dx = nullptr;     // (B, L, ld_x): the C columns written, the others untouched
  T* dw = nullptr;     // (C, W) +=
  T* dbias = nullptr;  // (C) +=
  T* dwindow0 = nullptr;  // (B, W−1, C) written when non-null (zero window0 when in.window0 is null)
};

namespace ref {
// y (B, L, C) written
template <typename T>
void conv1d_silu_fwd(const Conv1dParams& p, const Conv1dInputs<T>& in, T* y);
// dy (B, L, C) -> g. The pre-activation is recomputed.
template <typename T>
void conv1d_silu_bwd(const Conv1dParams& p, const Conv1dInputs<T>& in, const T* dy, const Conv1dGrads<T>& g);
}  // namespace ref

namespace gpu {
// Both entry points take the carried window (Conv1dInputs::window0, window_last, Conv1dGrads::dwindow0): window0
// before t = 0 in the forward and in dw, window_last written (also for L = 0), dwindow0 written.
// Widest kernel the GPU supports (the register window is sized at compile time).
constexpr int kConv1dMaxW = 8;

// y (B, L, C) written.
void conv1d_silu_fwd(const Conv1dParams& p, const Conv1dInputs<float>& in, float* y, cudaStream_t stream);

// bf16 precision: x16 (B, L, ld_x) is the bf16 in_proj output, read in place of in.x (not read) and widened
// exactly to fp32 (the math, the window and y stay fp32): bitwise the fp32 op given x's values as floats.
void conv1d_silu_fwd(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in, float* y,
                     cudaStream_t stream);
// The same with y16 (B, L, C) written in bf16 instead of y: bf16 precision where the SSD takes the walks
// (gpu::ssd_uses_walk), which read x, B, C in bf16 (SsdXbcBf16). Each element the round to nearest even of the
// fp32 y the call above writes (the window_last, if asked, is the same fp32 copy of the inputs).
void conv1d_silu_fwd_bf16(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in,
                          __nv_bfloat16* y16, cudaStream_t stream);

// Floats of scratch conv1d_silu_bwd needs: one partial of dw (C, W) and of dbias (C) per block of
// 128 time steps of one sequence, i.e. B · ceil(L / 128) · (W + 1) · C (all dw partials, then all dbias).
size_t conv1d_silu_bwd_workspace_floats(const Conv1dParams& p);

// dy (B, L, C) -> g (Conv1dGrads says what is written and what accumulated); workspace
// (conv1d_silu_bwd_workspace_floats(p) floats).
// The pre-activation is recomputed; dw, dbias are summed as per-block partials, then in a fixed order
// (colsum_add): bitwise reproducible. Fast path (float4) when C % 4 == 0, ld_x % 4 == 0 and x, dy, dx
// (fwd: x, y) are 16-byte aligned; otherwise a scalar path with the same bits. dx16 (B, L, ld_x), when
// non-null, receives dx rounded to bf16 instead of g.dx (then not read): bf16 mode, in_proj's dy.
// defer, when non-null, records the fixed-order sum of the parameter partials instead of launching it
// (ColsumBatch, ops/common/colsum.h): the workspace must then stay untouched until the batch runs.
void conv1d_silu_bwd(const Conv1dParams& p, const Conv1dInputs<float>& in, const float* dy,
                     const Conv1dGrads<float>& g, float* workspace, cudaStream_t stream,
                     __nv_bfloat16* dx16 = nullptr, ColsumBatch* defer = nullptr);
// bf16 x (x16 in place of in.x, as the forward's): dx written in bf16 only (dx16, required; g.dx not read).
void conv1d_silu_bwd(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in, const float* dy,
                     const Conv1dGrads<float>& g, float* workspace, cudaStream_t stream, __nv_bfloat16* dx16,
                     ColsumBatch* defer = nullptr);

// The conv and Δ = softplus (ops/dt_softplus/dt_softplus.h) in one launch, bf16 precision (the in_proj output in
// bf16): two independent jobs in one grid, each running its own op's code, so every output is bitwise the two ops'
// separate calls (conv1d_silu_fwd / _bf16 with x16, then dt_softplus_fwd with din). Where one job has no work or the
// conv takes its scalar path the two ops launch separately. delta (M, H) written.
void conv1d_dt_fwd_bf16(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in, float* y,
                        const DtParams& dp, const DtInputsBf16& din, float* delta, cudaStream_t stream);
void conv1d_dt_fwd_bf16(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in,
                        __nv_bfloat16* y16, const DtParams& dp, const DtInputsBf16& din, float* delta,
                        cudaStream_t stream);
// The backwards joined the same way: bitwise dt_softplus_bwd(dp, din, ddelta, {.ddt_bias}, dt_workspace, stream,
// ddt16, defer) then conv1d_silu_bwd(p, x16, in, dy, g, workspace, stream, dx16, defer), the partial sums recorded
// (or launched) in that order.
void conv1d_dt_bwd_bf16(const Conv1dParams& p, const __nv_bfloat16* x16, const Conv1dInputs<float>& in,
                        const float* dy, const Conv1dGrads<float>& g, float* workspace, __nv_bfloat16* dx16,
                        const DtParams& dp, const DtInputsBf16& din, const float* ddelta, float* ddt_bias,
                        float* dt_workspace, __nv_bfloat16* ddt16, cudaStream_t stream, ColsumBatch* defer = nullptr);
}  // namespace gpu

}  // namespace mlalpha
