// Evaluation metrics (see metrics.h and docs/metrics.md for the definitions).
#include "train/metrics.h"

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
  double sq_err = 0;
  int64_t points = 0;
  int64_t dir_hits = 0, dir_points = 0;
  bool saw_inf = false;  // an infinite pred or y poisons the correlations (they must not look fine)
  std::vector<double> ic_t, rank_ic_t;  // per time step (panel) or one value (single series)

  void add_point(double p, double t) {
    sq_err += (p - t) * (p - t);
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

Metrics finish(const Accum& acc, bool panel) {
  Metrics m;
  m.points = acc.points;
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
  out.mse = avg(&Metrics::mse);
  out.ic = avg(&Metrics::ic);
  out.rank_ic = avg(&Metrics::rank_ic);
  out.icir = avg(&Metrics::icir);
  out.dir_acc = avg(&Metrics::dir_acc);
  for (const auto& m : per) out.points += m.points, out.steps += m.steps;
  return out;
}

std::string valid_names_text() {
  std::string s;
  for (const auto& n : metric_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
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

  const bool panel = in.N >= 2;
  const auto at = [&](std::span<const float> a, int i, int t, int k) {
    return double(a[(size_t(i) * in.T + t) * in.K + k]);
  };
  MetricsResult res;
  res.per_target.reserve(in.K);
  std::vector<double> p, t;  // the valid pairs of one time step (panel) or of the whole series
  p.reserve(panel ? in.N : t1 - in.t0);
  t.reserve(p.capacity());
  for (int k = 0; k < in.K; ++k) {
    Accum acc;
    if (panel) {
      for (int ts = in.t0; ts < t1; ++ts) {
        p.clear();
        t.clear();
        for (int i = 0; i < in.N; ++i) {
          const double pv = at(in.pred, i, ts, k), yv = at(in.y, i, ts, k);
          if (std::isnan(pv) || std::isnan(yv)) continue;
          acc.add_point(pv, yv);
          p.push_back(pv);
          t.push_back(yv);
        }
        add_correlations(acc, p, t, in.min_pairs);
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
      }
      add_correlations(acc, p, t, in.min_pairs);
    }
    res.per_target.push_back(finish(acc, panel));
  }
  res.mean = mean_over_targets(res.per_target);
  return res;
}

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names{"mse", "ic", "rank_ic", "icir", "dir_acc"};
  return names;
}

double metric_by_name(const Metrics& m, std::string_view name) {
  if (name == "mse") return m.mse;
  if (name == "ic") return m.ic;
  if (name == "rank_ic") return m.rank_ic;
  if (name == "icir") return m.icir;
  if (name == "dir_acc") return m.dir_acc;
  throw Error("unknown metric '" + std::string(name) + "'; expected one of: " + valid_names_text());
}

bool higher_is_better(std::string_view name) {
  metric_by_name(Metrics{}, name);  // validates the name
  return name != "mse";
}

bool is_improvement(std::string_view name, double candidate, double best) {
  const bool higher = higher_is_better(name);
  if (std::isnan(candidate)) return false;
  if (std::isnan(best)) return true;
  return higher ? candidate > best : candidate < best;
}

}  // namespace mlalpha
