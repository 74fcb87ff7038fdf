#pragma once
// Scalar math written so that GCC vectorises the loops that call it (no libm calls, no branches):
// exp by range reduction x = n·ln2 + r (Cody–Waite, |r| ≤ ln2/2) and a degree-6 minimax polynomial for
// e^r (the Cephes coefficients' form), max relative error ≈ 2 ulp over the clamped range; and SiLU and its
// derivative on top of it. Include inside MLALPHA_CPU_KERNELS_BEGIN/END (simd.h). The clamp's comparisons
// vectorise only with -fno-trapping-math (set for src/cpu: nothing there reads floating-point exception
// flags; values are unchanged).
#include <cstdint>

namespace mlalpha::cpu {

// e^x for x in [−87.3, 88.7] (clamped there: e^−87.3 ≈ 1.2e−38 stands in for every smaller value, whose
// absolute difference from the true value is below 1.2e−38).
static inline __attribute__((always_inline)) float vexp(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = __builtin_bit_cast(float, (int32_t(n) + 127) << 23);  // 2^n
  return p * scale;
}

static inline __attribute__((always_inline)) float vsigmoid(float u) { return 1.0f / (1.0f + vexp(-u)); }
static inline __attribute__((always_inline)) float vsilu(float u) { return u * vsigmoid(u); }
// d silu / du = σ(u) (1 + u (1 − σ(u)))
static inline __attribute__((always_inline)) float vsilu_grad(float u) {
  const float s = vsigmoid(u);
  return s * (1.0f + u * (1.0f - s));
}

}  // namespace mlalpha::cpu
