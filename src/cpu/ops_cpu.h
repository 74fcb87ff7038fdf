#pragma once
// The fast CPU path's elementwise and row-reduction kernels (DESIGN section 1 ops; the formulas are those
// of the CPU references in src/ops/*/_ref.cpp), each over a range of rows [r0, r1) of an (M, ·) activation
// so the model can hand fixed row blocks to the ThreadPool. A parameter gradient is never accumulated
// across blocks here: each block writes its own partial (written, not added), and the model adds the
// partials in block order (reduce_partials), which keeps the bits independent of the thread count.
#include <cstddef>

namespace mlalpha::cpu {

class ThreadPool;

// Rows per block of every row-parallel op (fixed: the partials, hence the bits, do not depend on threads).
constexpr int kRowBlock = 64;

// RMSNorm: y = x · rsqrt(mean(x²) + eps) ⊙ w.  x, y (M, D); rstd (M).
void rmsnorm_fwd(int r0, int r1, int D, float eps, const float* x, const float* w, float* y, float* rstd);
// dx (=, or += when accumulate) = r w dy − x r³/D Σ dy w x;  dw_part (D) = Σ_rows dy x r (written).
void rmsnorm_bwd(int r0, int r1, int D, const float* x, const float* w, const float* rstd, const float* dy,
                 float* dx, bool accumulate, float* dw_part);

// Causal depthwise conv + bias + SiLU (conv1d.h). Row r is time t = r mod L of its sequence. x (M, ldx) first
// C columns; wT (W, C) the weight transposed; y (M, C).
void conv_silu_fwd(int r0, int r1, int L, int C, int W, const float* x, int ldx, const float* wT, const float* bias,
                   float* y);
// dpre (M, C) = dy · SiLU'(pre) (pre recomputed); dw_part (W, C) = Σ_t dpre[t] x[t − W + 1 + k] and
// db_part (C) = Σ_t dpre[t], over these rows (written).
void conv_silu_bwd_pre(int r0, int r1, int L, int C, int W, const float* x, int ldx, const float* wT,
                       const float* bias, const float* dy, float* dpre, float* dw_part, float* db_part);
// dx (M, ldx) first C columns = Σ_k w[c, k] dpre[t + W − 1 − k] (within the sequence); needs every row's dpre.
void conv_bwd_dx(int r0, int r1, int L, int C, int W, const float* wT, const float* dpre, float* dx, int ldx);

// Δ = clamp(softplus(dt + dt_bias), lo, hi): dt (M, lddt) first H columns, delta (M, H).
void dt_fwd(int r0, int r1, int H, const float* dt, int lddt, const float* dt_bias, float lo, float hi, float* delta);
// ddt (M, lddt) first H columns written; ddt_bias_part (H) written.
void dt_bwd(int r0, int r1, int H, const float* dt, int lddt, const float* dt_bias, float lo, float hi,
            const float* ddelta, float* ddt, float* ddt_bias_part);

// Gated RMSNorm (gated_rmsnorm.h): u = y ⊙ SiLU(z), out = u · rsqrt(mean_group(u²) + eps) ⊙ w.
// y, out (M, Dn); z (M, ldz) first Dn columns; rstd (M, G).
void gated_fwd(int r0, int r1, int Dn, int G, float eps, const float* y, const float* z, int ldz, const float* w,
               float* out, float* rstd);
// dy (M, Dn), dz (M, ldz) first Dn columns written; dw_part (Dn) written.
void gated_bwd(int r0, int r1, int Dn, int G, const float* y, const float* z, int ldz, const float* w,
               const float* rstd, const float* dout, float* dy, float* dz, float* dw_part);

// part (n) = Σ_{r0 ≤ r < r1} a[r·lda + i] (a bias gradient's block partial).
void colsum(int r0, int r1, int n, const float* a, int lda, float* part);

// out (n) += Σ_b part[b·n + i] for b in [0, blocks), in block order; parallel over fixed column ranges.
void reduce_partials(ThreadPool& pool, const float* part, int blocks, int n, float* out);

}  // namespace mlalpha::cpu
