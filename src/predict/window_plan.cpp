// Prediction plans (window_plan.h).
#include "predict/window_plan.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mlalpha {

WindowPlan tiled_windows(int N, int T, int L, int burn_in, int t0, int t1) {
  require(N >= 1 && L >= 1 && L <= T, "predict: window length L = " + std::to_string(L) + " must be in [1, T = " +
                                          std::to_string(T) + "]");
  require(burn_in >= 0 && burn_in < L, "predict: burn_in must be in [0, L)");
  require(t0 >= 0 && t0 <= t1 && t1 <= T, "predict: time range [" + std::to_string(t0) + ", " + std::to_string(t1) +
                                               ") is not inside [0, " + std::to_string(T) + ")");
  WindowPlan plan;
  plan.N = N, plan.T = T, plan.L = L, plan.t0 = t0, plan.t1 = t1;
  for (int i = 0; i < N; ++i)
    for (int t = t0; t < t1;) {
      // The window whose kept part starts at t: it starts burn_in steps earlier (clamped to the panel) and
      // keeps up to L − burn_in steps.
      int start = t - burn_in;
      if (start < 0) start = 0;
      if (start + L > T) start = T - L;
      const int keep_from = start == 0 ? t : std::max(t, start + burn_in);
      const int keep_to = std::min(t1, start + L);
      plan.windows.push_back({i, start, keep_from, keep_to});
      t = keep_to;
    }
  return plan;
}

WindowPlan date_windows(int N, int T, int C, int t0, int t1) {
  require(N >= 1 && T >= 1 && C >= 1, "predict: the panel (N = " + std::to_string(N) + ", T = " + std::to_string(T) +
                                          ") and the context C = " + std::to_string(C) + " must be >= 1");
  require(t0 >= 0 && t0 <= t1 && t1 <= T, "predict: time range [" + std::to_string(t0) + ", " + std::to_string(t1) +
                                              ") is not inside [0, " + std::to_string(T) + ")");
  WindowPlan plan;
  plan.N = N, plan.T = T, plan.L = std::min(C, T), plan.t0 = t0, plan.t1 = t1;
  const int L = plan.L, head_end = std::min(t1, L);
  plan.windows.reserve(size_t(N) * size_t(t1 - std::max(t0, head_end) + (t0 < head_end)));
  for (int i = 0; i < N; ++i) {
    if (t0 < head_end) plan.windows.push_back({i, 0, t0, head_end});  // the dates t < L: rows 0 .. t
    for (int t = std::max(t0, head_end); t < t1; ++t) plan.windows.push_back({i, t - L + 1, t, t + 1});
  }
  return plan;
}

std::vector<int> window_contexts(int N, int T, int C) {
  std::vector<int> out(size_t(N) * T);
  for (int i = 0; i < N; ++i)
    for (int t = 0; t < T; ++t) out[size_t(i) * T + t] = window_context(C, t);
  return out;
}

void check_plan(const WindowPlan& p) {
  require(p.N >= 1 && p.L >= 1 && p.L <= p.T && 0 <= p.t0 && p.t0 <= p.t1 && p.t1 <= p.T,
          "prediction plan: N = " + std::to_string(p.N) + ", L = " + std::to_string(p.L) + ", T = " + std::to_string(p.T) +
              ", range [" + std::to_string(p.t0) + ", " + std::to_string(p.t1) + ") do not fit together");
  for (const PlanWindow& w : p.windows)
    require(w.instrument >= 0 && w.instrument < p.N && w.start >= 0 && w.start + p.L <= p.T && w.keep_from >= w.start &&
                w.keep_from < w.keep_to && w.keep_to <= w.start + p.L && w.keep_from >= p.t0 && w.keep_to <= p.t1,
            "prediction plan: window (instrument " + std::to_string(w.instrument) + ", start " + std::to_string(w.start) +
                ", keep [" + std::to_string(w.keep_from) + ", " + std::to_string(w.keep_to) + ")) does not fit its L = " +
                std::to_string(p.L) + " rows, the panel's " + std::to_string(p.N) + " × " + std::to_string(p.T) +
                " or the range [" + std::to_string(p.t0) + ", " + std::to_string(p.t1) + ")");
}

}  // namespace mlalpha
