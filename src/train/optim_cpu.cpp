#include "train/optim_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/simd.h"
#include "cpu/thread_pool.h"

namespace mlalpha::cpu {

namespace {
constexpr size_t kAdamBlock = size_t(1) << 14;
int blocks(size_t n, size_t per) { return int((n + per - 1) / per); }
}  // namespace

// Outside the AVX2/FMA region on purpose: no contraction into FMA, so each element's arithmetic is that
// of ref::adamw bit for bit.
void adamw(ThreadPool& pool, float* params, const float* grads, float* m, float* v, const unsigned char* decay,
           size_t n, const AdamWSettings& a, float scale) {
  const float bc1 = 1.0f - std::pow(a.beta1, float(a.step));
  const float bc2_sqrt = std::sqrt(1.0f - std::pow(a.beta2, float(a.step)));
  const float b1 = a.beta1, b2 = a.beta2, lr = a.lr, eps = a.eps, keep = 1.0f - a.lr * a.weight_decay;
  pool.run(blocks(n, kAdamBlock), [=](int t, int) {  // by value: the loop must not reload through references
    const size_t i0 = size_t(t) * kAdamBlock, i1 = std::min(n, i0 + kAdamBlock);
#pragma omp simd
    for (size_t i = i0; i < i1; ++i) {
      const float g = grads[i] * scale;
      const float mi = b1 * m[i] + (1.0f - b1) * g;
      const float vi = b2 * v[i] + (1.0f - b2) * g * g;
      m[i] = mi;
      v[i] = vi;
      const float p = params[i] * (decay[i] ? keep : 1.0f);  // × 1 leaves p's bits as they are
      params[i] = p - lr * (mi / bc1) / (std::sqrt(vi) / bc2_sqrt + eps);
    }
  });
}

MLALPHA_CPU_KERNELS_BEGIN
double grad_norm_sq(ThreadPool& pool, const float* g, size_t n, double* part) {
  const int nb = blocks(n, kNormBlock);
  pool.run(nb, [&](int t, int) {
    const size_t i0 = size_t(t) * kNormBlock, i1 = std::min(n, i0 + kNormBlock);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = i0; i < i1; ++i) s += double(g[i]) * double(g[i]);
    part[t] = s;
  });
  double s = 0.0;
  for (int t = 0; t < nb; ++t) s += part[t];
  return s;
}
MLALPHA_CPU_KERNELS_END

}  // namespace mlalpha::cpu
