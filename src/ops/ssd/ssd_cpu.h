#pragma once
// The SSD (ops/ssd/ssd.h) in its chunked matrix form on the CPU, one task per (batch, group): the task
// walks the chunks of Q steps in order and, in each, forms C·Bᵀ once for the group's heads, then per head
//   E_ij  = exp(acum_i − acum_j) (j ≤ i, else 0),  acum the chunk's inclusive cumsum of Δ·A
//   Y     = (C·Bᵀ ⊙ E)·(Δx) + diag(exp(acum))·C·S_inᵀ + D·x
//   S_out = exp(acum_last)·S_in + (diag(exp(acum_last − acum))·Δx)ᵀ·B
// with every product a GEMM on OpenBLAS (blas.h). The backward walks the chunks in reverse with the adjoint
// state dS (P, N) per head and takes the gradients of each product (the derivation is in ssd_cpu.cpp).
// B and C, shared by the heads of a group, get their gradients summed over those heads inside the task;
// dA_log and dD come back as one partial per (batch, head), which the caller adds over batches in order.
#include <cstddef>

#include "ops/ssd/ssd.h"

namespace mlalpha::cpu {

class ThreadPool;

// Floats of one worker's scratch for ssd_forward / ssd_backward.
size_t ssd_scratch_floats(const SsdParams& p);
// Floats of the saved chunk states: (B, H, ceil(L/Q), P, N), the state entering each chunk.
size_t ssd_states_floats(const SsdParams& p);

// y (B, L, H, P) written. states (ssd_states_floats), when non-null, receives the state entering each
// chunk for the backward (slot 0, chunk 0's, is written only with an initial state in.h0); null: inference,
// nothing saved.
// in.h0 (the state before t = 0) and in.h_last (the state after t = L − 1) are honoured as in ref::.
// scratch: pool.threads() · ssd_scratch_floats(p).
void ssd_forward(ThreadPool& pool, const SsdParams& p, const SsdInputs<float>& in, float* y, float* states,
                 float* scratch);

// dy (B, L, H, P) → g.dx, g.ddelta, g.dB, g.dC written (only their columns); dA_log_part and dD_part
// (B, H) written: the caller adds them over b into the parameter gradients. states from ssd_forward with the
// same in.h0. g.dh0 (B, H, P, N), when non-null, receives the adjoint of the initial state (the state chunk
// 0 enters with; its adjoint dS_in is the last step of the chunk walk).
void ssd_backward(ThreadPool& pool, const SsdParams& p, const SsdInputs<float>& in, const float* states,
                  const float* dy, const SsdGrads<float>& g, float* dA_log_part, float* dD_part, float* scratch);

}  // namespace mlalpha::cpu
