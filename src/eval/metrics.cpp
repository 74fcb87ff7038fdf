// Evaluation metrics (include/mlalpha/metrics.h; docs/metrics.md has the definitions).
#include "mlalpha/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace mlalpha {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double sign_of(double v) { return v > 0 ? 1.0 : -1.0; }  // callers exclude zeros first

// Running sums of one target over the range, filled point by point.
struct Accum {
  double sq_err = 0, sq_zero = 0, sq_mean = 0;
  double base = kNaN;  // the training-mean predictor of this target (NaN: none)
  int64_t points = 0;
  int64_t dir_hits = 0, dir_points = 0;
  bool saw_inf = false;  // an infinite pred or y poisons the correlations (they must not look fine)
  std::vector<double> ic_t, rank_ic_t;  // per time step (panel) or one value (single series)
  std::vector<double> turnover_t;       // per pair of consecutive portfolio steps
  std::vector<double> strategy_t;       // the sign strategy's return per time step with a position

  void add_point(double p, double t) {
    sq_err += (p - t) * (p - t);
    sq_zero += t * t;
    sq_mean += (base - t) * (base - t);
    ++points;
    if (std::isinf(p) || std::isinf(t)) saw_inf = true;
    if (p != 0 && t != 0) {
      ++dir_points;
      dir_hits += sign_of(p) == sign_of(t);
    }
  }
};

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return kNaN;
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

// mean / sample standard deviation (n − 1); NaN when n < 2 or the deviation is 0.
double mean_over_std(const std::vector<double>& v) {
  if (v.size() < 2) return kNaN;
  const double m = mean_of(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  const double sd = std::sqrt(ss / double(v.size() - 1));
  return sd > 0 ? m / sd : kNaN;
}

// Pearson and Spearman of one set of valid pairs, appended to the accumulator when defined (at least
// min_pairs pairs and neither side constant).
void add_correlations(Accum& acc, const std::vector<double>& p, const std::vector<double>& t, int min_pairs) {
  if (int64_t(p.size()) < min_pairs) return;
  const double r = metrics_detail::pearson(p, t);
  // NaN: a constant side, the step carries no ranking information. (NaN from an infinite value is
  // caught by saw_inf, which turns the whole target's correlations into NaN.)
  if (std::isnan(r)) return;
  acc.ic_t.push_back(r);
  const auto rp = metrics_detail::average_ranks(p), rt = metrics_detail::average_ranks(t);
  acc.rank_ic_t.push_back(metrics_detail::pearson(rp, rt));
}

// Quantile portfolios of one time step (docs/metrics.md): the valid pairs (p, t) in instrument order with
// their instrument indices; the group of 0-based rank r among n is floor(r·Q/n), ties in the prediction
// ordered by instrument index. Writes the Q group means into `row` and marks the top group in `top`.
void quantile_step(const std::vector<double>& p, const std::vector<double>& t, const std::vector<int>& inst, int Q,
                   double* row, std::vector<char>& top) {
  const size_t n = p.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> sum(size_t(Q), 0.0);
  std::vector<int64_t> cnt(size_t(Q), 0);
  std::fill(top.begin(), top.end(), 0);
  for (size_t r = 0; r < n; ++r) {
    const size_t g = size_t(int64_t(r) * Q / int64_t(n));
    sum[g] += t[order[r]];
    ++cnt[g];
    if (g == size_t(Q - 1)) top[size_t(inst[order[r]])] = 1;
  }
  for (int g = 0; g < Q; ++g) row[g] = sum[size_t(g)] / double(cnt[size_t(g)]);  // n >= Q: no group is empty
}

// Summary of a portfolio series into m (ls_mean, ls_std, ls_sharpe, quantile_means, portfolio_steps).
void finish_portfolio(const PortfolioSeries& ps, double periods_per_year, Metrics& m) {
  std::vector<double> ls;
  m.quantile_means.assign(size_t(ps.quantiles), 0.0);
  for (size_t r = 0; r < ps.long_short.size(); ++r) {
    if (!ps.formed[r]) continue;
    ls.push_back(ps.long_short[r]);
    for (int g = 0; g < ps.quantiles; ++g) m.quantile_means[size_t(g)] += ps.quantile_returns[r * ps.quantiles + g];
  }
  m.portfolio_steps = int64_t(ls.size());
  for (double& q : m.quantile_means) q = ls.empty() ? kNaN : q / double(ls.size());
  m.ls_mean = mean_of(ls);
  m.ls_std = kNaN;
  if (ls.size() >= 2) {
    double ss = 0;
    for (double x : ls) ss += (x - m.ls_mean) * (x - m.ls_mean);
    m.ls_std = std::sqrt(ss / double(ls.size() - 1));
  }
  m.ls_sharpe = periods_per_year > 0 && m.ls_std > 0 ? m.ls_mean / m.ls_std * std::sqrt(periods_per_year) : kNaN;
}

// The sign strategy's return of one time step's valid pairs: mean of sign(p)·y (a zero prediction holds
// nothing); none when the step has no pair.
void add_strategy_step(Accum& acc, const std::vector<double>& p, const std::vector<double>& t) {
  if (p.empty()) return;
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += p[i] > 0 ? t[i] : p[i] < 0 ? -t[i] : 0.0;
  acc.strategy_t.push_back(s / double(p.size()));
}

// ts_mean, ts_std, ts_sharpe, ts_hit, ts_max_dd of the sign strategy's returns.
void finish_strategy(const std::vector<double>& r, double periods_per_year, Metrics& m) {
  m.ts_mean = mean_of(r);
  m.ts_std = kNaN;
  if (r.size() >= 2) {
    double ss = 0;
    for (double x : r) ss += (x - m.ts_mean) * (x - m.ts_mean);
    m.ts_std = std::sqrt(ss / double(r.size() - 1));
  }
  m.ts_sharpe = periods_per_year > 0 && m.ts_std > 0 ? m.ts_mean / m.ts_std * std::sqrt(periods_per_year) : kNaN;
  int64_t hits = 0, moves = 0;
  double cum = 0, peak = 0, dd = 0;  // the curve starts at 0 before the first step
  for (double x : r) {
    hits += x > 0, moves += x != 0;
    cum += x;
    peak = std::max(peak, cum);
    dd = std::max(dd, peak - cum);
  }
  m.ts_hit = moves ? double(hits) / double(moves) : kNaN;
  m.ts_max_dd = r.empty() ? kNaN : dd;
}

Metrics finish(const Accum& acc, bool panel) {
  Metrics m;
  m.points = acc.points;
  m.mse_zero = acc.points ? acc.sq_zero / double(acc.points) : kNaN;
  m.mse_mean = acc.points && !std::isnan(acc.base) ? acc.sq_mean / double(acc.points) : kNaN;
  m.turnover = mean_of(acc.turnover_t);
  m.steps = panel ? int64_t(acc.ic_t.size()) : (acc.ic_t.empty() ? 0 : acc.points);
  m.mse = acc.points ? acc.sq_err / double(acc.points) : kNaN;
  m.dir_acc = acc.dir_points ? double(acc.dir_hits) / double(acc.dir_points) : kNaN;
  if (acc.saw_inf) {
    m.ic = m.rank_ic = m.icir = kNaN;
  } else {
    m.ic = mean_of(acc.ic_t);
    m.rank_ic = mean_of(acc.rank_ic_t);
    m.icir = panel ? mean_over_std(acc.ic_t) : kNaN;  // one series has one IC, no spread over time
  }
  return m;
}

// Mean over the targets of each value where it is not NaN (NaN when it is NaN for all of them).
Metrics mean_over_targets(const std::vector<Metrics>& per) {
  Metrics out;
  auto avg = [&](double Metrics::*f) {
    double s = 0;
    int n = 0;
    for (const auto& m : per)
      if (!std::isnan(m.*f)) s += m.*f, ++n;
    return n ? s / n : kNaN;
  };
  for (const MetricInfo& info : metric_table()) out.*info.field = avg(info.field);
  size_t Q = 0;
  for (const auto& m : per) Q = std::max(Q, m.quantile_means.size());
  out.quantile_means.assign(Q, kNaN);
  for (size_t g = 0; g < Q; ++g) {
    double s = 0;
    int n = 0;
    for (const auto& m : per)
      if (g < m.quantile_means.size() && !std::isnan(m.quantile_means[g])) s += m.quantile_means[g], ++n;
    if (n) out.quantile_means[g] = s / n;
  }
  for (const auto& m : per) out.points += m.points, out.steps += m.steps, out.portfolio_steps += m.portfolio_steps;
  return out;
}

}  // namespace

namespace metrics_detail {

double pearson(std::span<const double> a, std::span<const double> b) {
  const size_t n = a.size();
  if (n != b.size() || n < 2) return kNaN;
  // Constant input is detected exactly (min == max): a rounded mean would leave tiny non-zero
  // deviations and a meaningless correlation.
  const auto [amin, amax] = std::minmax_element(a.begin(), a.end());
  const auto [bmin, bmax] = std::minmax_element(b.begin(), b.end());
  if (*amin == *amax || *bmin == *bmax) return kNaN;
  double ma = 0, mb = 0;
  for (size_t i = 0; i < n; ++i) ma += a[i], mb += b[i];
  ma /= double(n);
  mb /= double(n);
  double sab = 0, saa = 0, sbb = 0;  // two-pass: no cancellation from Σx² − n·mean²
  for (size_t i = 0; i < n; ++i) {
    const double da = a[i] - ma, db = b[i] - mb;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
  }
  const double r = sab / std::sqrt(saa * sbb);
  return std::clamp(r, -1.0, 1.0);  // rounding can step a hair outside; NaN passes through clamp
}

std::vector<double> average_ranks(std::span<const double> v) {
  const size_t n = v.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return v[i] < v[j]; });
  std::vector<double> rank(n);
  for (size_t lo = 0; lo < n;) {
    size_t hi = lo + 1;
    while (hi < n && v[order[hi]] == v[order[lo]]) ++hi;
    const double r = 0.5 * double(lo + 1 + hi);  // mean of the 1-based ranks lo+1 .. hi
    for (size_t j = lo; j < hi; ++j) rank[order[j]] = r;
    lo = hi;
  }
  return rank;
}

}  // namespace metrics_detail

MetricsResult compute_metrics(const MetricsInput& in) {
  require(in.N >= 1 && in.T >= 1 && in.K >= 1, "metrics: N, T, K must be >= 1, got N=" + std::to_string(in.N) +
                                                    " T=" + std::to_string(in.T) + " K=" + std::to_string(in.K));
  const size_t want = size_t(in.N) * size_t(in.T) * size_t(in.K);
  require(in.pred.size() == want, "metrics: pred has " + std::to_string(in.pred.size()) + " values, expected N*T*K = " +
                                      std::to_string(want));
  require(in.y.size() == want,
          "metrics: y has " + std::to_string(in.y.size()) + " values, expected N*T*K = " + std::to_string(want));
  const int t1 = in.t1 < 0 ? in.T : in.t1;
  require(in.t0 >= 0 && in.t0 < t1 && t1 <= in.T, "metrics: time range [" + std::to_string(in.t0) + ", " +
                                                      std::to_string(t1) + ") is empty or outside [0, " +
                                                      std::to_string(in.T) + ")");
  require(in.min_pairs >= 2, "metrics: min_pairs = " + std::to_string(in.min_pairs) + ", expected >= 2");
  require(in.quantiles >= 2, "metrics: quantiles = " + std::to_string(in.quantiles) + ", expected >= 2");
  require(in.train_mean.empty() || in.train_mean.size() == size_t(in.K),
          "metrics: train_mean has " + std::to_string(in.train_mean.size()) + " values, expected K = " +
              std::to_string(in.K) + " (or none)");

  const bool panel = in.N >= 2;
  const auto at = [&](std::span<const float> a, int i, int t, int k) {
    return double(a[(size_t(i) * in.T + t) * in.K + k]);
  };
  MetricsResult res;
  res.per_target.reserve(in.K);
  std::vector<double> p, t;  // the valid pairs of one time step (panel) or of the whole series
  std::vector<int> inst;     // their instruments (panel)
  p.reserve(panel ? in.N : t1 - in.t0);
  t.reserve(p.capacity());
  const int Q = in.quantiles;
  const size_t rows = size_t(t1 - in.t0);
  for (int k = 0; k < in.K; ++k) {
    Accum acc;
    if (!in.train_mean.empty()) acc.base = in.train_mean[size_t(k)];
    PortfolioSeries ps;
    ps.t0 = in.t0;
    ps.quantiles = Q;
    ps.quantile_returns.assign(rows * size_t(Q), kNaN);
    ps.long_short.assign(rows, kNaN);
    ps.formed.assign(rows, 0);
    ps.strategy.assign(rows, kNaN);
    if (panel) {
      std::vector<char> top(size_t(in.N), 0), prev_top(size_t(in.N), 0);
      int prev_ts = -2;  // the last time step that formed portfolios
      for (int ts = in.t0; ts < t1; ++ts) {
        p.clear();
        t.clear();
        inst.clear();
        for (int i = 0; i < in.N; ++i) {
          const double pv = at(in.pred, i, ts, k), yv = at(in.y, i, ts, k);
          if (std::isnan(pv) || std::isnan(yv)) continue;
          acc.add_point(pv, yv);
          p.push_back(pv);
          t.push_back(yv);
          inst.push_back(i);
        }
        add_correlations(acc, p, t, in.min_pairs);
        add_strategy_step(acc, p, t);
        if (!p.empty()) ps.strategy[size_t(ts - in.t0)] = acc.strategy_t.back();
        if (int(p.size()) < Q) continue;
        double* row = ps.quantile_returns.data() + size_t(ts - in.t0) * Q;
        quantile_step(p, t, inst, Q, row, top);
        ps.long_short[size_t(ts - in.t0)] = row[Q - 1] - row[0];
        ps.formed[size_t(ts - in.t0)] = 1;
        if (prev_ts == ts - 1) {  // turnover only across adjacent time steps that both formed portfolios
          int64_t size = 0, fresh = 0;
          for (int i = 0; i < in.N; ++i)
            if (top[size_t(i)]) ++size, fresh += !prev_top[size_t(i)];
          acc.turnover_t.push_back(double(fresh) / double(size));
        }
        prev_top.swap(top);
        prev_ts = ts;
      }
    } else {
      p.clear();
      t.clear();
      for (int ts = in.t0; ts < t1; ++ts) {
        const double pv = at(in.pred, 0, ts, k), yv = at(in.y, 0, ts, k);
        if (std::isnan(pv) || std::isnan(yv)) continue;
        acc.add_point(pv, yv);
        p.push_back(pv);
        t.push_back(yv);
        acc.strategy_t.push_back(pv > 0 ? yv : pv < 0 ? -yv : 0.0);
        ps.strategy[size_t(ts - in.t0)] = acc.strategy_t.back();
      }
      add_correlations(acc, p, t, in.min_pairs);
    }
    Metrics m = finish(acc, panel);
    finish_portfolio(ps, in.periods_per_year, m);
    finish_strategy(acc.strategy_t, in.periods_per_year, m);
    res.per_target.push_back(std::move(m));
    res.portfolios.push_back(std::move(ps));
  }
  res.mean = mean_over_targets(res.per_target);
  return res;
}

std::vector<double> target_means(std::span<const float> y, int N, int T, int K, int t0, int t1) {
  require(N >= 1 && T >= 1 && K >= 1 && y.size() == size_t(N) * T * K,
          "target_means: y has " + std::to_string(y.size()) + " values, expected N*T*K");
  require(0 <= t0 && t0 < t1 && t1 <= T, "target_means: time range [" + std::to_string(t0) + ", " + std::to_string(t1) +
                                             ") is empty or outside [0, " + std::to_string(T) + ")");
  std::vector<double> out(size_t(K), kNaN);
  for (int k = 0; k < K; ++k) {
    double s = 0;
    int64_t n = 0;
    for (int i = 0; i < N; ++i)
      for (int t = t0; t < t1; ++t) {
        const double v = y[(size_t(i) * T + t) * K + k];
        if (std::isfinite(v)) s += v, ++n;
      }
    if (n) out[size_t(k)] = s / double(n);
  }
  return out;
}

}  // namespace mlalpha
