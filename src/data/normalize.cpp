#include "data/normalize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace mlalpha {
namespace {

// "instrument 3 ('AAPL'), time 17 ('2024-01-05'), feature 2 ('ret_5')": indices always, labels when known.
std::string where(const Panel& p, int i, int t, int f) {
  auto one = [](const char* what, int idx, const std::vector<std::string>& labels) {
    std::string s = std::string(what) + " " + std::to_string(idx);
    if (size_t(idx) < labels.size()) s += " ('" + labels[idx] + "')";
    return s;
  };
  return one("instrument", i, p.instruments) + ", " + one("time", t, p.times) + ", " + one("feature", f, p.feature_names);
}

std::string feature_name(const Panel& p, int f) {
  return "feature " + std::to_string(f) + (size_t(f) < p.feature_names.size() ? " ('" + p.feature_names[f] + "')" : "");
}

// body(begin, end) over [0, n) cut into contiguous blocks, one thread each (the caller runs the first).
// Each block's exception is kept; the one of the earliest block is rethrown after every thread joined, so
// the error reported is the one a single thread would have met first.
template <class Body>
void parallel_blocks(int n, int threads, const Body& body) {
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  const int k = std::max(1, std::min(n, threads > 0 ? threads : hw));
  if (k == 1) {
    body(0, n);
    return;
  }
  std::vector<std::exception_ptr> errors(k);
  auto run = [&](int b) {
    try {
      body(int(int64_t(n) * b / k), int(int64_t(n) * (b + 1) / k));
    } catch (...) {
      errors[b] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int b = 1; b < k; ++b) pool.emplace_back(run, b);
  run(0);
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

const float* row(const Panel& p, int i, int t) { return p.x.data() + (size_t(i) * p.T + t) * p.F; }
float* row(Panel& p, int i, int t) { return p.x.data() + (size_t(i) * p.T + t) * p.F; }

// ±Inf anywhere in times [t0, t1) is an error naming the first one in (instrument, time, feature) order.
void require_no_inf(const Panel& p, int t0, int t1, int threads) {
  parallel_blocks(p.N, threads, [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i)
      for (int t = t0; t < t1; ++t) {
        const float* x = row(p, i, t);
        for (int f = 0; f < p.F; ++f)
          if (std::isinf(x[f]))
            throw Error(std::string("feature value ") + (x[f] > 0 ? "+inf" : "-inf") + " at " + where(p, i, t, f) +
                        ": features must be finite or NaN");
      }
  });
}

void require_shape(const Panel& p, const char* fn) {
  require(p.F >= 1 && p.x.size() == size_t(p.N) * p.T * p.F,
          std::string(fn) + ": the panel's features hold " + std::to_string(p.x.size()) + " values, expected N*T*F");
}

// Count, mean, sum of squared deviations and range of one feature's values (Welford; Chan et al. to merge).
struct Moments {
  double n = 0, mean = 0, m2 = 0, lo = INFINITY, hi = -INFINITY;
  void add(double v) {
    n += 1;
    const double d = v - mean;
    mean += d / n;
    m2 += d * (v - mean);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  void merge(const Moments& b) {
    if (b.n == 0) return;
    const double n_ab = n + b.n, d = b.mean - mean;
    mean += d * (b.n / n_ab);
    m2 += b.m2 + d * d * (n * b.n / n_ab);
    n = n_ab;
    lo = std::min(lo, b.lo);
    hi = std::max(hi, b.hi);
  }
};

// x ← x[last observed] along time, per instrument and feature.
void forward_fill(Panel& p, int threads) {
  parallel_blocks(p.N, threads, [&](int i0, int i1) {
    std::vector<float> last(p.F);
    for (int i = i0; i < i1; ++i) {
      std::fill(last.begin(), last.end(), NAN);
      for (int t = 0; t < p.T; ++t) {
        float* x = row(p, i, t);
        for (int f = 0; f < p.F; ++f) {
          if (std::isnan(x[f])) x[f] = last[f];
          else last[f] = x[f];
        }
      }
    }
  });
}

CrossNorm cross_kind(const std::string& s) {
  return s == "zscore" ? CrossNorm::zscore : s == "rank" ? CrossNorm::rank : CrossNorm::robust;
}

// Step 2 (per-date modes, or global with per-date fills) and step 3 for dates [d0, d1): one date's block of
// N × F values is gathered feature-major, processed, and written back.
void features_by_date(Panel& p, const DataConfig& d, const FeatureStats& s, int d0, int d1) {
  const bool global = d.feature_norm == "global", fill_mean = d.nan_fill == "mean";
  const CrossNorm kind = global ? CrossNorm::zscore : cross_kind(d.feature_norm);
  std::vector<float> col(size_t(p.F) * p.N);  // (F, N)
  CrossScratch scratch;
  for (int t = d0; t < d1; ++t) {
    for (int i = 0; i < p.N; ++i) {
      const float* x = row(p, i, t);
      for (int f = 0; f < p.F; ++f) col[size_t(f) * p.N + i] = x[f];
    }
    for (int f = 0; f < p.F; ++f) {
      float* v = col.data() + size_t(f) * p.N;
      if (global) {
        for (int i = 0; i < p.N; ++i) v[i] = (v[i] - s.mean[f]) / s.stdev[f];  // NaN stays NaN
      } else {
        cross_normalize(v, p.N, kind, d.robust_clip, scratch);
      }
      float fill = 0.0f;
      if (fill_mean) {
        double sum = 0;
        int n = 0;
        for (int i = 0; i < p.N; ++i)
          if (!std::isnan(v[i])) sum += v[i], ++n;
        fill = n > 0 ? float(sum / n) : 0.0f;
      }
      for (int i = 0; i < p.N; ++i)
        if (std::isnan(v[i])) v[i] = fill;
    }
    for (int i = 0; i < p.N; ++i) {
      float* x = row(p, i, t);
      for (int f = 0; f < p.F; ++f) x[f] = col[size_t(f) * p.N + i];
    }
  }
}

void targets_by_date(Panel& p, CrossNorm kind, int d0, int d1) {
  std::vector<float> col(p.N);
  CrossScratch scratch;
  for (int t = d0; t < d1; ++t)
    for (int k = 0; k < p.K; ++k) {
      for (int i = 0; i < p.N; ++i) col[i] = p.y[(size_t(i) * p.T + t) * p.K + k];
      cross_normalize(col.data(), p.N, kind, 0.0f, scratch);
      for (int i = 0; i < p.N; ++i) p.y[(size_t(i) * p.T + t) * p.K + k] = col[i];
    }
}

// The median of s[0..m) (reordered): the middle value, or the mean of the two middle ones for even m.
double median_of(double* s, int m) {
  std::nth_element(s, s + m / 2, s + m);
  const double hi = s[m / 2];
  return m % 2 ? hi : 0.5 * (*std::max_element(s, s + m / 2) + hi);
}

}  // namespace

void check_preprocessing(const DataConfig& d) {
  auto one_of = [](const std::string& key, const std::string& v, std::initializer_list<const char*> ok) {
    std::string list;
    for (const char* c : ok) {
      if (v == c) return;
      list += std::string(list.empty() ? "" : ", ") + "'" + c + "'";
    }
    throw Error(key + " must be one of " + list + ", got '" + v + "'");
  };
  one_of("data.feature_norm", d.feature_norm, {"global", "zscore", "rank", "robust"});
  one_of("data.target_norm", d.target_norm, {"none", "zscore", "rank"});
  one_of("data.nan_fill", d.nan_fill, {"zero", "ffill", "mean"});
  one_of("data.target_scale", d.target_scale, {"none", "std"});
  require(d.target_scale == "none" || d.target_norm == "none",
          "data.target_scale = '" + d.target_scale + "' and data.target_norm = '" + d.target_norm +
              "' both rescale the targets (target_norm per date already gives them unit spread): set one of them");
  require(d.robust_clip > 0, "data.robust_clip must be > 0 (the robust z-score is clipped to ±robust_clip), got " +
                                 std::to_string(d.robust_clip));
}

void cross_normalize(float* v, int n, CrossNorm kind, float clip, CrossScratch& sc) {
  std::vector<int>& idx = sc.valid;
  idx.clear();
  for (int i = 0; i < n; ++i)
    if (!std::isnan(v[i])) idx.push_back(i);
  const int m = int(idx.size());
  double lo = INFINITY, hi = -INFINITY;
  for (int i : idx) lo = std::min(lo, double(v[i])), hi = std::max(hi, double(v[i]));
  if (m < 2 || lo == hi) {  // no spread to measure: every value is at the centre
    for (int i : idx) v[i] = 0.0f;
    return;
  }
  if (kind == CrossNorm::zscore) {
    double sum = 0, sq = 0;
    for (int i : idx) sum += v[i];
    const double mean = sum / m;
    for (int i : idx) sq += (v[i] - mean) * (v[i] - mean);
    const double sd = std::sqrt(sq / m);
    for (int i : idx) v[i] = float((v[i] - mean) / sd);
  } else if (kind == CrossNorm::rank) {
    // Sort keys: the value's bits mapped to an unsigned order (−0 taken as +0, so the two tie), then the
    // instrument; equal high halves are a tie group.
    std::vector<uint64_t>& key = sc.keys;
    key.resize(m);
    for (int q = 0; q < m; ++q) {
      const float x = v[idx[q]] == 0.0f ? 0.0f : v[idx[q]];
      uint32_t u;
      std::memcpy(&u, &x, 4);
      u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
      key[q] = (uint64_t(u) << 32) | uint32_t(idx[q]);
    }
    std::sort(key.begin(), key.end());
    for (int j = 0; j < m;) {
      int k = j + 1;
      while (k < m && (key[k] >> 32) == (key[j] >> 32)) ++k;
      const double avg = 0.5 * double(j + k - 1);  // the average 0-based rank of positions j .. k-1
      const float r = float(2.0 * avg / double(m - 1) - 1.0);
      for (int q = j; q < k; ++q) v[uint32_t(key[q])] = r;
      j = k;
    }
  } else {
    std::vector<double>& s = sc.sorted;
    s.resize(m);
    for (int q = 0; q < m; ++q) s[q] = v[idx[q]];
    const double med = median_of(s.data(), m);
    double abs_sum = 0;
    for (int q = 0; q < m; ++q) abs_sum += (s[q] = std::abs(double(v[idx[q]]) - med));
    const double mad = median_of(s.data(), m);
    // 1.4826 = 1 / Φ⁻¹(3/4) and 1.2533 = √(π/2) make both scales the standard deviation of normal data.
    const double scale = mad > 0 ? 1.4826 * mad : 1.2533 * (abs_sum / m);
    const double c = clip;
    for (int i : idx) v[i] = float(std::clamp((double(v[i]) - med) / scale, -c, c));
  }
}

FeatureStats compute_feature_stats(const Panel& p, int t0, int t1, bool ffill, int threads) {
  require_shape(p, "compute_feature_stats");
  require(0 <= t0 && t0 < t1 && t1 <= p.T, "compute_feature_stats: training range [" + std::to_string(t0) + ", " +
                                               std::to_string(t1) + ") must be a non-empty part of [0, T=" +
                                               std::to_string(p.T) + ")");
  require_no_inf(p, ffill ? 0 : t0, t1, threads);
  // One pass: moments per (instrument, feature), merged in instrument order, so any thread count gives the
  // same bits.
  std::vector<Moments> part(size_t(p.N) * p.F);
  parallel_blocks(p.N, threads, [&](int i0, int i1) {
    std::vector<float> last(p.F);
    for (int i = i0; i < i1; ++i) {
      Moments* m = part.data() + size_t(i) * p.F;
      std::fill(last.begin(), last.end(), NAN);
      for (int t = ffill ? 0 : t0; t < t1; ++t) {
        const float* x = row(p, i, t);
        for (int f = 0; f < p.F; ++f) {
          float v = x[f];
          if (ffill) {
            if (std::isnan(v)) v = last[f];
            else last[f] = v;
          }
          if (t >= t0 && !std::isnan(v)) m[f].add(v);
        }
      }
    }
  });
  std::vector<Moments> all(p.F);
  for (int i = 0; i < p.N; ++i)
    for (int f = 0; f < p.F; ++f) all[f].merge(part[size_t(i) * p.F + f]);
  FeatureStats s;
  s.mean.resize(p.F);
  s.stdev.resize(p.F);
  for (int f = 0; f < p.F; ++f) {
    require(all[f].n > 0, "compute_feature_stats: " + feature_name(p, f) + " has no value (all NaN) in the training range [" +
                              std::to_string(t0) + ", " + std::to_string(t1) + ")" +
                              (p.times.size() == size_t(p.T) ? " (times '" + p.times[t0] + "' to '" + p.times[t1 - 1] + "')"
                                                            : std::string()) +
                              "; drop it from data.feature_columns or move split.train_end");
    s.mean[f] = float(all[f].mean);
    const float sd = float(std::sqrt(all[f].m2 / all[f].n));
    // A constant feature (tested exactly: min == max, not "a small stdev", which is a scale choice the
    // user made) only shifts to 0; dividing by its zero stdev would give NaN.
    s.stdev[f] = (all[f].lo == all[f].hi || !(sd > 0)) ? 1.0f : sd;
  }
  return s;
}

void prepare_panel(Panel& p, const DataConfig& d, const FeatureStats& s, int threads) {
  check_preprocessing(d);
  require_shape(p, "normalize_features");
  require(p.y.size() == size_t(p.N) * p.T * p.K, "normalize_features: the panel's targets hold " +
                                                     std::to_string(p.y.size()) + " values, expected N*T*K");
  const bool global = d.feature_norm == "global";
  if (global) {
    require(s.mean.size() == size_t(p.F) && s.stdev.size() == size_t(p.F),
            "normalize_features: stats for " + std::to_string(s.mean.size()) + " means / " +
                std::to_string(s.stdev.size()) + " stdevs, the panel has F = " + std::to_string(p.F) + " features");
    for (int f = 0; f < p.F; ++f)
      require(std::isfinite(s.mean[f]) && std::isfinite(s.stdev[f]) && s.stdev[f] > 0,
              "normalize_features: " + feature_name(p, f) + " has mean " + std::to_string(s.mean[f]) + " and stdev " +
                  std::to_string(s.stdev[f]) + "; expected a finite mean and a finite stdev > 0");
  }
  require_no_inf(p, 0, p.T, threads);  // before any change, so a failure leaves the panel as it was
  // A borrowed panel (memory-mapped, from NumPy) becomes this panel's own copy once, here, not racily in
  // the threads below.
  p.x.make_owned();
  p.y.make_owned();

  if (d.nan_fill == "ffill") forward_fill(p, threads);
  if (global && d.nan_fill != "mean") {
    // Row by row: the default path, and the one that streams through memory once.
    parallel_blocks(p.N, threads, [&](int i0, int i1) {
      for (int i = i0; i < i1; ++i)
        for (int t = 0; t < p.T; ++t) {
          float* x = row(p, i, t);
          for (int f = 0; f < p.F; ++f) x[f] = std::isnan(x[f]) ? 0.0f : (x[f] - s.mean[f]) / s.stdev[f];
        }
    });
  } else {
    parallel_blocks(p.T, threads, [&](int d0, int d1) { features_by_date(p, d, s, d0, d1); });
  }
  if (d.target_norm != "none") {
    const CrossNorm kind = cross_kind(d.target_norm);
    parallel_blocks(p.T, threads, [&](int d0, int d1) { targets_by_date(p, kind, d0, d1); });
  }
}

void normalize_features(Panel& p, const FeatureStats& s, int threads) { prepare_panel(p, DataConfig{}, s, threads); }

}  // namespace mlalpha
