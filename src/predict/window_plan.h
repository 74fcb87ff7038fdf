#pragma once
// A prediction plan: the windows a model reads and the rows of each it keeps. A window is L consecutive time
// steps of one instrument, run from a zero state; its rows [keep_from, keep_to) (panel time indices inside the
// window) are predictions, every other row is context. Every prediction of the engine (validation, test,
// eval, predict, the walk-forward pooling, Python) runs a plan, on the CPU or on the GPU (predict.h), so a
// new definition of a date's prediction is a new plan, not a new predictor.
#include <vector>

namespace mlalpha {

struct PlanWindow {
  int instrument = 0;
  int start = 0;                 // first time index: the window covers [start, start + L)
  int keep_from = 0, keep_to = 0;  // the rows it predicts, start <= keep_from < keep_to <= start + L
};

struct WindowPlan {
  int N = 0, T = 0;    // the panel it reads: N instruments × T time steps
  int L = 0;           // rows per window
  int t0 = 0, t1 = 0;  // every kept row lies in [t0, t1)
  std::vector<PlanWindow> windows;
};

// The evaluation layout before each date got its own window (kept for `ml-alpha bench --predict`'s comparison;
// no prediction path uses it: a date's context moved with the range's start): each instrument's range [t0, t1)
// is covered by windows of L rows that keep their rows
// from burn_in on (every row of a window that starts at the panel's first step: there is no earlier history
// to warm up on), each starting where the previous one's kept rows end, so every (instrument, time) of the
// range is predicted exactly once. Windows are clamped to the panel: [0, T).
WindowPlan tiled_windows(int N, int T, int L, int burn_in, int t0, int t1);

// Every date's own window (docs/data.md, "What a date's prediction is", mode `window`): date t of [t0, t1) is
// the last row of the window of the C rows ending at t, run from a zero state, so its score depends on the
// instrument's rows t − C + 1 .. t alone, never on where the panel starts. A date with fewer than C rows before
// it (t < C − 1) gets the shorter window of rows 0 .. t: the model is causal, so it is the row t of the window
// [0, L) (L = min(C, T)), and every such date of an instrument shares that one window. Each date is otherwise a
// window of its own: N · (t1 − t0) windows of C rows, C times the rows of the `tiled_windows` plan.
WindowPlan date_windows(int N, int T, int C, int t0, int t1);
// The rows behind date t's prediction in mode `window`: min(C, t + 1).
inline int window_context(int C, int t) { return t + 1 < C ? t + 1 : C; }
// window_context of every (instrument, time) of an N × T panel: (N, T), as the prediction files write it.
std::vector<int> window_contexts(int N, int T, int C);

// Throws unless every window of `plan` lies in its panel and keeps rows of [t0, t1) inside itself.
void check_plan(const WindowPlan& plan);

}  // namespace mlalpha
