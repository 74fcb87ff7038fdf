// Device twin of gather_batch (synthetic.cpp): same windows from the same (seed, step, b).
#include "core/cuda_check.h"
#include "core/error.h"
#include "data/sampler.h"

namespace mlalpha::gpu {

namespace {
// One block per window; threads copy the window's contiguous L·F (then L·K) floats.
__global__ void gather_kernel(GatherParams p, const float* __restrict__ x, const float* __restrict__ y,
                              const long long* __restrict__ step, float* __restrict__ xb, float* __restrict__ yb) {
  const int b = blockIdx.x;
  const Window w = sample_window(p.seed, *step, b, p.N, p.T, p.L);
  const size_t row = size_t(w.instrument) * p.T + w.start;
  const size_t nx = size_t(p.L) * p.F, ny = size_t(p.L) * p.K;
  for (size_t i = threadIdx.x; i < nx; i += blockDim.x) xb[size_t(b) * nx + i] = x[row * p.F + i];
  for (size_t i = threadIdx.x; i < ny; i += blockDim.x) yb[size_t(b) * ny + i] = y[row * p.K + i];
}
}  // namespace

void gather_batch(const GatherParams& p, const float* x, const float* y, const long long* step, float* xb, float* yb,
                  cudaStream_t stream) {
  require(p.B >= 1 && p.L >= 1 && p.L <= p.T && p.N >= 1, "gather_batch: need B, L >= 1, L <= T, N >= 1");
  gather_kernel<<<p.B, 256, 0, stream>>>(p, x, y, step, xb, yb);
  MLALPHA_CHECK_LAUNCH();
}

}  // namespace mlalpha::gpu
