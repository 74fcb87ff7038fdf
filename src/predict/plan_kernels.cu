// The device side of a plan's prediction (plan_kernels.h).
#include "predict/plan_kernels.h"

#include <string>

#include "core/cuda_check.h"
#include "core/error.h"

namespace mlalpha::gpu {

namespace {

constexpr int kThreads = 256;

__global__ void fill_nan_kernel(float* __restrict__ pred, size_t n) {
  const size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) pred[i] = __int_as_float(0x7fc00000);  // the quiet NaN of std::numeric_limits<float>
}

// Grid (count, rows): block (b, y) writes window b's elements y·kThreads + threadIdx.x of its L·K outputs.
__global__ void scatter_kernel(const int4* __restrict__ windows, int first, int L, int K, int t0, int span,
                               const float* __restrict__ out, float* __restrict__ pred) {
  const int b = blockIdx.x;
  const int e = blockIdx.y * kThreads + threadIdx.x;
  if (e >= L * K) return;
  const int4 w = windows[first + b];  // instrument, start, keep_from, keep_to
  const int t = w.y + e / K, k = e % K;
  if (t < w.z || t >= w.w) return;
  pred[(size_t(w.x) * span + size_t(t - t0)) * K + k] = out[size_t(b) * L * K + e];
}

}  // namespace

void fill_nan(float* pred, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  fill_nan_kernel<<<unsigned((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(pred, n);
  MLALPHA_CHECK_LAUNCH(stream);
}

void scatter_kept_rows(const int4* windows, int first, int count, int L, int K, int t0, int t1, const float* out,
                       float* pred, cudaStream_t stream) {
  require(count >= 1 && L >= 1 && K >= 1 && t0 < t1 && first >= 0,
          "scatter_kept_rows: need count, L, K >= 1, t0 < t1 and first >= 0, got count = " + std::to_string(count) +
              ", L = " + std::to_string(L) + ", K = " + std::to_string(K) + ", range [" + std::to_string(t0) + ", " +
              std::to_string(t1) + ")");
  const unsigned rows = unsigned((L * K + kThreads - 1) / kThreads);
  require(count <= 2147483647 && rows <= 65535, "scatter_kept_rows: a window of L · K > 65535 · 256 outputs");
  scatter_kernel<<<dim3(unsigned(count), rows), kThreads, 0, stream>>>(windows, first, L, K, t0, t1 - t0, out, pred);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu
