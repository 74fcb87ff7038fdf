// colsum_add and ColsumBatch (colsum.h): the fixed-order column sum of per-block partials, one kernel for
// every op, launched per op or once for a batch of jobs.
#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/common/colsum.cuh"

namespace mlalpha::gpu {
namespace {

constexpr int kColTile = 32, kSlices = 16;  // block: 32 columns × 16 slices of partials
constexpr int kMaxJobs = 64;                // jobs per batched launch: the table travels as a kernel argument

int col_tiles(int D) { return (D + kColTile - 1) / kColTile; }

// dw[c] += Σ_b partial[b][c] for the block's 32 columns from c0, in a fixed order: slice t sums
// b = t, t + kSlices, …; slices then add in order. The same for a lone job and a batched one.
__device__ __forceinline__ void colsum_tile(int nb, int D, int c0, const float* __restrict__ partial,
                                            float* __restrict__ dw) {
  __shared__ float s[kSlices][kColTile];
  const int c = c0 + threadIdx.x;
  float acc = 0.f;
  if (c < D) {
    // kBatch loads in flight before they are added (in the same order as one at a time): a slice has
    // nb / kSlices rows (64 for M = 16K rows in blocks of 16), and each round trip to L2 is latency-bound
    constexpr int kBatch = 8;
    int b = threadIdx.y;
    for (; b + (kBatch - 1) * kSlices < nb; b += kBatch * kSlices) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v[u] = partial[size_t(b + u * kSlices) * D + c];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) acc += v[u];
    }
    for (; b < nb; b += kSlices) acc += partial[size_t(b) * D + c];
  }
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < D) dw[c] += sum_slices(s);
}

__global__ void __launch_bounds__(kColTile* kSlices)
    colsum_add_kernel(int nb, int D, const float* __restrict__ partial, float* __restrict__ dw) {
  colsum_tile(nb, D, blockIdx.x * kColTile, partial, dw);
}

// A batch's jobs and where each one's column tiles start in the grid (first[n] = the grid size).
struct JobTable {
  ColsumJob job[kMaxJobs];
  int first[kMaxJobs + 1];
  int n;
};

__global__ void __launch_bounds__(kColTile* kSlices) colsum_batch_kernel(const __grid_constant__ JobTable t) {
  int j = 0;
  while (j + 1 < t.n && int(blockIdx.x) >= t.first[j + 1]) ++j;  // ≤ 64 jobs: a linear search is enough
  const ColsumJob& job = t.job[j];
  colsum_tile(job.nb, job.D, (int(blockIdx.x) - t.first[j]) * kColTile, job.partial, job.dw);
}

}  // namespace

void colsum_add(int nb, int D, const float* partial, float* dw, cudaStream_t stream) {
  colsum_add_kernel<<<col_tiles(D), dim3(kColTile, kSlices), 0, stream>>>(nb, D, partial, dw);
  MLALPHA_CHECK_LAUNCH(stream);
}

void ColsumBatch::add(const ColsumJob& job) {
  require(job.nb >= 0 && job.D >= 0, "ColsumBatch: a job needs nb, D >= 0, got nb=" + std::to_string(job.nb) +
                                         " D=" + std::to_string(job.D));
  if (job.D == 0) return;
  require(job.partial != nullptr && job.dw != nullptr, "ColsumBatch: a job's partial and dw must be non-null");
  jobs_.push_back(job);
}

void ColsumBatch::run(cudaStream_t stream) {
  for (size_t j0 = 0; j0 < jobs_.size(); j0 += kMaxJobs) {
    JobTable t{};
    t.n = int(std::min<size_t>(kMaxJobs, jobs_.size() - j0));
    int tiles = 0;
    for (int j = 0; j < t.n; ++j) {
      t.job[j] = jobs_[j0 + size_t(j)];
      t.first[j] = tiles;
      tiles += col_tiles(t.job[j].D);
    }
    t.first[t.n] = tiles;
    colsum_batch_kernel<<<tiles, dim3(kColTile, kSlices), 0, stream>>>(t);
    MLALPHA_CHECK_LAUNCH(stream);
  }
  jobs_.clear();
}

}  // namespace mlalpha::gpu
