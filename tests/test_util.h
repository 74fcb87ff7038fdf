#pragma once
// Shared helpers for the test suites: fresh random inputs (a new seed every run, printed so a failure
// can be replayed with MLALPHA_TEST_SEED), comparisons that report the max error and where it is, and
// checks of the mlalpha::Error a call throws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace mlalpha::test {

// A fresh seed per process unless MLALPHA_TEST_SEED pins it; printed once.
inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("MLALPHA_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}() * 0x9e3779b97f4a7c15ull;
    std::printf("[test seed %llu; set MLALPHA_TEST_SEED to replay]\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// Each call site gets its own generator derived from the test seed and a salt.
inline std::mt19937_64 make_rng(uint64_t salt) { return std::mt19937_64(test_seed() ^ (salt * 0x2545f4914f6cdd1dull)); }

template <typename T>
std::vector<T> random_vec(size_t n, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

// Rows [t0, t0 + len) of every sequence of a (B, L, width) tensor, as a (B, len, width) one.
template <typename T>
std::vector<T> time_slice(const std::vector<T>& v, int B, int L, size_t width, int t0, int len) {
  std::vector<T> out(size_t(B) * len * width);
  for (int b = 0; b < B; ++b)
    std::copy_n(v.begin() + (size_t(b) * L + t0) * width, size_t(len) * width, out.begin() + size_t(b) * len * width);
  return out;
}
// The (B, L1, width) and (B, L2, width) tensors of two windows, joined along time into (B, L1 + L2, width).
template <typename T>
std::vector<T> time_join(const std::vector<T>& a, const std::vector<T>& c, int B, int L1, int L2, size_t width) {
  std::vector<T> out(size_t(B) * (L1 + L2) * width);
  for (int b = 0; b < B; ++b) {
    std::copy(a.begin() + size_t(b) * L1 * width, a.begin() + size_t(b + 1) * L1 * width,
              out.begin() + size_t(b) * (L1 + L2) * width);
    std::copy(c.begin() + size_t(b) * L2 * width, c.begin() + size_t(b + 1) * L2 * width,
              out.begin() + (size_t(b) * (L1 + L2) + L1) * width);
  }
  return out;
}

// Columns [c0, c1) of every row of a (rows, ld) array.
template <typename T>
std::vector<T> cols(const std::vector<T>& v, int ld, int c0, int c1) {
  std::vector<T> out;
  for (size_t r = 0; r < v.size() / ld; ++r)
    for (int c = c0; c < c1; ++c) out.push_back(v[r * ld + c]);
  return out;
}

template <typename A, typename B>
std::vector<A> cast_vec(const std::vector<B>& v) {
  return std::vector<A>(v.begin(), v.end());
}

// Passes when |got − ref| ≤ atol + rtol·|ref| everywhere and nothing is NaN/Inf (an unwritten poisoned
// output fails). The message names the worst element: index, got, ref, abs and rel error.
template <typename G, typename R>
::testing::AssertionResult all_close(const std::vector<G>& got, const std::vector<R>& ref, double atol, double rtol,
                                     const std::string& what) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs reference " << ref.size();
  // Two empty outputs would agree vacuously (and the message below reads element 0).
  if (got.empty()) return ::testing::AssertionFailure() << what << ": nothing to compare (both empty)";
  size_t worst = 0, bad = 0;
  double worst_excess = -1, max_abs = 0, max_rel = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    const double err = std::abs(g - r);
    const double excess = std::isfinite(g) ? err - (atol + rtol * std::abs(r)) : INFINITY;
    if (excess > 0) ++bad;
    if (excess > worst_excess) worst_excess = excess, worst = i;
    if (std::isfinite(err)) {
      max_abs = std::max(max_abs, err);
      max_rel = std::max(max_rel, err / std::max(std::abs(r), 1e-30));
    }
  }
  std::ostringstream msg;
  msg << what << ": n=" << got.size() << " max_abs=" << max_abs << " max_rel=" << max_rel << " worst at [" << worst
      << "] got=" << double(got[worst]) << " ref=" << double(ref[worst]);
  if (bad > 0) return ::testing::AssertionFailure() << msg.str() << " — " << bad << " elements outside atol=" << atol
                                                    << " rtol=" << rtol;
  return ::testing::AssertionSuccess() << msg.str();
}

// ‖got − ref‖₂ / ‖ref‖₂ ≤ tol (for whole gradient tensors, where single tiny elements are noisy).
template <typename G, typename R>
::testing::AssertionResult rel_l2_close(const std::vector<G>& got, const std::vector<R>& ref, double tol,
                                        const std::string& what) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs reference " << ref.size();
  if (got.empty()) return ::testing::AssertionFailure() << what << ": nothing to compare (both empty)";
  double num = 0, den = 0, max_abs = 0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = double(got[i]) - double(ref[i]);
    if (!std::isfinite(double(got[i])))
      return ::testing::AssertionFailure() << what << ": non-finite value at [" << i << "]";
    num += e * e;
    den += double(ref[i]) * double(ref[i]);
    if (std::abs(e) > max_abs) max_abs = std::abs(e), worst = i;
  }
  const double rel = std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
  std::ostringstream msg;
  msg << what << ": rel_l2=" << rel << " (tol " << tol << ") max_abs=" << max_abs << " at [" << worst
      << "] got=" << double(got[worst]) << " ref=" << double(ref[worst]);
  return rel <= tol ? ::testing::AssertionSuccess() << msg.str() : ::testing::AssertionFailure() << msg.str();
}

// rel_l2_close over the elements where NaN is not expected, after checking the NaN pattern: where
// nan_expected[i] both sides must be NaN (an output left unwritten on purpose), everywhere else both must
// be finite; and at least `min_finite` finite pairs must be compared, so two outputs that are all NaN (or
// empty) fail instead of agreeing vacuously.
template <typename G, typename R>
::testing::AssertionResult rel_l2_close_where_finite(const std::vector<G>& got, const std::vector<R>& ref,
                                                     const std::vector<bool>& nan_expected, size_t min_finite,
                                                     double tol, const std::string& what) {
  if (got.size() != ref.size() || nan_expected.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs reference " << ref.size()
                                         << " and NaN mask " << nan_expected.size();
  std::vector<double> a, b;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    if (nan_expected[i]) {
      if (!std::isnan(g) || !std::isnan(r))
        return ::testing::AssertionFailure() << what << ": NaN expected at [" << i << "], got=" << g << " ref=" << r;
      continue;
    }
    if (!std::isfinite(g) || !std::isfinite(r))
      return ::testing::AssertionFailure() << what << ": finite value expected at [" << i << "], got=" << g
                                           << " ref=" << r;
    a.push_back(g), b.push_back(r);
  }
  if (a.size() < min_finite)
    return ::testing::AssertionFailure() << what << ": only " << a.size() << " finite values compared, need >= "
                                         << min_finite;
  return rel_l2_close(a, b, tol, what + " (" + std::to_string(a.size()) + " finite)");
}

// Elementwise |got − ref| ≤ atol + rtol·mag[i], where mag[i] is the size of the terms ref[i] is made of
// (e.g. |a| + |b| for a difference a − b, |init| + Σ|g| for a sum): a value that cancels far below its
// terms is only as exact as the terms in fp32, so the bound is relative to them. NaN/Inf fails. The message
// names the worst element and its err/bound.
inline ::testing::AssertionResult close_to_terms(const std::vector<float>& got, const std::vector<double>& ref,
                                                 const std::vector<double>& mag, double atol, double rtol,
                                                 const std::string& what) {
  if (got.size() != ref.size() || mag.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs reference " << ref.size()
                                         << " and terms " << mag.size();
  size_t bad = 0, worst = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - ref[i]);
    const double bound = atol + rtol * mag[i];
    const double ratio = std::isfinite(err) ? err / bound : INFINITY;
    if (ratio > 1) ++bad;
    if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
  }
  if (got.empty()) return ::testing::AssertionSuccess() << what << ": n=0";
  std::string msg = what + ": n=" + std::to_string(got.size()) + " worst at [" + std::to_string(worst) +
                    "] got=" + std::to_string(got[worst]) + " ref=" + std::to_string(ref[worst]) +
                    " err/bound=" + std::to_string(worst_ratio);
  if (bad) return ::testing::AssertionFailure() << msg << " — " << bad << " elements outside the bound";
  return ::testing::AssertionSuccess() << msg;
}

// ‖got − ref‖₂ ≤ tol · ‖mag‖₂ with mag = the reference evaluated on |inputs| (Σ|terms| per element):
// the rel-L2 tolerance of the table, measured against the size of the terms so that an output that
// cancels to ~0 (likely with IN = 1 or M = 1) cannot make a correct GEMM fail. A wrong index or a
// missing term still shows up as an error of the order of a term.
// (The whole-tensor counterpart of test::close_to_terms, which bounds each element by its own terms.)
inline ::testing::AssertionResult rel_l2_close_to_terms(const std::vector<float>& got,
                                                        const std::vector<double>& ref,
                                                        const std::vector<double>& mag, double tol,
                                                        const std::string& what) {
  if (got.size() != ref.size() || mag.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs reference " << ref.size();
  double num = 0, den = 0, worst_err = -1;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return ::testing::AssertionFailure() << what << ": non-finite value at [" << i << "]";
    const double e = double(got[i]) - ref[i];
    num += e * e;
    den += mag[i] * mag[i];
    if (std::abs(e) > worst_err) worst_err = std::abs(e), worst = i;
  }
  const double rel = std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
  const double g = got.empty() ? 0.0 : double(got[worst]), r = ref.empty() ? 0.0 : ref[worst];
  auto res = rel <= tol ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
  return res << what << ": ‖err‖/‖terms‖=" << rel << " (tol " << tol << ") max_abs=" << worst_err << " at [" << worst
             << "] got=" << g << " ref=" << r;
}

// Trained weights of one tensor, two computations of the same training: ‖got − ref‖₂ ≤ tol · max(‖ref‖₂, lr·√n).
// The floor is one AdamW step's size (|Δw| ≈ lr per element): a tensor that has stayed near 0 (a bias whose
// gradient changes sign, its value ~1e-6 after 20 steps) has no scale of its own, and its drift is then measured
// against the steps it took. A wrong gradient moves weights by ~lr a step, far outside either bound.
template <typename G, typename R>
::testing::AssertionResult weights_close(const std::vector<G>& got, const std::vector<R>& ref, double tol, double lr,
                                         const std::string& what) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs reference " << ref.size();
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(double(got[i]))) return ::testing::AssertionFailure() << what << ": non-finite value at [" << i << "]";
    num += (double(got[i]) - double(ref[i])) * (double(got[i]) - double(ref[i]));
    den += double(ref[i]) * double(ref[i]);
  }
  const double scale = std::max(std::sqrt(den), lr * std::sqrt(double(got.size())));
  const double rel = std::sqrt(num) / std::max(scale, 1e-300);
  auto res = rel <= tol ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
  return res << what << ": ‖err‖ / max(‖ref‖, lr·√n) = " << rel << " (tol " << tol << "; ‖ref‖ " << std::sqrt(den)
             << ", lr·√n " << lr * std::sqrt(double(got.size())) << ")";
}

// Same length and the same bits (NaN payloads and −0 included).
inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

// The message of the Error `fn` throws ("" and a test failure if it throws none).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an mlalpha::Error";
  return "";
}

// Passes when `text` (an error message) contains `part`; shows the whole message otherwise.
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected the message to contain \"" << part << "\"\n  got: \"" << text << "\"";
}

}  // namespace mlalpha::test
