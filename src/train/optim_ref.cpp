#include <cmath>

#include "train/optim.h"

namespace mlalpha::ref {

double grad_norm_sq(const float* g, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(g[i]) * double(g[i]);
  return s;
}

void adamw(float* params, const float* grads, float* m, float* v, const unsigned char* decay, size_t n,
           const AdamWParams& a, float scale) {
  const float bc1 = 1.0f - std::pow(a.beta1, float(a.step));
  const float bc2_sqrt = std::sqrt(1.0f - std::pow(a.beta2, float(a.step)));
  for (size_t i = 0; i < n; ++i) adamw_update(params[i], m[i], v[i], grads[i] * scale, decay[i] != 0, a, bc1, bc2_sqrt);
}

}  // namespace mlalpha::ref
