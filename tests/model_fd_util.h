#pragma once
// The small model the whole-model finite-difference suites check (test_model_fd, test_model_carry): every
// dimension > 1 where it can be, G > 1, and parameters moved off their special values.
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fd_util.h"
#include "model/layout.h"
#include "test_util.h"

namespace mlalpha::test {

inline ModelConfig small_fd_config() {
  ModelConfig c;
  c.F = 3;
  c.K = 2;
  c.D = 8;
  c.NL = 2;
  c.P = 4;  // d_inner 16 → H = 4
  c.G = 2;
  c.N = 3;
  c.W = 4;
  c.Q = 4;
  return c;
}

// The real initialisation plus noise, so no gradient term hides behind a zero (norms 1, biases 0, D 1).
inline std::vector<double> fd_params(const ModelLayout& lay, std::mt19937_64& rng) {
  const std::vector<float> init = init_params(lay, test_seed());
  const auto noise = random_vec<double>(init.size(), rng, -0.3, 0.3);
  std::vector<double> p(init.size(), 0.0);
  for (const auto& t : lay.table.tensors())
    for (size_t i = t.offset; i < t.offset + t.numel; ++i) p[i] = init[i] + noise[i];
  return p;
}

// Every parameter tensor of the table against central differences of f (the loss at params): each tensor is
// checked through a copy that f's wrapper writes back before each evaluation, so f reads params as given.
inline void fd_check_every_tensor(const ModelLayout& lay, std::vector<double>& params, const std::vector<double>& grads,
                                  const std::function<double()>& f, const std::string& suffix = "") {
  for (const auto& t : lay.table.tensors()) {
    std::vector<double> vals(params.begin() + t.offset, params.begin() + t.offset + t.numel);
    const std::vector<double> g(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
    auto ft = [&] {
      std::copy(vals.begin(), vals.end(), params.begin() + t.offset);
      return f();
    };
    EXPECT_TRUE(fd_check({t.name + suffix, &vals, g}, ft, 24));
    std::copy(vals.begin(), vals.end(), params.begin() + t.offset);
  }
}

}  // namespace mlalpha::test
