// Linear layer, the non-GEMM kernels (the GEMMs are cuBLASLt calls in linear_gpu.cpp):
// - the bias add y += b, used only when cuBLASLt has no BIAS-epilogue algorithm for a shape;
// - the bias gradient db += Σ_m dy as a two-pass reduction: per-block partials over fixed row chunks,
//   then their fixed-order sum (colsum_add). No atomics, so db is bitwise reproducible (DESIGN section 2).
#include "core/cuda_check.h"
#include "ops/linear/linear.h"

namespace mlalpha::gpu {

namespace {

constexpr int kDbCols = 32;       // output columns per block: one warp reads a contiguous row segment
constexpr int kDbRowThreads = 8;  // thread rows per block, striding over the chunk's rows
constexpr int kDbChunk = kLinearDbChunk;  // rows per partial sum; fixed, so the partials depend on the shape only
static_assert(kDbChunk % kDbRowThreads == 0, "a chunk's rows are whole strides of the thread rows");

int db_chunks(int M) { return (M + kDbChunk - 1) / kDbChunk; }

// partial (chunks, OUT): partial[ch, o] = Σ_{m in chunk ch} dy[m, o]. Each thread row sums its rows in
// ascending order, then thread row 0 adds the 8 row sums in order.
__global__ void db_partial_kernel(int M, int OUT, const float* __restrict__ dy, float* __restrict__ partial) {
  __shared__ float red[kDbRowThreads][kDbCols + 1];
  const int o = blockIdx.x * kDbCols + threadIdx.x;
  const int m0 = blockIdx.y * kDbChunk;
  const int m1 = min(m0 + kDbChunk, M);
  float s = 0.f;
  if (o < OUT)
    for (int m = m0 + threadIdx.y; m < m1; m += kDbRowThreads) s += dy[size_t(m) * OUT + o];
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && o < OUT) {
    float t = red[0][threadIdx.x];
    for (int r = 1; r < kDbRowThreads; ++r) t += red[r][threadIdx.x];
    partial[size_t(blockIdx.y) * OUT + o] = t;
  }
}

// y (M, OUT) += b (OUT) broadcast over rows; elementwise, so the grid size does not affect the result.
__global__ void add_bias_kernel(size_t n, int OUT, const float* __restrict__ b, float* __restrict__ y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] += b[i % OUT];
}

void check_params(const LinearParams& p) {
  require(p.M >= 0, "linear: M must be >= 0, got " + std::to_string(p.M));
  require(p.IN >= 1 && p.OUT >= 1,
          "linear: IN and OUT must be >= 1, got IN=" + std::to_string(p.IN) + " OUT=" + std::to_string(p.OUT));
}

}  // namespace

int linear_db_chunks(const LinearParams& p) {
  check_params(p);
  return db_chunks(p.M);
}

void linear_bias_grad_sum(const LinearParams& p, const float* partial, float* db, cudaStream_t stream,
                          ColsumBatch* defer) {
  check_params(p);
  if (p.M == 0) return;  // db += empty sum
  require(partial != nullptr && db != nullptr, "linear_bias_grad_sum: partial and db must be non-null");
  colsum_add_or_defer(defer, db_chunks(p.M), p.OUT, partial, db, stream);
}

size_t linear_bwd_workspace_floats(const LinearParams& p) {
  check_params(p);
  return size_t(db_chunks(p.M)) * size_t(p.OUT);
}

namespace {
constexpr int kDwMaxSplits = 16, kDwMaxTiles = 128, kDwMinRows = 512;
size_t dw_slice_floats(const LinearParams& p) { return (size_t(p.OUT) * size_t(p.IN) + 63) / 64 * 64; }
}  // namespace

int linear_dw_splits(const LinearParams& p) {
  check_params(p);
  const int64_t tiles = int64_t((p.IN + 127) / 128) * ((p.OUT + 127) / 128);
  int s = 1;
  while (2 * s <= kDwMaxSplits && tiles * 2 * s <= kDwMaxTiles && p.M % (16 * s) == 0 && p.M / (2 * s) >= kDwMinRows)
    s *= 2;
  return s;
}

size_t linear_dw_partial_floats(const LinearParams& p) {
  const int s = linear_dw_splits(p);
  return s > 1 ? size_t(s) * dw_slice_floats(p) : 0;
}

void linear_add_bias(const LinearParams& p, const float* b, float* y, cudaStream_t stream) {
  check_params(p);
  const size_t n = size_t(p.M) * size_t(p.OUT);
  if (n == 0) return;
  require(b != nullptr && y != nullptr, "linear_add_bias: b and y must be non-null");
  const int threads = 256;
  const size_t want = (n + threads - 1) / threads;
  const int blocks = int(want < 8192 ? want : 8192);
  add_bias_kernel<<<blocks, threads, 0, stream>>>(n, p.OUT, b, y);
  MLALPHA_CHECK_LAUNCH(stream);
}

void linear_bias_grad(const LinearParams& p, const float* dy, float* db, float* workspace, cudaStream_t stream,
                      ColsumBatch* defer) {
  check_params(p);
  if (p.M == 0) return;  // db += empty sum
  require(dy != nullptr && db != nullptr, "linear_bias_grad: dy and db must be non-null");
  require(workspace != nullptr, "linear_bias_grad: needs a workspace of linear_bwd_workspace_floats(p) floats");
  const int chunks = db_chunks(p.M);
  require(chunks <= 65535, "linear_bias_grad: M too large (" + std::to_string(p.M) + " rows > 65535·256)");
  const dim3 grid1((p.OUT + kDbCols - 1) / kDbCols, chunks);
  db_partial_kernel<<<grid1, dim3(kDbCols, kDbRowThreads), 0, stream>>>(p.M, p.OUT, dy, workspace);
  MLALPHA_CHECK_LAUNCH(stream);
  linear_bias_grad_sum(p, workspace, db, stream, defer);
}

}  // namespace mlalpha::gpu
