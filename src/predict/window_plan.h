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

// The evaluation windows of a model trained on windows of L rows with `burn_in` (docs/config.md,
// "Evaluation windows"): each instrument's range [t0, t1) is covered by windows of L rows that keep their rows
// from burn_in on (every row of a window that starts at the panel's first step: there is no earlier history
// to warm up on), each starting where the previous one's kept rows end, so every (instrument, time) of the
// range is predicted exactly once. Windows are clamped to the panel: [0, T).
WindowPlan tiled_windows(int N, int T, int L, int burn_in, int t0, int t1);

// Throws unless every window of `plan` lies in its panel and keeps rows of [t0, t1) inside itself.
void check_plan(const WindowPlan& plan);

}  // namespace mlalpha
