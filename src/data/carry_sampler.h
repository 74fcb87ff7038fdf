#pragma once
// The batches of stateful training (train.state = "carry", docs/decisions.md "Stateful training"): B lanes,
// each advancing one window of L rows a step along one instrument's present rows, so that window k + 1 of a lane
// continues from the state window k ended with.
//
// An epoch. Instrument i has n_i present rows in the training range (a raw row with a finite feature,
// input_row & kRowFeatures, as `predict --mode carry` and the stream count them: a missing row does not exist
// for the state). Its windows are w_i = ⌊n_i / L⌋ non-overlapping runs of L present rows from a phase φ_i drawn
// uniform in [0, n_i mod L], so the n_i mod L rows left over fall before and after them in a place that moves
// from epoch to epoch. The epoch's instruments come in a seeded order, and their windows, each instrument's in
// time order, make one sequence of W = Σ w_i windows (fixed: it does not depend on the phases). Lane b takes the
// S = ⌈W / B⌉ windows [b·S, (b + 1)·S) of it, one a step; the slots past W (the last lanes' tail, fewer than B
// in all) are padding windows, with no loss. So every step has B lanes, each lane's windows of an instrument
// are consecutive and in time order, and every window of the epoch is visited once.
// A lane's state resets to zero at the epoch's start, where its segment moves to another instrument (and so
// where a segment starts in the middle of one), and on padding. Burn-in (train.burn_in) masks the loss of the
// first rows of a window after a reset only: the other windows start from a carried state.
//
// Window (step, lane) is a pure function of the seed, the step, the lane and the panel's presence, so a resumed
// run continues the same sequence from its step number (and the carried states in its checkpoint).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "data/carry_sampler_time.h"
#include "data/panel.h"

namespace mlalpha {

// Each instrument's present rows in the time steps [t_begin, t_end) of a panel: their time indices, ascending. One
// instance serves the samplers of every member that trains on that panel and range (a population's), since the
// lists are the size of the range's present rows.
struct PresentRows {
  int t_begin = 0, t_end = 0;
  std::vector<std::vector<int>> rows;  // (N)
};
std::shared_ptr<const PresentRows> present_rows(const Panel& panel, int t_begin, int t_end);

struct CarryWindow {
  int instrument = -1;  // -1: a padding window (x zeros, targets NaN)
  int first = 0;        // the index of its first row among the instrument's present rows
  bool reset = true;    // the lane's state is zero before it
};

class CarrySampler {
 public:
  // The present rows of `panel` in the time steps [t_begin, t_end), for B lanes of windows of L rows. Throws
  // mlalpha::Error when no instrument has L present rows there (naming train.seq_len).
  CarrySampler(const Panel& panel, int t_begin, int t_end, int B, int L, uint64_t seed);
  // The same over present rows found already (present_rows), shared with other samplers.
  CarrySampler(std::shared_ptr<const PresentRows> rows, int B, int L, uint64_t seed);

  // Throws the constructor's error unless some instrument has L present rows in [t_begin, t_end); stops at the
  // first that has (a check before anything is allocated: a population checks each member).
  static void check_range(const Panel& panel, int t_begin, int t_end, int L);

  int lanes() const { return B_; }
  int window_len() const { return L_; }
  int64_t windows_per_epoch() const { return W_; }  // W
  int64_t epoch_steps() const { return S_; }        // S = ⌈W / B⌉
  // Instrument i's present rows in the range, as time indices of the panel, ascending.
  const std::vector<int>& rows(int i) const { return present_->rows[size_t(i)]; }

  // Lane b's window of step `step` (0-based: the steps taken before it).
  CarryWindow window(int64_t step, int lane) const;

  // The batch of a step: xb (B, L, F), yb (B, L, K) from the panel's x (N, T, F), y (N, T, K), the target of a
  // row t < burn_in of a window after a reset set to NaN (masked); reset (B) written: 1 where the lane's state
  // must be zeroed before the window.
  void gather(int64_t step, const Panel& panel, int burn_in, float* xb, float* yb, unsigned char* reset) const;

 private:
  struct Epoch {
    int64_t number = -1;
    std::vector<int> order;      // (instruments with a window) in the epoch's order
    std::vector<int> phase;      // (N) φ_i
    std::vector<int64_t> start;  // (order.size() + 1) the sequence index of each one's first window
  };
  const Epoch& epoch(int64_t e) const;

  int B_, L_;
  uint64_t seed_;
  std::shared_ptr<const PresentRows> present_;
  std::vector<int> with_windows_;       // instruments with w_i >= 1, ascending
  int64_t W_ = 0, S_ = 0;
  mutable Epoch cache_;  // the last epoch asked for: a cache of a pure function, so the results do not depend on it
};

// Time batches with carried states (carry_sampler_time.h), on the host: the batch of `step`, xb (B, L, F), yb (B, L, K)
// with B = p.dates · p.G, from the panel's x (N, T, F), y (N, T, K) over its dates [t_begin, t_begin + p.T) (the
// training range, read in place), each window's L dates copied as the panel holds them (a missing row as its fill,
// its target NaN); the target of a row t < burn_in of a window after a reset set to NaN (masked); reset (B)
// written: 1 where the lane's state must be zeroed before the window. Padding windows: x zeros, targets NaN.
// Throws mlalpha::Error (before writing) unless 1 <= L <= p.T, 1 <= G <= N = panel.N, dates >= 1 and the range is
// inside the panel.
// With rows (B) and dates (B, L) (the trainers' call; ops/carry_rows/carry_rows.h's RowMap): an instrument's
// missing dates are skipped, as the stream skips them. Lane b's n_b present rows of the window (input_row &
// kRowFeatures, as CarrySampler counts them) go to xb's first rows in date order, its rows n_b .. L − 1 are zeros
// (padding, which the model's state passes unchanged); yb stays in date order, NaN at a date without a present
// row; rows[b] = n_b, dates[b, r] = the date offset of present row r < n_b, −1 after (a padding window: n_b = 0).
void gather_time_carry(const TimeCarryParams& p, const Panel& panel, int t_begin, int64_t step, int burn_in, float* xb,
                       float* yb, unsigned char* reset, int* rows = nullptr, int* dates = nullptr);

}  // namespace mlalpha
