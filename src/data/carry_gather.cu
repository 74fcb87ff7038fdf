// Device twin of CarrySampler::gather and of CpuTrainer's lane resets (carry_gather.h).
#include "data/carry_gather.h"

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"

namespace mlalpha::gpu {

namespace {
constexpr int kCarryThreads = 256;
constexpr int kCarrySlice = 8 * kCarryThreads;  // floats of one lane's window a block copies (grid.y slices)

// The slot of lane b at step `step`: epoch e = step / S in table e mod 2, its step s = step mod S.
__device__ int4 carry_slot(const CarryTables& t, long long S, long long step, int b) {
  const long long e = step / S, s = step - e * S;
  const int4* table = (e & 1) ? t.table[1] : t.table[0];  // a select: an indexed parameter array goes to the stack
  return table[size_t(b) * size_t(S) + size_t(s)];
}

// The first index of rows[0 .. n) (ascending) whose value is >= v (n when none).
__device__ int carry_lower_bound(const int* rows, int n, int v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (rows[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Grid (B, slices): block (b, z) writes floats [z·kCarrySlice, (z + 1)·kCarrySlice) of lane b's L·F features and
// of its L·K targets; row r of the window is present row first + r of its instrument.
__global__ void __launch_bounds__(kCarryThreads) carry_gather_kernel(CarryGatherParams p, CarryTables t,
                                                                     const long long* __restrict__ step,
                                                                     const float* __restrict__ x,
                                                                     const float* __restrict__ y,
                                                                     float* __restrict__ xb, float* __restrict__ yb,
                                                                     int* __restrict__ lane_rows,
                                                                     int* __restrict__ lane_dates) {
  const int b = blockIdx.x;
  const int4 w = carry_slot(t, p.S, *step, b);
  const float nan = __int_as_float(0x7fc00000);  // std::numeric_limits<float>::quiet_NaN()'s bits
  const size_t nx = size_t(p.L) * p.F, ny = size_t(p.L) * p.K;
  const size_t j0 = size_t(blockIdx.y) * kCarrySlice;
  const bool real = w.x >= 0;
  if (lane_rows) {  // time batches skipping missing dates: the present rows of [first, first + L) come first
    const int* r0 = real ? t.rows + t.offsets[w.x] : nullptr;
    const int lo = real ? carry_lower_bound(r0, t.offsets[w.x + 1] - t.offsets[w.x], w.y) : 0;
    const int hi = real ? lo + carry_lower_bound(r0 + lo, t.offsets[w.x + 1] - t.offsets[w.x] - lo, w.y + p.L) : 0;
    const int n = hi - lo;
    for (size_t j = j0 + threadIdx.x; j < j0 + kCarrySlice && j < nx; j += kCarryThreads) {
      const int r = int(j / size_t(p.F)), f = int(j - size_t(r) * p.F);
      xb[size_t(b) * nx + j] = r < n ? x[(size_t(w.x) * p.T + size_t(r0[lo + r])) * p.F + f] : 0.0f;
    }
    for (size_t j = j0 + threadIdx.x; j < j0 + kCarrySlice && j < ny; j += kCarryThreads) {
      const int r = int(j / size_t(p.K)), k = int(j - size_t(r) * p.K);
      const int at = real ? carry_lower_bound(r0 + lo, n, w.y + r) : 0;  // date r's row, if it has one
      const bool present = at < n && r0[lo + at] == w.y + r;
      const bool masked = !present || (w.z != 0 && r < p.burn_in);
      yb[size_t(b) * ny + j] = masked ? nan : y[(size_t(w.x) * p.T + size_t(w.y + r)) * p.K + k];
    }
    if (blockIdx.y == 0) {
      if (threadIdx.x == 0) lane_rows[b] = n;
      for (int r = threadIdx.x; r < p.L; r += kCarryThreads) lane_dates[size_t(b) * p.L + r] = r < n ? r0[lo + r] - w.y : -1;
    }
    return;
  }
  // Row r of the window is time step first + r (time batches) or the instrument's present row first + r.
  const int* rows = real && !p.dated ? t.rows + t.offsets[w.x] + w.y : nullptr;
  const auto time_of = [&](int r) { return size_t(p.dated ? w.y + r : rows[r]); };
  for (size_t j = j0 + threadIdx.x; j < j0 + kCarrySlice && j < nx; j += kCarryThreads) {
    const int r = int(j / size_t(p.F)), f = int(j - size_t(r) * p.F);
    xb[size_t(b) * nx + j] = real ? x[(size_t(w.x) * p.T + time_of(r)) * p.F + f] : 0.0f;
  }
  for (size_t j = j0 + threadIdx.x; j < j0 + kCarrySlice && j < ny; j += kCarryThreads) {
    const int r = int(j / size_t(p.K)), k = int(j - size_t(r) * p.K);
    const bool masked = !real || (w.z != 0 && r < p.burn_in);
    yb[size_t(b) * ny + j] = masked ? nan : y[(size_t(w.x) * p.T + time_of(r)) * p.K + k];
  }
}

// Grid (NL · B): block (l, b) zeroes layer l's states of lane b when its window starts from zero.
__global__ void __launch_bounds__(kCarryThreads) carry_reset_kernel(CarryGatherParams p, CarryTables t,
                                                                    const long long* __restrict__ step,
                                                                    size_t conv_lane, size_t ssm_lane,
                                                                    float* __restrict__ conv, float* __restrict__ ssm) {
  const int b = int(blockIdx.x % unsigned(p.B));
  if (carry_slot(t, p.S, *step, b).z == 0) return;
  float* c = conv + size_t(blockIdx.x) * conv_lane;  // (l·B + b)·conv_lane: the layer-major layout
  float* s = ssm + size_t(blockIdx.x) * ssm_lane;
  for (size_t i = threadIdx.x; i < conv_lane; i += kCarryThreads) c[i] = 0.0f;
  for (size_t i = threadIdx.x; i < ssm_lane; i += kCarryThreads) s[i] = 0.0f;
}

__global__ void __launch_bounds__(kCarryThreads) carry_clear_kernel(const int* __restrict__ flag, float* __restrict__ a,
                                                                    size_t na, float* __restrict__ c, size_t nc) {
  if (*flag == 0) return;
  const size_t stride = size_t(gridDim.x) * kCarryThreads;
  for (size_t i = size_t(blockIdx.x) * kCarryThreads + threadIdx.x; i < na + nc; i += stride) {
    if (i < na) a[i] = 0.0f;
    else c[i - na] = 0.0f;
  }
}

void check_carry(const CarryGatherParams& p, const CarryTables& t, const char* what) {
  require(p.B >= 1 && p.L >= 1 && p.S >= 1 && p.N >= 1 && p.T >= 1 && p.F >= 1 && p.K >= 1 && p.burn_in >= 0,
          std::string(what) + ": need B, L, S, N, T, F, K >= 1 and burn_in >= 0, got B = " + std::to_string(p.B) +
              ", L = " + std::to_string(p.L) + ", S = " + std::to_string(p.S) + ", N = " + std::to_string(p.N) +
              ", T = " + std::to_string(p.T) + ", F = " + std::to_string(p.F) + ", K = " + std::to_string(p.K) +
              ", burn_in = " + std::to_string(p.burn_in));
  require(t.table[0] && t.table[1] && (p.dated || (t.offsets && t.rows)),
          std::string(what) + ": an epoch table or row list is null");
}
}  // namespace

void carry_gather(const CarryGatherParams& p, const CarryTables& t, const long long* step, const float* x,
                  const float* y, float* xb, float* yb, cudaStream_t stream, int* lane_rows, int* lane_dates) {
  check_carry(p, t, "carry_gather");
  require((lane_rows == nullptr) == (lane_dates == nullptr) && (!lane_rows || (p.dated && t.offsets && t.rows)),
          "carry_gather: lane rows and dates go together, with time batches (dated) and the present-row lists");
  const size_t n = size_t(p.L) * size_t(std::max(p.F, p.K));
  const size_t slices = (n + kCarrySlice - 1) / kCarrySlice;
  require(slices <= 65535, "carry_gather: window too large for one grid (L · max(F, K) > 65535 · 2048)");
  carry_gather_kernel<<<dim3(unsigned(p.B), unsigned(slices)), kCarryThreads, 0, stream>>>(p, t, step, x, y, xb, yb,
                                                                                           lane_rows, lane_dates);
  MLALPHA_CHECK_LAUNCH(stream);
}

void carry_reset(const CarryGatherParams& p, const CarryTables& t, const long long* step, int NL, size_t conv_lane,
                 size_t ssm_lane, float* conv, float* ssm, cudaStream_t stream) {
  check_carry(p, t, "carry_reset");
  require(NL >= 1 && size_t(NL) * size_t(p.B) <= 0x7fffffffu, "carry_reset: NL · B out of range");
  carry_reset_kernel<<<unsigned(NL * p.B), kCarryThreads, 0, stream>>>(p, t, step, conv_lane, ssm_lane, conv, ssm);
  MLALPHA_CHECK_LAUNCH(stream);
}

void carry_clear_if(const int* flag, float* conv, size_t n_conv, float* ssm, size_t n_ssm, cudaStream_t stream) {
  const size_t n = n_conv + n_ssm;
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<size_t>((n + kCarryThreads - 1) / kCarryThreads, 1024));
  carry_clear_kernel<<<blocks, kCarryThreads, 0, stream>>>(flag, conv, n_conv, ssm, n_ssm);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu
