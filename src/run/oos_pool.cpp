// The pooled out-of-sample predictions of a walk-forward run (oos_pool.h).
#include "run/oos_pool.h"

#include <algorithm>
#include <cmath>

#include "mlalpha/eval.h"
#include "predict/window_plan.h"

namespace mlalpha {

namespace fs = std::filesystem;

OosPool::OosPool(const Panel& p, const RunConfig& cfg)
    : p_(p), cfg_(cfg), pred_(size_t(p.N) * p.T * p.K, NAN), fold_(size_t(p.T), -1), base_(size_t(p.T) * p.K, NAN) {}

void OosPool::add(const FoldPlan& plan, const std::vector<float>& pred) {
  const Split& s = plan.split;
  const std::vector<double> mean = target_means(p_.y, p_.N, p_.T, p_.K, s.train_begin, s.train_end);
  for (int t = s.test_begin; t < s.test_end; ++t) {
    fold_[size_t(t)] = plan.fold;
    for (int k = 0; k < p_.K; ++k) base_[size_t(t) * p_.K + k] = mean[size_t(k)];
    for (int i = 0; i < p_.N; ++i)
      for (int k = 0; k < p_.K; ++k) {
        const size_t at = (size_t(i) * p_.T + t) * p_.K + k;
        pred_[at] = pred[at];
      }
  }
  t0_ = std::min(t0_, s.test_begin);
  t1_ = std::max(t1_, s.test_end);
}

OosSummary OosPool::write(const fs::path& prefix) const {
  const PredictionFiles f =
      write_predictions(prefix.string(), p_, pred_, {t0_, t1_}, fold_, window_contexts(p_.N, p_.T, cfg_.train.L));
  OosSummary o;
  o.file = f.csv;
  ScoreOptions so;
  so.quantiles = cfg_.run.quantiles;
  so.periods_per_year = cfg_.run.periods_per_year;
  o.metrics = score(pred_, p_, {t0_, t1_}, so);
  for (int k = 0; k < p_.K; ++k) {  // the training-mean baseline, fold by fold
    double ss = 0;
    int64_t n = 0;
    for (int i = 0; i < p_.N; ++i)
      for (int t = t0_; t < t1_; ++t) {
        const size_t at = (size_t(i) * p_.T + t) * p_.K + k;
        const double y = p_.y[at], b = base_[size_t(t) * p_.K + k];
        if (std::isnan(pred_[at]) || std::isnan(y) || std::isnan(b)) continue;
        ss += (b - y) * (b - y), ++n;
      }
    o.metrics.per_target[size_t(k)].mse_mean = n ? ss / double(n) : NAN;
  }
  double s = 0;
  int n = 0;
  for (const Metrics& m : o.metrics.per_target)
    if (!std::isnan(m.mse_mean)) s += m.mse_mean, ++n;
  o.metrics.mean.mse_mean = n ? s / n : NAN;
  return o;
}


}  // namespace mlalpha
