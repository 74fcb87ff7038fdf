#pragma once
// Fixed-order column sums of per-block partials, the second pass of every parameter gradient that a backward
// kernel reduces over rows without atomics (rmsnorm, gated_rmsnorm, dt_softplus, conv1d, the linear bias):
// each backward block writes one partial row, then the rows are added in an order fixed by the shape only,
// so the results are bitwise reproducible. Host-visible part; the device helpers are in colsum.cuh.
#include <cstddef>
#include <vector>

#include "core/cuda_fwd.h"

namespace mlalpha::gpu {

// dw[c] += Σ_b partial[b][c] for c < D, b < nb (partial is (nb, D), row-major), in a fixed order: slice t
// sums b = t, t + 16, …; the 16 slices then add in order. One launch on `stream`, checked.
void colsum_add(int nb, int D, const float* partial, float* dw, cudaStream_t stream);

// The order a job's rows are added in. kSlices: colsum_add's (below). kBlock512: one block of 512 threads per
// column, thread t adding rows t, t + 512, … in order, each warp's 32 sums by reduce.cuh's xor butterfly, then
// the 16 warp sums in order from 0 (block_sum2_first's arithmetic): the SSD's param_reduce at nchunks = 1
// (ssd_common.cuh), whose bits a deferred dA_log, dD keep. For few columns of many rows each (S: 8 of 64).
enum class ColsumOrder : unsigned char { kSlices, kBlock512 };

// One deferred colsum_add: dw (D) += the column sums of partial (nb, D), row b at partial + b·ld (ld 0: D).
// A job of at most 16 rows (a GEMM's K-split partials, linear.h) is summed by a thread per column quad that
// adds its rows in order, 0 + p_0 + p_1 + …, the order colsum_add gives that many rows: the same bits.
struct ColsumJob {
  const float* partial = nullptr;  // (nb, ld)
  float* dw = nullptr;             // (D)
  int nb = 0, D = 0;
  size_t ld = 0;  // row stride in floats, >= D; 0 means D
  ColsumOrder order = ColsumOrder::kSlices;
};

// The partial sums of a whole backward pass, added in one launch instead of one each (a model's S bf16 step
// has 41 of them, each a launch's latency saved). An op given a batch records its job instead of launching;
// its partials must then stay untouched until run(), so each op needs its own workspace region. Every job is
// summed in exactly the order of the launch it replaces (colsum_add's, or param_reduce's for
// ColsumOrder::kBlock512): the results are bitwise the same as launching each one where it is recorded.
// Host object; safe to use while a stream is being captured.
class ColsumBatch {
 public:
  void add(const ColsumJob& job);
  // dw += … for every recorded job, in as few launches as the kernel's job table allows, then forgets them.
  // No two jobs may share a dw (they would race).
  void run(cudaStream_t stream);
  size_t pending() const { return jobs_.size(); }

 private:
  std::vector<ColsumJob> jobs_;
};

// colsum_add now, or recorded in `defer` when it is non-null.
inline void colsum_add_or_defer(ColsumBatch* defer, int nb, int D, const float* partial, float* dw,
                                cudaStream_t stream) {
  if (defer) defer->add({partial, dw, nb, D, 0});
  else colsum_add(nb, D, partial, dw, stream);
}

}  // namespace mlalpha::gpu
