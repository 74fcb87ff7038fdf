#pragma once
// The device side of a plan's prediction (plan_kernels.cu; predict.h runs them): the prediction buffer filled
// with NaN and the kept rows of each tile scattered into it. The windows' gather is the sampler's
// (data/sampler.h, gpu::gather_windows).
#include <cstddef>

#include <cuda_runtime.h>

namespace mlalpha::gpu {

// pred (n) = NaN (the quiet NaN std::numeric_limits<float> gives: rows a plan does not keep read as before).
void fill_nan(float* pred, size_t n, cudaStream_t stream);
// The kept rows of the tile's windows windows[first .. first + count) (instrument, start, keep_from, keep_to)
// from out (B, L, K) into pred (N, t1 − t0, K): pred[i, t − t0, k] = out[b, t − start, k] for t in
// [keep_from, keep_to). Each element is written by one thread; a plan keeps each (instrument, time) once.
void scatter_kept_rows(const int4* windows, int first, int count, int L, int K, int t0, int t1, const float* out,
                       float* pred, cudaStream_t stream);

}  // namespace mlalpha::gpu
