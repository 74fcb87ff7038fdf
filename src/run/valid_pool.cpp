// The pooled validation blocks of a walk-forward member (valid_pool.h).
#include "run/valid_pool.h"

namespace mlalpha {

void ValidPool::add(const Panel& targets, const Split& s, const std::vector<float>& pred) {
  N_ = targets.N, K_ = targets.K;
  const int len = s.valid_end - s.valid_begin;
  std::vector<float> p(size_t(N_) * len * K_), y(p.size());
  for (int i = 0; i < N_; ++i)
    for (int t = 0; t < len; ++t)
      for (int k = 0; k < K_; ++k) {
        const size_t from = (size_t(i) * targets.T + s.valid_begin + t) * K_ + k, to = (size_t(i) * len + t) * K_ + k;
        p[to] = pred[from];
        y[to] = targets.y[from];
      }
  blocks_.push_back({len, std::move(p), std::move(y)});
}

MetricsResult ValidPool::score(int quantiles, double periods_per_year) const {
  int T = 0;
  for (const Block& b : blocks_) T += b.len;
  std::vector<float> p(size_t(N_) * T * K_), y(p.size());
  int at = 0;
  for (const Block& b : blocks_) {
    for (int i = 0; i < N_; ++i)
      for (size_t j = 0; j < size_t(b.len) * K_; ++j) {
        const size_t to = (size_t(i) * T + at) * K_ + j, from = size_t(i) * b.len * K_ + j;
        p[to] = b.pred[from];
        y[to] = b.y[from];
      }
    at += b.len;
  }
  MetricsInput in;
  in.pred = p;
  in.y = y;
  in.N = N_, in.T = T, in.K = K_;
  in.quantiles = quantiles;
  in.periods_per_year = periods_per_year;
  return compute_metrics(in);
}

}  // namespace mlalpha
