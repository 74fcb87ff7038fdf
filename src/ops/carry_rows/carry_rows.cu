// The present-row ops of carry_rows.h on the GPU: elementwise copies, one thread an element (grid-stride).
#include <cuda_bf16.h>

#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/carry_rows/carry_rows.h"

namespace mlalpha::gpu {
namespace {

constexpr int kRowsThreads = 256;

unsigned rows_blocks(size_t n) {
  const size_t b = (n + kRowsThreads - 1) / kRowsThreads;
  return unsigned(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

__global__ void __launch_bounds__(kRowsThreads) mask_rows_kernel(RowMap m, int C, int ld, float* __restrict__ a) {
  const size_t n = size_t(m.B) * m.L * C;
  for (size_t i = size_t(blockIdx.x) * kRowsThreads + threadIdx.x; i < n; i += size_t(gridDim.x) * kRowsThreads) {
    const size_t row = i / size_t(C);
    const int b = int(row / size_t(m.L)), r = int(row - size_t(b) * m.L);
    if (r >= m.rows[b]) a[row * ld + (i - row * C)] = 0.0f;
  }
}

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename TX>
__global__ void __launch_bounds__(kRowsThreads) window_tail_kernel(Conv1dParams p, RowMap m, const TX* __restrict__ x,
                                                                   const float* __restrict__ window0,
                                                                   float* __restrict__ window_last) {
  const int W1 = p.W - 1;
  const size_t n = size_t(p.B) * W1 * p.C;
  for (size_t i = size_t(blockIdx.x) * kRowsThreads + threadIdx.x; i < n; i += size_t(gridDim.x) * kRowsThreads) {
    const size_t slot = i / size_t(p.C);  // b·(W−1) + j
    const int c = int(i - slot * p.C), b = int(slot / size_t(W1)), j = int(slot - size_t(b) * W1);
    const int t = m.rows[b] - W1 + j;
    float v = 0.0f;
    if (t >= 0) v = widen(x[(size_t(b) * p.L + t) * p.ld_x + c]);
    else if (window0) v = window0[(size_t(b) * W1 + W1 + t) * p.C + c];
    window_last[i] = v;
  }
}

// One block a lane: the lane's date slots zeroed, then its present rows moved to theirs (distinct slots).
__global__ void __launch_bounds__(kRowsThreads) rows_to_dates_kernel(RowMap m, int K, const float* __restrict__ out,
                                                                     float* __restrict__ outd) {
  const int b = blockIdx.x;
  const size_t n = size_t(m.L) * K, base = size_t(b) * n;
  for (size_t i = threadIdx.x; i < n; i += kRowsThreads) outd[base + i] = 0.0f;
  __syncthreads();
  const size_t np = size_t(m.rows[b]) * K;
  for (size_t i = threadIdx.x; i < np; i += kRowsThreads) {
    const int r = int(i / size_t(K)), k = int(i - size_t(r) * K);
    outd[base + size_t(m.dates[size_t(b) * m.L + r]) * K + k] = out[base + i];
  }
}

__global__ void __launch_bounds__(kRowsThreads) dates_to_rows_kernel(RowMap m, int K, const float* __restrict__ doutd,
                                                                     float* __restrict__ dout) {
  const size_t n = size_t(m.B) * m.L * K;
  for (size_t i = size_t(blockIdx.x) * kRowsThreads + threadIdx.x; i < n; i += size_t(gridDim.x) * kRowsThreads) {
    const size_t row = i / size_t(K);
    const int b = int(row / size_t(m.L)), r = int(row - size_t(b) * m.L), k = int(i - row * K);
    dout[i] = r < m.rows[b] ? doutd[(size_t(b) * m.L + m.dates[row]) * K + k] : 0.0f;
  }
}

void check_map(const RowMap& m, const char* what) {
  require(m.B >= 1 && m.L >= 1 && m.rows && m.dates,
          std::string(what) + ": need B, L >= 1 and the rows and dates of a RowMap");
}

}  // namespace

void mask_rows(const RowMap& m, int C, int ld, float* a, cudaStream_t stream) {
  check_map(m, "mask_rows");
  require(C >= 1 && ld >= C, "mask_rows: need 1 <= C <= ld");
  mask_rows_kernel<<<rows_blocks(size_t(m.B) * m.L * C), kRowsThreads, 0, stream>>>(m, C, ld, a);
  MLALPHA_CHECK_LAUNCH(stream);
}

namespace {
template <typename TX>
void launch_window_tail(const Conv1dParams& p, const RowMap& m, const TX* x, const float* window0, float* window_last,
                        cudaStream_t stream) {
  check_map(m, "window_tail");
  require(p.B == m.B && p.L == m.L && p.C >= 1 && p.ld_x >= p.C && p.W >= 1,
          "window_tail: the conv's (B, L) differ from the row map's, or C, ld_x, W are out of range");
  if (p.W == 1) return;
  window_tail_kernel<<<rows_blocks(size_t(p.B) * (p.W - 1) * p.C), kRowsThreads, 0, stream>>>(p, m, x, window0,
                                                                                                window_last);
  MLALPHA_CHECK_LAUNCH(stream);
}
}  // namespace

void window_tail(const Conv1dParams& p, const RowMap& m, const float* x, const float* window0, float* window_last,
                 cudaStream_t stream) {
  launch_window_tail(p, m, x, window0, window_last, stream);
}

void window_tail(const Conv1dParams& p, const RowMap& m, const __nv_bfloat16* x, const float* window0,
                 float* window_last, cudaStream_t stream) {
  launch_window_tail(p, m, x, window0, window_last, stream);
}

void rows_to_dates(const RowMap& m, int K, const float* out, float* outd, cudaStream_t stream) {
  check_map(m, "rows_to_dates");
  require(K >= 1, "rows_to_dates: K < 1");
  rows_to_dates_kernel<<<unsigned(m.B), kRowsThreads, 0, stream>>>(m, K, out, outd);
  MLALPHA_CHECK_LAUNCH(stream);
}

void dates_to_rows(const RowMap& m, int K, const float* doutd, float* dout, cudaStream_t stream) {
  check_map(m, "dates_to_rows");
  require(K >= 1, "dates_to_rows: K < 1");
  dates_to_rows_kernel<<<rows_blocks(size_t(m.B) * m.L * K), kRowsThreads, 0, stream>>>(m, K, doutd, dout);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu
