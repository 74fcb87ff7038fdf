#pragma once
// SSD: the Mamba2 selective state-space scan (DESIGN section 1). Per batch b and head h (group g(h)):
//   a_t = exp(Δ_t A_h),  A_h = −exp(A_log_h)
//   s_t = a_t s_{t−1} + Δ_t x_t B_tᵀ        (state P×N, s_{−1} = h0, zero when none is given)
//   y_t = s_t C_t + D_h x_t
// A window that continues an earlier one (stateful training, docs/decisions.md "Stateful training: the
// plan") starts from the state that window ended with: SsdInputs::h0 in, SsdInputs::h_last out. That is
// mamba_ssm's `initial_states`/`return_final_states`; the state is carried, its gradient (SsdGrads::dh0)
// is offered but training stops it at the window boundary (truncated BPTT).
// x, B, C are column slices of one activation (B, L, ld): x at column h·P + p, B at g·N + n, C at g·N + n,
// each through its own base pointer (SsdInputs); head h reads group ⌊h·G/H⌋.
#include <cstddef>

#include "core/cuda_fwd.h"
#include "mlalpha/precision.h"

namespace mlalpha {

// How the GPU forms the scan (ssd_layout.cu: ssd_uses_walk). kWalk: the chunk walks, one block per (b, h)
// carrying the state and the adjoint state in registers (ssd_fwd_walk.cu, ssd_bwd_walk.cu); kChunked: the
// chunk-parallel kernels with the chunk-state walks (ssd_fwd.cu, ssd_bwd.cu, ssd_chunks.cu); kAuto: the
// walks in bf16 mode where the shape allows them (P <= 64, N <= 128, at most 64 chunks), else the
// chunk-parallel path. A rule of the shape and precision only, so results never depend on the device.
enum class SsdAlgo { kAuto, kWalk, kChunked };

struct SsdParams {
  int B = 0, L = 0;
  int H = 0, P = 0;  // heads, head dim
  int G = 1, N = 0;  // groups, state size
  int Q = 64;        // chunk length (the GPU uses min(Q, 64): ssd_chunk_len)
  int ld = 0;        // row stride (elements) of x, Bm, Cm and of their gradients
  // GPU: how the chunk products (the (T, T), (T, N), (T, P), (P, N) tile products) are formed, always on
  // the tensor cores with fp32 accumulation, like the model's GEMMs: 3xTF32 (FP32: fp32 accuracy),
  // single-pass tf32 (TF32: ~2^-11 relative per operand) or bf16 operands (BF16: ~2^-8). Only the products'
  // operands are rounded, in registers: inputs, outputs, shared-memory tiles, decay cumsums, exponentials,
  // chunk states, state passing and every accumulator stay fp32 (ssd_common.cuh).
  Precision precision = Precision::FP32;
  SsdAlgo algo = SsdAlgo::kAuto;  // GPU only: which kernels (see SsdAlgo)
  // GPU only: a population's members in one call (issue 38). The batch is `members` members' windows,
  // member-major: member m owns b in [m·B/members, (m+1)·B/members) of every (B, ...) array, and reads its own
  // A_log, Dskip (and accumulates its own dA_log, dD) at m·member_stride elements from the pointers given (the
  // members' weights and gradients are (E, n) arenas). Each member gets exactly the bits of a call on its own
  // windows and parameters (members = 1): every block's arithmetic is indexed by (b, h) alone and dA_log, dD are
  // summed over the member's own b in the same order. 1: one model (member_stride unused).
  int members = 1;
  size_t member_stride = 0;
};

// The op's inputs. x, B, C are column slices of one (B, L, ld) activation (the conv output), each through
// its own base pointer.
template <typename T>
struct SsdInputs {
  const T* x = nullptr;      // (B, L, ld)→(H, P): x_t of head h at column h·P + p
  const T* delta = nullptr;  // (B, L, H) Δ
  const T* A_log = nullptr;  // (H); members > 1: member m's (H) at m·member_stride
  const T* Bm = nullptr;     // (B, L, ld)→(G, N): B_t of group g at column g·N + n
  const T* Cm = nullptr;     // (B, L, ld)→(G, N)
  const T* Dskip = nullptr;  // (H) D; members > 1: member m's (H) at m·member_stride
  // The carried state, fp32 on the GPU in every precision (like the saved chunk states). The state is a pointer
  // of the op's arguments, not a loose one, so a call that does not carry it is today's op, bit for bit.
  const T* h0 = nullptr;  // (B, H, P, N) s_{−1}, the state before t = 0; null: zeros
  T* h_last = nullptr;    // (B, H, P, N) s_{L−1} written when non-null (the only output in this struct: it is
                          // the next window's h0; no adjoint flows back through it). May be h0 itself: each
                          // (b, h) reads its h0 before it writes its h_last.
};
// x, B, C in bf16 (bf16 precision on the walks: conv1d + SiLU writes xbc so, gpu::conv1d_silu_fwd_bf16): the same
// column slices of one (B, L, ld) bf16 activation. Each element is the round to nearest even of the fp32 value
// SsdInputs::x, Bm, Cm would hold, which is what the walks' bf16 tiles hold either way (ssd_walk.cuh), so a call
// with these gives the bits of the call with the fp32 originals. Given, SsdInputs::x, Bm, Cm must be null.
struct SsdXbcBf16 {
  const __nv_bfloat16* x = nullptr;   // (B, L, ld)→(H, P)
  const __nv_bfloat16* Bm = nullptr;  // (B, L, ld)→(G, N)
  const __nv_bfloat16* Cm = nullptr;  // (B, L, ld)→(G, N)
};
// Gradients with respect to SsdInputs: dx, dB, dC have x's, B's, C's layout (row stride ld; only the used
// columns are written); ddelta written; dA_log, dD accumulated (+=).
template <typename T>
struct SsdGrads {
  T* dx = nullptr;      // (B, L, ld)→(H, P) written
  T* ddelta = nullptr;  // (B, L, H) written
  T* dA_log = nullptr;  // (H) +=; members > 1: member m's (H) at m·member_stride
  T* dB = nullptr;      // (B, L, ld)→(G, N) written (summed over the group's heads)
  T* dC = nullptr;      // (B, L, ld)→(G, N) written (summed over the group's heads)
  T* dD = nullptr;      // (H) +=; members > 1: member m's (H) at m·member_stride
  T* dh0 = nullptr;     // (B, H, P, N) written when non-null: ∂/∂h0 = a_0 g_0 (zero h0 when in.h0 is null)
};

namespace ref {
// y (B, L, H, P) written; in.h0 and in.h_last honoured (as the two forms below and ssd_bwd).
template <typename T>
void ssd_fwd_recurrent(const SsdParams& p, const SsdInputs<T>& in, T* y);
// The same function through the chunked form: chunk cumsum of ΔA, intra-chunk (C·Bᵀ ⊙ decay)·(Δx),
// chunk states, sequential state passing, state → output. Any Q ≥ 1, L need not be a multiple of Q.
template <typename T>
void ssd_fwd_chunked(const SsdParams& p, const SsdInputs<T>& in, T* y);
// The recurrence's backward (DESIGN section 1 formulas) with the accumulation of SsdGrads. dy (B, L, H, P).
// States are recomputed per chunk of Q steps, from in.h0. The final state gets no adjoint (g_L = 0).
template <typename T>
void ssd_bwd(const SsdParams& p, const SsdInputs<T>& in, const T* dy, const SsdGrads<T>& g);
// The same, and dA_log_terms (H) += |A_h| · Σ_{b,t} |Δ_t a_t r_t|, the magnitudes of dA_log's terms: the scale of
// its rounding error in any summation order where the signed sum cancels (a test's bound).
template <typename T>
void ssd_bwd(const SsdParams& p, const SsdInputs<T>& in, const T* dy, const SsdGrads<T>& g, T* dA_log_terms);
}  // namespace ref

namespace gpu {
// Matmul (state-space-dual) form over chunks of T = ssd_chunk_len(p) steps: within a chunk every quantity
// is a product of (T, T), (T, N), (T, P) and (P, N) matrices in shared memory; the state entering each
// chunk (forward) and the adjoint state at each chunk start (backward) come from every chunk's own
// contribution and a short pass over the chunk boundaries (ssd_chunks.cu); see ssd_common.cuh.
// Supported: any N, P whose (P, N) state and chunk tiles fit the shared memory of one SM (P·N up to about
// 48K, e.g. P = 64 with N = 256 or P = N = 128); others are rejected by require().

// Whether the GPU runs p through the chunk walks (SsdAlgo; a function of the shape, p.precision and p.algo
// only). kWalk on a shape the walks do not support is rejected by require(). The saved buffer and the backward's
// scratch are sized for the path p takes.
bool ssd_uses_walk(const SsdParams& p);
// The GPU chunk length: min(Q, 64), halved while the backward's tiles exceed shared memory. A function of
// the shape only.
int ssd_chunk_len(const SsdParams& p);
// Floats of the chunk states: the state entering each chunk of T = ssd_chunk_len(p) steps, (B, H,
// ceil(L/T), P, N). They are the first floats of the forward's saved buffer.
size_t ssd_chunk_states_floats(const SsdParams& p);
// Floats of the forward's saved buffer, which ssd_bwd reads: the chunk states; on the chunk-parallel path
// then (16-byte aligned) each chunk's causal C·Bᵀ per group, (B, ceil(L/T), G, T, T).
size_t ssd_saved_floats(const SsdParams& p);
// Floats of the backward's scratch. Walks: per-(b, h) partials of dA_log and dD, and where a group's heads
// do not fit one thread-block cluster, per-cluster dB and dC partials (B, L, H / cluster, N), sized for clusters
// of 2 wherever the walk may take them at run time (ssd_walk_bwd_cluster_heads). Chunk-parallel
// path: per-head DX diag(Δ) tiles of every chunk (B, ceil(L/T), H, T, T), the
// adjoint state at chunk starts (B, H, ceil(L/T), P, N), per-head dB and dC partials (B, L, H, N) each (per
// pair of heads on the 'L' head shape, which uses half), per-(b, h, chunk) partials of dA_log and dD.
size_t ssd_bwd_workspace_floats(const SsdParams& p);
// A developer's query (ml-alpha-ssd-bench --clusters): how many thread-block clusters of `cluster_heads` blocks
// of the reverse walk's kernel for p the current device holds at once (cudaOccupancyMaxActiveClusters). p must
// run on the walks (ssd_uses_walk).
int ssd_walk_bwd_max_active_clusters(const SsdParams& p, int cluster_heads);
// The heads a cluster the reverse walk takes for p on the current device: the largest of 8, 4, 2 that divides the
// heads of a group, or 2 where the GPU holds fewer than all of those clusters at once and all clusters of 2 (a
// second round costs more than the partials; docs/benchmarks.md). dB and dC have the same bits either way.
int ssd_walk_bwd_cluster_heads(const SsdParams& p);
// For tests and ml-alpha-ssd-bench (--bwd-cluster-heads): every later reverse walk of this process takes clusters
// of `cluster_heads` (the largest size above, or 2 where that is even) instead of the run-time choice; 0 restores
// the choice. Call it between launches, not while a backward is being enqueued on another thread, and before
// sizing the backward's scratch (clusters of 2 may need more of it).
void ssd_walk_bwd_force_cluster_heads(int cluster_heads);

// y (B, L, H, P) written; saved: ssd_saved_floats(p) floats written (the state entering each chunk first,
// then each chunk's C·Bᵀ; required: the chunks run in parallel from it, and ssd_bwd reads it).
void ssd_fwd(const SsdParams& p, const SsdInputs<float>& in, float* y, float* saved, cudaStream_t stream);
// The same with y16 (B, L, H, P) written in bf16 instead of y (bf16 precision: the gated norm is y's only reader):
// each element the round to nearest even of the fp32 y the call above writes, on both paths.
void ssd_fwd_bf16(const SsdParams& p, const SsdInputs<float>& in, __nv_bfloat16* y16, float* saved,
                  cudaStream_t stream);
// The same with x, B, C read in bf16 from xbc (in.x, in.Bm, in.Cm null): the walks only (ssd_uses_walk(p), which
// implies bf16 precision; else require() fails). The bits of the call above with xbc's fp32 originals.
void ssd_fwd_bf16(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16& xbc, __nv_bfloat16* y16,
                  float* saved, cudaStream_t stream);

class ColsumBatch;  // ops/common/colsum.h
// The backward's sums of dA_log and dD over the windows, deferred to a ColsumBatch (a model's backward adds every
// parameter partial of the pass in one launch). On the walks (ssd_uses_walk) the reverse walk then writes its
// per-(b, h) partials of dA_log (B, H) and of dD (B, H), in that order, to `partials` instead of its scratch and
// records their sums in `batch`, one ColsumOrder::kBlock512 job per parameter and member (param_reduce's order:
// the bits of the call without it), instead of launching param_reduce; `partials` must stay untouched until
// the batch runs. The chunk-parallel path has per-chunk partials and launches param_reduce either way.
struct SsdParamDefer {
  ColsumBatch* batch = nullptr;
  float* partials = nullptr;  // (2, B, H): ssd_bwd_param_partials_floats(p)
};
inline size_t ssd_bwd_param_partials_floats(const SsdParams& p) { return 2 * size_t(p.B) * size_t(p.H); }

// The recurrence's backward (same formulas as ref::ssd_bwd) from the forward's saved buffer (ssd_saved_floats)
// and dy (B, L, H, P), into g (SsdGrads says what is written and what accumulated); workspace:
// ssd_bwd_workspace_floats(p) floats.
// A carried state: ssd_fwd starts from in.h0 (saved as the first chunk state, so ssd_bwd reads it from `saved`
// and ignores in.h0 and in.h_last) and writes in.h_last (which may be in.h0); ssd_bwd writes g.dh0 when
// non-null, on both paths (SsdAlgo) in every precision (the bf16 walks from G_0 rounded to bf16, ssd_bwd_walk.cu).
// defer, when non-null: dA_log's and dD's sums go to its batch (SsdParamDefer, the walks only).
void ssd_bwd(const SsdParams& p, const SsdInputs<float>& in, const float* saved, const float* dy,
             const SsdGrads<float>& g, float* workspace, cudaStream_t stream, const SsdParamDefer* defer = nullptr);
// The same with x, B, C read in bf16 from xbc (in.x, in.Bm, in.Cm null; the walks only, as ssd_fwd_bf16 with
// xbc) and dy16 (B, L, H, P) in bf16 (gpu::gated_rmsnorm_bwd writes it so): the bits of the call above with the
// fp32 originals of xbc and dy, which the reverse walk rounds to those bf16 values in its tiles. Gradients stay fp32.
void ssd_bwd(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16& xbc, const float* saved,
             const __nv_bfloat16* dy16, const SsdGrads<float>& g, float* workspace, cudaStream_t stream,
             const SsdParamDefer* defer = nullptr);
}  // namespace gpu

}  // namespace mlalpha
