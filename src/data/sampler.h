#pragma once
// Batch sampling (DESIGN section 2, step 1): window b of step `step` is a pure function of
// (seed, step, b), so the device sampler and the CPU trainer pick the same windows and a resumed run
// continues the same sequence. A window is L consecutive steps of one instrument.
//
// Two batch modes (train.batch, docs/config.md):
//   windows  window b: an instrument uniform in [0, N) and a start uniform in [0, T − L], each b on its own;
//   time     B = dates × G windows laid out date-major: window b is slot j = b mod G of cross-section
//            d = b / G. The G windows of cross-section d all cover [t_d − L + 1, t_d] for one end date t_d
//            uniform in [L − 1, T − 1]; their instruments are i_j = (o_d + j·s_d) mod N with an offset o_d
//            uniform in [0, N) and a stride s_d coprime with N, so j ↦ i_j is injective (no instrument twice
//            in a cross-section). G = N takes every instrument in order (i_j = j).
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

MLALPHA_HD int gcd_int(int a, int b) {
  while (b != 0) {
    const int r = a % b;
    a = b;
    b = r;
  }
  return a;
}

// Cross-section d of `step` in time mode: its end date and, for G < N, the offset and stride of its
// instruments. The stride is drawn uniform in [1, N) and moved up to the next value coprime with N (1 always
// is, so the search ends within N tries).
struct CrossSection {
  int end;     // t_d in [L − 1, T − 1]
  int offset;  // o_d in [0, N)
  int stride;  // s_d in [1, N), gcd(s_d, N) = 1; 1 when N = 1
};
MLALPHA_HD CrossSection sample_cross_section(uint64_t seed, int64_t step, int d, int N, int T, int L) {
  const uint64_t stream = 0x7C5E0000ull + uint64_t(step);
  CrossSection c;
  c.end = L - 1 + int(rng_below(seed, stream, 3 * uint64_t(d), uint64_t(T - L + 1)));
  c.offset = int(rng_below(seed, stream, 3 * uint64_t(d) + 1, uint64_t(N)));
  int s = N > 1 ? 1 + int(rng_below(seed, stream, 3 * uint64_t(d) + 2, uint64_t(N - 1))) : 1;
  while (gcd_int(s, N) != 1) s = s + 1 < N ? s + 1 : 1;
  c.stride = s;
  return c;
}

// Window b of a time batch with G instruments per cross-section (1 <= G <= N).
MLALPHA_HD Window sample_time_window(uint64_t seed, int64_t step, int b, int N, int T, int L, int G) {
  const int d = b / G, j = b - d * G;
  const CrossSection c = sample_cross_section(seed, step, d, N, T, L);
  const int inst = G == N ? j : int((uint64_t(c.offset) + uint64_t(j) * uint64_t(c.stride)) % uint64_t(N));
  return {inst, c.end - L + 1};
}

// The shape a gather reads and writes: a panel x (N, T, F), y (N, T, K) → a batch xb (B, L, F), yb (B, L, K).
// dates = 0: windows mode; dates > 0: time mode with G windows per cross-section and B = dates · G.
// The windows are drawn from the T steps [t_begin, t_begin + T) of a panel whose rows hold row_stride steps
// (0: T): a fold's training range read in place from the whole panel, the same windows as from a copy of
// that range alone.
struct GatherParams {
  int N = 0, T = 0, F = 0, K = 0;
  int B = 0, L = 0;
  unsigned long long seed = 0;
  int dates = 0, G = 0;
  int t_begin = 0, row_stride = 0;
};

MLALPHA_HD Window sample_window(const GatherParams& p, int64_t step, int b) {
  return p.dates > 0 ? sample_time_window(p.seed, step, b, p.N, p.T, p.L, p.G)
                     : sample_window(p.seed, step, b, p.N, p.T, p.L);
}

// Where window b of `step` starts in the panel, in floats: x + x_offset is its (L, F) block, y + y_offset
// its (L, K) block (each row-contiguous, the window being consecutive steps of one instrument). The CPU
// gather and the device kernel both read through this function, so they copy the same floats.
struct WindowOffsets {
  size_t x_offset, y_offset;
};
MLALPHA_HD WindowOffsets window_offsets(const GatherParams& p, int64_t step, int b) {
  const Window w = sample_window(p, step, b);
  const size_t stride = size_t(p.row_stride > 0 ? p.row_stride : p.T);
  const size_t row = size_t(w.instrument) * stride + size_t(p.t_begin) + size_t(w.start);
  return {row * size_t(p.F), row * size_t(p.K)};
}

// Throws mlalpha::Error unless the shape can be gathered (B, L, N >= 1, L <= T, t_begin + T <= row_stride; time
// mode: 1 <= G <= N and B = dates · G).
void check_gather(const GatherParams& p);

// CPU gather of one step: x (N, T, F), y (N, T, K) → xb (B, L, F), yb (B, L, K), host memory.
void gather_batch(const GatherParams& p, const float* x, const float* y, int64_t step, float* xb, float* yb);
// The same for a panel (its N, T, F, K).
void gather_batch(const Panel& panel, uint64_t seed, int64_t step, int B, int L, float* xb, float* yb);

}  // namespace mlalpha

#include "core/cuda_fwd.h"

namespace mlalpha::gpu {
using mlalpha::GatherParams;
// Device batch sampling: window b of the step whose number is read from *step (device memory, so a
// replayed graph draws new windows each step) is gathered from the device-resident panel.
// x (N, T, F), y (N, T, K) → xb (B, L, F), yb (B, L, K); xb16 (B, L, F), when non-null, receives xb rounded to
// bf16 (cast_bf16's bits) in the same pass: the bf16 step's input operand without a cast launch.
void gather_batch(const GatherParams& p, const float* x, const float* y, const long long* step, float* xb, float* yb,
                  cudaStream_t stream, __nv_bfloat16* xb16 = nullptr);
// The windows of a prediction plan: xb[b] (L, F) = the L rows of x (N, T, F) from windows[first + min(b, count −
// 1)] = (instrument, start), for b in [0, B) (a short last tile repeats its last window). windows in device
// memory; the same copy as gather_batch, from a list instead of the sampler.
void gather_windows(const int4* windows, int first, int count, int B, int L, const float* x, int T, int F, float* xb,
                    cudaStream_t stream);
}  // namespace mlalpha::gpu
