#pragma once
// Central finite differences in double against an analytic gradient (DESIGN section 4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tolerances.h"

namespace mlalpha::test {

// A tensor to check: the values f depends on (perturbed in place) and ∂f/∂values computed analytically.
struct FdTensor {
  std::string name;
  std::vector<double>* values;
  std::vector<double> grad;
};

// Every element when the tensor is small, else `max_checks` random ones. Passes when
// |fd − analytic| ≤ kFdRel·|analytic| + kFdAbs·(1 + max|analytic|) for every checked element;
// the message names the worst element.
inline ::testing::AssertionResult fd_check(const FdTensor& t, const std::function<double()>& f,
                                           size_t max_checks = 96) {
  std::vector<double>& v = *t.values;
  if (t.grad.size() != v.size())
    return ::testing::AssertionFailure() << t.name << ": gradient size " << t.grad.size() << " vs " << v.size();
  std::vector<size_t> idx(v.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  if (idx.size() > max_checks) {
    auto rng = make_rng(std::hash<std::string>{}(t.name));
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(max_checks);
  }
  double scale = 0;
  for (double g : t.grad) scale = std::max(scale, std::abs(g));
  double worst_excess = -1e300, worst_fd = 0, worst_an = 0;
  size_t worst = 0, bad = 0;
  for (size_t i : idx) {
    const double keep = v[i];
    v[i] = keep + tol::kFdStep;
    const double fp = f();
    v[i] = keep - tol::kFdStep;
    const double fm = f();
    v[i] = keep;
    const double fd = (fp - fm) / (2 * tol::kFdStep);
    const double an = t.grad[i];
    const double excess = std::abs(fd - an) - (tol::kFdRel * std::abs(an) + tol::kFdAbs * (1 + scale));
    if (!(excess <= 0)) ++bad;
    if (excess > worst_excess || std::isnan(excess)) worst_excess = excess, worst = i, worst_fd = fd, worst_an = an;
  }
  std::ostringstream msg;
  msg << t.name << ": " << idx.size() << " of " << v.size() << " elements checked, worst at [" << worst
      << "] fd=" << worst_fd << " analytic=" << worst_an << " |diff|=" << std::abs(worst_fd - worst_an);
  if (bad) return ::testing::AssertionFailure() << msg.str() << " — " << bad << " outside tolerance";
  return ::testing::AssertionSuccess() << msg.str();
}

// Σ r_i·out_i: a random linear functional turns any op's output into a scalar whose ∂/∂out is r.
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace mlalpha::test
