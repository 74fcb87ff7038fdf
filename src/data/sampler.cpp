// CPU twin of the device gather (sampler.cu): both copy the floats window_offsets() names.
#include "data/sampler.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mlalpha {

void check_gather(const GatherParams& p) {
  require(p.B >= 1 && p.L >= 1 && p.N >= 1 && p.F >= 1 && p.K >= 1,
          "gather_batch: need B, L, N, F, K >= 1, got B = " + std::to_string(p.B) + ", L = " + std::to_string(p.L) +
              ", N = " + std::to_string(p.N) + ", F = " + std::to_string(p.F) + ", K = " + std::to_string(p.K));
  require(p.L <= p.T, "window length L = " + std::to_string(p.L) + " exceeds the series length T = " +
                          std::to_string(p.T));
  require(p.t_begin >= 0 && p.row_stride >= 0 && (p.row_stride == 0 ? p.t_begin == 0 : p.t_begin + p.T <= p.row_stride),
          "gather_batch: the sampled range [" + std::to_string(p.t_begin) + ", " + std::to_string(p.t_begin + p.T) +
              ") is not inside rows of " + std::to_string(p.row_stride > 0 ? p.row_stride : p.T) + " steps");
  if (p.dates > 0)
    require(p.G >= 1 && p.G <= p.N && int64_t(p.dates) * p.G == p.B,
            "gather_batch: a time batch needs 1 <= G <= N and B = dates × G, got G = " + std::to_string(p.G) +
                ", N = " + std::to_string(p.N) + ", dates = " + std::to_string(p.dates) + ", B = " + std::to_string(p.B));
}

void gather_batch(const GatherParams& p, const float* x, const float* y, int64_t step, float* xb, float* yb) {
  check_gather(p);
  const size_t nx = size_t(p.L) * p.F, ny = size_t(p.L) * p.K;
  for (int b = 0; b < p.B; ++b) {
    const WindowOffsets w = window_offsets(p, step, b);
    std::copy_n(x + w.x_offset, nx, xb + size_t(b) * nx);
    std::copy_n(y + w.y_offset, ny, yb + size_t(b) * ny);
  }
}

void gather_batch(const Panel& panel, uint64_t seed, int64_t step, int B, int L, float* xb, float* yb) {
  const GatherParams p{panel.N, panel.T, panel.F, panel.K, B, L, seed};
  check_gather(p);
  require(panel.x.size() == size_t(p.N) * p.T * p.F && panel.y.size() == size_t(p.N) * p.T * p.K,
          "gather_batch: the panel's arrays do not hold N × T × F and N × T × K values");
  gather_batch(p, panel.x.data(), panel.y.data(), step, xb, yb);
}

}  // namespace mlalpha
