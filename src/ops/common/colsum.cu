// colsum_add and ColsumBatch (colsum.h): the fixed-order column sum of per-block partials, one kernel for
// every op, launched per op or once for a batch of jobs.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/common/colsum.cuh"
#include "ops/common/reduce.cuh"

namespace mlalpha::gpu {
namespace {

constexpr int kColTile = 32, kSlices = 16;  // block: 32 columns × 16 slices of partials
// Jobs per batched launch: the table travels as a kernel argument (64 · 32 bytes + the offsets); a bf16
// backward records 9 a layer (7 where the weight gradients take no split) + 5: S 41, M 59, L 61.
constexpr int kMaxJobs = 64;

int col_tiles(int D) { return (D + kColTile - 1) / kColTile; }

// dw[c] += Σ_b partial[b][c] for the block's 32 columns from c0, in a fixed order: slice t sums
// b = t, t + kSlices, …; slices then add in order. The same for a lone job and a batched one.
__device__ __forceinline__ void colsum_tile(int nb, int D, size_t ld, int c0, const float* __restrict__ partial,
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
      for (int u = 0; u < kBatch; ++u) v[u] = partial[size_t(b + u * kSlices) * ld + c];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) acc += v[u];
    }
    for (; b < nb; b += kSlices) acc += partial[size_t(b) * ld + c];
  }
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < D) dw[c] += sum_slices(s);
}

__global__ void __launch_bounds__(kColTile* kSlices)
    colsum_add_kernel(int nb, int D, const float* __restrict__ partial, float* __restrict__ dw) {
  colsum_tile(nb, D, size_t(D), blockIdx.x * kColTile, partial, dw);
}

// A job of nb <= kSlices rows, four columns a thread from c0 (the block's 512 threads: kWideCols columns):
// dw[c] += 0 + p_0[c] + … + p_{nb−1}[c], rows added in order. colsum_tile gives these rows the same sum: each
// slice t < nb holds 0 + p_t, the empty slices 0, and adding +0 changes no sum that started from +0 (an
// exactly cancelling add gives +0 too), so the bits are colsum_add's. nb <= 16: a weight gradient's K-split
// partials (linear.h), read once, hence the streaming loads.
constexpr int kWideCols = 4 * kColTile * kSlices;
__device__ __forceinline__ void colsum_wide(int nb, int D, size_t ld, int c0, const float* __restrict__ partial,
                                            float* __restrict__ dw, bool vec) {
  const int c = c0 + 4 * int(threadIdx.y * kColTile + threadIdx.x);
  if (c >= D) return;
  if (vec && c + 4 <= D) {  // ld, D and both pointers 16-byte aligned (checked on the host)
    // Rounds of 4 loads in flight (64 KB an SM at 3 blocks, above what the bandwidth needs): all 16 at once
    // took 84 registers a thread, one 512-thread block an SM for the batch's column-tile jobs too; 40 now
    constexpr int kRound = kSlices / 4;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 1
    for (int b0 = 0; b0 < nb; b0 += kRound) {
      float4 v[kRound];
#pragma unroll
      for (int u = 0; u < kRound; ++u)
        if (b0 + u < nb) v[u] = __ldcs(reinterpret_cast<const float4*>(partial + size_t(b0 + u) * ld + c));
#pragma unroll
      for (int u = 0; u < kRound; ++u)
        if (b0 + u < nb) s.x += v[u].x, s.y += v[u].y, s.z += v[u].z, s.w += v[u].w;
    }
    float4* out = reinterpret_cast<float4*>(dw + c);
    const float4 d = *out;
    *out = make_float4(d.x + s.x, d.y + s.y, d.z + s.z, d.w + s.w);
    return;
  }
  for (int k = c; k < min(c + 4, D); ++k) {
    float s = 0.f;
    for (int b = 0; b < nb; ++b) s += partial[size_t(b) * ld + k];
    dw[k] += s;
  }
}

// ColsumOrder::kBlock512, column c: thread t = 32·threadIdx.y + threadIdx.x (warp threadIdx.y) adds rows
// t, t + 512, … from 0 in order, each warp its 32 sums by warp_sum's butterfly, then thread 0 the 16 warp sums
// in order from 0 (sum_slots) onto dw[c]: param_reduce_kernel's arithmetic for one head (ssd_bwd.cu, a block
// of 512 threads, block_sum2_first), so its bits.
constexpr int kBlockThreads = kColTile * kSlices;
__device__ __forceinline__ void colsum_block512(int nb, size_t ld, int c, const float* __restrict__ partial,
                                                float* __restrict__ dw) {
  __shared__ float warps[kSlices];
  const int t = int(threadIdx.y) * kColTile + int(threadIdx.x);
  float s = 0.f;
  for (int b = t; b < nb; b += kBlockThreads) s += partial[size_t(b) * ld + c];
  s = warp_sum(s);
  if (threadIdx.x == 0) warps[threadIdx.y] = s;
  __syncthreads();
  if (t == 0) dw[c] += sum_slots<kSlices>(warps);
}

// Whether a job takes colsum_wide (few rows) and whether its rows allow float4 loads.
bool is_wide(const ColsumJob& j) { return j.nb <= kSlices; }
bool is_vec(const ColsumJob& j) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return j.D % 4 == 0 && j.ld % 4 == 0 && aligned(j.partial) && aligned(j.dw);
}
int job_blocks(const ColsumJob& j) {
  if (j.order == ColsumOrder::kBlock512) return j.D;
  return is_wide(j) ? (j.D + kWideCols - 1) / kWideCols : col_tiles(j.D);
}
// A job's form in the batch kernel: 0 column tiles, 1 wide scalar, 2 wide float4, 3 a block per column.
unsigned char job_form(const ColsumJob& j) {
  if (j.order == ColsumOrder::kBlock512) return 3;
  return is_wide(j) ? (is_vec(j) ? 2 : 1) : 0;
}

// A job as the kernel reads it (32 bytes; the order is in `form`).
struct TableJob {
  const float* partial;
  float* dw;
  int nb, D;
  size_t ld;
};
// A batch's jobs (ld filled in), where each one's blocks start in the grid (first[n] = the grid size), and
// its form (job_form).
struct JobTable {
  TableJob job[kMaxJobs];
  int first[kMaxJobs + 1];
  unsigned char form[kMaxJobs];
  int n;
};
static_assert(sizeof(JobTable) <= 4096, "the job table must fit a 4 KB parameter block");

__global__ void __launch_bounds__(kColTile* kSlices) colsum_batch_kernel(const __grid_constant__ JobTable t) {
  int j = 0;
  while (j + 1 < t.n && int(blockIdx.x) >= t.first[j + 1]) ++j;  // ≤ 64 jobs: a linear search is enough
  const TableJob& job = t.job[j];
  const int block = int(blockIdx.x) - t.first[j];
  if (t.form[j] == 0) colsum_tile(job.nb, job.D, job.ld, block * kColTile, job.partial, job.dw);
  else if (t.form[j] == 3) colsum_block512(job.nb, job.ld, block, job.partial, job.dw);
  else colsum_wide(job.nb, job.D, job.ld, block * kWideCols, job.partial, job.dw, t.form[j] == 2);
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
  require(job.ld == 0 || job.ld >= size_t(job.D), "ColsumBatch: a job's row stride " + std::to_string(job.ld) +
                                                       " is below its width " + std::to_string(job.D));
  ColsumJob j = job;
  if (j.ld == 0) j.ld = size_t(j.D);
  jobs_.push_back(j);
}

void ColsumBatch::run(cudaStream_t stream) {
  for (size_t j0 = 0; j0 < jobs_.size(); j0 += kMaxJobs) {
    JobTable t{};
    t.n = int(std::min<size_t>(kMaxJobs, jobs_.size() - j0));
    int tiles = 0;
    for (int j = 0; j < t.n; ++j) {
      const ColsumJob& job = jobs_[j0 + size_t(j)];
      t.job[j] = {job.partial, job.dw, job.nb, job.D, job.ld};
      t.first[j] = tiles;
      t.form[j] = job_form(job);
      tiles += job_blocks(job);
    }
    t.first[t.n] = tiles;
    colsum_batch_kernel<<<tiles, dim3(kColTile, kSlices), 0, stream>>>(t);
    MLALPHA_CHECK_LAUNCH(stream);
  }
  jobs_.clear();
}

}  // namespace mlalpha::gpu
