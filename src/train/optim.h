#pragma once
// Global-norm clipping and AdamW (DESIGN section 2, steps 5 and 6).
//   scale = min(1, max_norm / ‖g‖) ; a non-finite ‖g‖ gives scale 0 and skip = 1 (nothing is updated).
//   AdamW (PyTorch's, decoupled decay): with g ← scale·g, t = step (1-based),
//     m ← β1 m + (1−β1) g ;  v ← β2 v + (1−β2) g²
//     p ← p·(1 − lr·wd·decay) − lr · (m / (1−β1ᵗ)) / (sqrt(v / (1−β2ᵗ)) + eps)
#include <cstddef>
#include <cstdint>

#include "core/hd.h"

namespace mlalpha {

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;  // 1-based count of updates including this one
};

struct ClipResult {
  float scale;  // multiply gradients by this
  int skip;     // 1 when the norm is not finite: the step is skipped
};

// max_norm <= 0 disables clipping (scale 1 unless the norm is not finite).
MLALPHA_HD ClipResult clip_scale(double norm_sq, float max_norm) {
  const bool finite = norm_sq == norm_sq && norm_sq <= 1.7976931348623157e308;  // rejects NaN and +inf
  if (!finite) return {0.0f, 1};
  const double norm = sqrt(norm_sq);
  if (max_norm <= 0.0f || norm <= double(max_norm)) return {1.0f, 0};
  return {float(double(max_norm) / norm), 0};
}

// One element of AdamW; shared by the CPU loop and the CUDA kernel.
MLALPHA_HD void adamw_update(float& p, float& m, float& v, float g, bool decay, const AdamWParams& a, float bc1,
                             float bc2_sqrt) {
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
  if (decay) p *= 1.0f - a.lr * a.weight_decay;
  p -= a.lr * (m / bc1) / (sqrtf(v) / bc2_sqrt + a.eps);
}

namespace ref {
// Σ g² in double, in index order.
double grad_norm_sq(const float* g, size_t n);
// AdamW over a flat arena; decay (n) is the weight-decay mask; grads are multiplied by `scale` first.
void adamw(float* params, const float* grads, float* m, float* v, const unsigned char* decay, size_t n,
           const AdamWParams& a, float scale);
}  // namespace ref

}  // namespace mlalpha
