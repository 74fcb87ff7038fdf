#pragma once
// Batch sampling (DESIGN section 2, step 1): window b of step `step` is a pure function of
// (seed, step, b), so the device sampler and the CPU trainer pick the same windows and a resumed run
// continues the same sequence. A window is L consecutive steps of one instrument.
#include <cstddef>
#include <cstdint>

#include "core/hd.h"
#include "core/rng.h"
#include "data/panel.h"

namespace mlalpha {

struct Window {
  int instrument;
  int start;  // first time index; the window covers [start, start + L)
};

MLALPHA_HD Window sample_window(uint64_t seed, int64_t step, int b, int N, int T, int L) {
  const uint64_t stream = 0x5A3B1E00ull + uint64_t(step);
  const int inst = int(rng_below(seed, stream, 2 * uint64_t(b), uint64_t(N)));
  const int start = int(rng_below(seed, stream, 2 * uint64_t(b) + 1, uint64_t(T - L + 1)));
  return {inst, start};
}

// The shape a gather reads and writes: a panel x (N, T, F), y (N, T, K) → a batch xb (B, L, F), yb (B, L, K).
struct GatherParams {
  int N = 0, T = 0, F = 0, K = 0;
  int B = 0, L = 0;
  unsigned long long seed = 0;
};

// Where window b of `step` starts in the panel, in floats: x + x_offset is its (L, F) block, y + y_offset
// its (L, K) block (each row-contiguous, the window being consecutive steps of one instrument). The CPU
// gather and the device kernel both read through this function, so they copy the same floats.
struct WindowOffsets {
  size_t x_offset, y_offset;
};
MLALPHA_HD WindowOffsets window_offsets(const GatherParams& p, int64_t step, int b) {
  const Window w = sample_window(p.seed, step, b, p.N, p.T, p.L);
  const size_t row = size_t(w.instrument) * size_t(p.T) + size_t(w.start);
  return {row * size_t(p.F), row * size_t(p.K)};
}

// Throws mlalpha::Error unless the shape can be gathered (B, L, N >= 1, L <= T).
void check_gather(const GatherParams& p);

// CPU gather of one step: x (N, T, F), y (N, T, K) → xb (B, L, F), yb (B, L, K), host memory.
void gather_batch(const GatherParams& p, const float* x, const float* y, int64_t step, float* xb, float* yb);
// The same for a panel (its N, T, F, K).
void gather_batch(const Panel& panel, uint64_t seed, int64_t step, int B, int L, float* xb, float* yb);

}  // namespace mlalpha

#include <cuda_runtime.h>

namespace mlalpha::gpu {
using mlalpha::GatherParams;
// Device batch sampling: window b of the step whose number is read from *step (device memory, so a
// replayed graph draws new windows each step) is gathered from the device-resident panel.
// x (N, T, F), y (N, T, K) → xb (B, L, F), yb (B, L, K).
void gather_batch(const GatherParams& p, const float* x, const float* y, const long long* step, float* xb, float* yb,
                  cudaStream_t stream);
}  // namespace mlalpha::gpu
