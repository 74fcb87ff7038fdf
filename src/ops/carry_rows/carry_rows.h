#pragma once
// Windows whose lanes hold fewer rows than L (time batches with carried states, docs/decisions.md "Time batches
// with carried states": an instrument's missing dates are skipped, as the stream skips them). Lane b's first
// n_b = rows[b] rows are its present rows in date order, rows n_b .. L − 1 padding; dates (B, L) maps present
// row r < n_b to its date offset in the window (strictly increasing, < L). Four small ops around the model's:
//   mask_rows:     a[b, r, :] = 0 for r ≥ n_b. On Δ it makes the SSM pass a padding row unchanged
//                  (s_t = e^{A·0} s_{t−1} + 0·B x = s_{t−1}); its adjoint is itself (dΔ masked the same way).
//   window_tail:   the conv's carried window after the lane's last present row: window_last[b, j] = input row
//                  n_b − (W−1) + j, from window0 where that is < 0 (conv1d.h's window_last at n_b = L).
//   rows_to_dates: the predictions moved to their dates, outd[b, dates[b, r]] = out[b, r] for r < n_b, and a
//                  finite 0 at a date with no present row (its target is NaN, so the loss ignores it).
//   dates_to_rows: the adjoint: dout[b, r] = doutd[b, dates[b, r]] for r < n_b, 0 on padding rows.
// The rows are present rows first and the conv is causal, so padding never reaches a present row's output.
// CPU: carry_rows_ref.cpp (the reference, which the fast CPU model also calls: these are copies); GPU: carry_rows.cu.
#include <cstddef>

#include "core/cuda_fwd.h"
#include "ops/conv1d/conv1d.h"

namespace mlalpha {

// A batch's present rows: null rows is every lane full (n_b = L, dates the identity).
struct RowMap {
  int B = 0, L = 0;
  const int* rows = nullptr;   // (B) n_b in [0, L]
  const int* dates = nullptr;  // (B, L) the date offset of present row r < n_b (the rest not read)
};

namespace ref {
// a (B, L, ld) first C columns: rows r ≥ n_b zeroed.
template <typename T>
void mask_rows(const RowMap& m, int C, int ld, T* a);
// x (B, L, ld_x) first C columns, window0 (B, W−1, C) or null (zeros) → window_last (B, W−1, C) written.
template <typename T>
void window_tail(const Conv1dParams& p, const RowMap& m, const T* x, const T* window0, T* window_last);
// out (B, L, K) present rows first → outd (B, L, K) in date order, written.
template <typename T>
void rows_to_dates(const RowMap& m, int K, const T* out, T* outd);
// doutd (B, L, K) in date order → dout (B, L, K) present rows first, written.
template <typename T>
void dates_to_rows(const RowMap& m, int K, const T* doutd, T* dout);
}  // namespace ref

namespace gpu {
// The same on device pointers (m's too).
void mask_rows(const RowMap& m, int C, int ld, float* a, cudaStream_t stream);
void window_tail(const Conv1dParams& p, const RowMap& m, const float* x, const float* window0, float* window_last,
                 cudaStream_t stream);
// bf16 precision: x is in_proj's bf16 output, each value widened exactly (the conv's bf16 input, conv1d.h).
void window_tail(const Conv1dParams& p, const RowMap& m, const __nv_bfloat16* x, const float* window0,
                 float* window_last, cudaStream_t stream);
void rows_to_dates(const RowMap& m, int K, const float* out, float* outd, cudaStream_t stream);
void dates_to_rows(const RowMap& m, int K, const float* doutd, float* dout, cudaStream_t stream);
}  // namespace gpu

}  // namespace mlalpha
