#pragma once
// Time batches with carried states (train.batch = "time" with train.state = "carry"; docs/decisions.md "Stateful
// training", "Time batches with carried states"). The lanes are date-major as in a zero-state time batch
// (sampler.h): lane b is slot j = b mod G of cross-section d = b / G, B = D · G, D = train.dates. Every lane of
// cross-section d covers the same L consecutive dates each step, so the IC loss correlates rows of one date, and
// the next step's window of d is the next L dates, so a lane's state carries along one instrument.
//
// An epoch, over the T dates [0, T) of the training range (relative to its first date):
//   Wt = ⌊T / L⌋ windows, window q covering the dates [φ_e + q·L, φ_e + (q + 1)·L), the phase φ_e uniform in
//   [0, T mod L] (one draw per epoch: the T mod L dates left over move from epoch to epoch);
//   S = ⌈Wt / D⌉ steps; cross-section d walks the run of windows q = d·S + s at the epoch's steps s = 0 .. S − 1,
//   one a step, in time order; q >= Wt is a padding window (x zeros, targets NaN: no loss), fewer than D of them
//   an epoch;
//   its instruments i_j = (o + j·s) mod N, j < G, with an offset o uniform in [0, N) and a stride s in [1, N)
//   coprime with N (sample_cross_section's rule), drawn per (epoch, d) and fixed within the epoch so the states
//   carry; G = N takes i_j = j.
// Step `step` is step s = step mod S of epoch e = ⌊step / S⌋ (S does not depend on the draws). A lane's state
// resets to zero at s = 0 (every lane, at the epoch boundary and where a run starts mid-range) and on padding;
// whole cross-sections reset together, so train.burn_in masks the same rows of every lane of one.
// The dates stay aligned across the cross-section for the loss, but a lane's state skips its instrument's missing
// dates, as the stream and `predict --mode carry` do: the gather puts the window's present rows first and tells
// the model which (gather_time_carry's row maps; docs/decisions.md).
//
// Everything here is a pure function of (seed, step, lane) and the shape, MLALPHA_HD so a device gather can call
// the same code; the host gather is carry_sampler.h's gather_time_carry.
#include <cstdint>

#include "core/hd.h"
#include "core/rng.h"
#include "data/sampler.h"

namespace mlalpha {

struct TimeCarryParams {
  int N = 0;      // the panel's instruments
  int T = 0;      // dates of the training range
  int L = 0;      // train.seq_len
  int dates = 0;  // D cross-sections a step (train.dates)
  int G = 0;      // instruments per cross-section, 1 <= G <= N
  unsigned long long seed = 0;
};

// The RNG streams of an epoch's draws (plus the epoch number), apart from every other sampler's.
constexpr unsigned long long kTimeCarryPhaseStream = 0x71D0000000000000ull;
constexpr unsigned long long kTimeCarryPickStream = 0x72D0000000000000ull;

MLALPHA_HD int64_t time_carry_windows(const TimeCarryParams& p) { return int64_t(p.T / p.L); }  // Wt
MLALPHA_HD int64_t time_carry_epoch_steps(const TimeCarryParams& p) {                           // S
  return (time_carry_windows(p) + p.dates - 1) / p.dates;
}

// φ_e in [0, T mod L].
MLALPHA_HD int time_carry_phase(const TimeCarryParams& p, int64_t epoch) {
  return int(rng_below(p.seed, kTimeCarryPhaseStream + uint64_t(epoch), 0, uint64_t(p.T % p.L) + 1));
}

// The instrument of slot j of cross-section d in epoch `epoch`.
MLALPHA_HD int time_carry_instrument(const TimeCarryParams& p, int64_t epoch, int d, int j) {
  if (p.G == p.N) return j;
  const uint64_t stream = kTimeCarryPickStream + uint64_t(epoch);
  const int offset = int(rng_below(p.seed, stream, 2 * uint64_t(d), uint64_t(p.N)));
  int s = p.N > 1 ? 1 + int(rng_below(p.seed, stream, 2 * uint64_t(d) + 1, uint64_t(p.N - 1))) : 1;
  while (gcd_int(s, p.N) != 1) s = s + 1 < p.N ? s + 1 : 1;
  return int((uint64_t(offset) + uint64_t(j) * uint64_t(s)) % uint64_t(p.N));
}

struct TimeCarryWindow {
  int instrument = -1;  // -1: a padding window
  int start = 0;        // its first date, relative to the range's first
  bool reset = true;    // the lane's state is zero before it
};

// Lane b's window at `step` (0-based: the steps taken before it).
MLALPHA_HD TimeCarryWindow time_carry_window(const TimeCarryParams& p, int64_t step, int lane) {
  const int64_t S = time_carry_epoch_steps(p);
  const int64_t e = step / S, s = step - e * S;
  const int d = lane / p.G, j = lane - d * p.G;
  const int64_t q = int64_t(d) * S + s;
  TimeCarryWindow w;
  if (q >= time_carry_windows(p)) return w;
  w.instrument = time_carry_instrument(p, e, d, j);
  w.start = time_carry_phase(p, e) + int(q) * p.L;
  w.reset = s == 0;
  return w;
}

}  // namespace mlalpha
