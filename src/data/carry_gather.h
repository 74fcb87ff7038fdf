#pragma once
// The device side of stateful training's batches (train.state = "carry", data/carry_sampler.h): the gather of a
// step's consecutive windows, the reset of the lanes' carried states, and their clearing after a skipped step.
// GPU code; the host side that fills the window tables is data/carry_sampler_gpu.h.
//
// An epoch's windows reach the device as a table of int4 slots, one per (lane, step of the epoch): lane b's
// window of the epoch's step s is slot b·S + s = (instrument, first, reset, 0), CarrySampler::window's fields
// (instrument −1: a padding window). Two tables take alternate epochs (epoch e in table e mod 2), so the step
// counter in device memory picks its window: e = step / S, s = step mod S, as CarrySampler::window computes them.
#include <cuda_runtime.h>

#include <cstddef>

namespace mlalpha {

// What the carry kernels read: the panel x (N, T, F), y (N, T, K) (the whole time axis: the present-row lists
// hold its time indices), B lanes of windows of L rows, S steps an epoch.
struct CarryGatherParams {
  int N = 0, T = 0, F = 0, K = 0;
  int B = 0, L = 0;
  long long S = 0;  // steps an epoch (CarrySampler::epoch_steps)
  int burn_in = 0;  // rows t < burn_in of a window after a reset get NaN targets (the loss's mask)
  int dated = 0;    // 1: time batches — a slot's `first` is the time step of its window's first row and the rows
                    // are consecutive dates (carry_sampler_time.h). 0: `first` indexes the present rows
};

namespace gpu {

// The epoch tables and the present rows: table[e mod 2] (B·S) the windows of the epoch of *step; offsets (N + 1)
// and rows (offsets[N]): instrument i's present time steps, ascending, at rows[offsets[i] ..] (with dated: read
// only when the gather compacts, lane_rows non-null).
struct CarryTables {
  const int4* table[2] = {nullptr, nullptr};  // (B·S) each
  const int* offsets = nullptr;               // (N + 1)
  const int* rows = nullptr;                  // (offsets[N])
};

// xb (B, L, F), yb (B, L, K) of step *step (device memory, the steps taken before it): lane b's window is its
// slot's L present rows from `first` on; a padding window's x zeros and targets NaN; a window after a reset has
// NaN targets in its first burn_in rows. The copy CarrySampler::gather makes on the host, float for float (with
// p.dated, the L dates from `first` on: gather_time_carry's copy).
// With p.dated and lane_rows (B), lane_dates (B, L) non-null: an instrument's missing dates skipped, as
// gather_time_carry writes them with its rows and dates (present rows first, targets on their dates, the RowMap of
// ops/carry_rows/carry_rows.h), float for float and int for int. Null in windows mode.
void carry_gather(const CarryGatherParams& p, const CarryTables& t, const long long* step, const float* x,
                  const float* y, float* xb, float* yb, cudaStream_t stream, int* lane_rows = nullptr,
                  int* lane_dates = nullptr);

// Zeroes the carried states of the lanes whose window of step *step starts from zero (its slot's reset flag):
// conv (NL, B, conv_lane), ssm (NL, B, ssm_lane), conv_lane = (W − 1)·conv_dim, ssm_lane = H·P·N.
void carry_reset(const CarryGatherParams& p, const CarryTables& t, const long long* step, int NL, size_t conv_lane,
                 size_t ssm_lane, float* conv, float* ssm, cudaStream_t stream);

// Zeroes conv (n_conv) and ssm (n_ssm) when *flag is nonzero (a skipped step: a non-finite batch may have left
// non-finite states, and the CPU trainer starts every lane's next window from zero then).
void carry_clear_if(const int* flag, float* conv, size_t n_conv, float* ssm, size_t n_ssm, cudaStream_t stream);

}  // namespace gpu
}  // namespace mlalpha
