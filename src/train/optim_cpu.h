#pragma once
// Global gradient norm and AdamW over the flat arenas on all cores (DESIGN section 2, steps 5 and 6; the
// formulas of src/train/optim.h). The trainer calls grad_norm_sq, then its clip_scale(norm_sq, max_norm)
// (train/optim.h: scale and skip flag), then adamw with that scale unless the step is skipped.
//   grad_norm_sq: Σ g² in double over fixed blocks of kNormBlock elements, the blocks added in order. The
//     ref:: version adds in index order, so the two differ by rounding (≈ 1e−16 relative, docs/testing.md);
//     the clip scale float(max_norm / ‖g‖) is then equal or 1 ulp apart.
//   adamw: elementwise, the same float arithmetic in the same order as ref::adamw (and adamw_update), built
//     without FMA contraction: bit-identical to it for the same scale (tested).
#include <cstddef>
#include <cstdint>

namespace mlalpha::cpu {

class ThreadPool;

constexpr size_t kNormBlock = size_t(1) << 15;

struct AdamWSettings {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;  // 1-based count of updates including this one
};

// Blocks of grad_norm_sq over n gradients: the size of its partials buffer (doubles).
inline size_t norm_blocks(size_t n) { return (n + kNormBlock - 1) / kNormBlock; }
// g (n); partials (norm_blocks(n)) scratch, so the step allocates nothing.
double grad_norm_sq(ThreadPool& pool, const float* g, size_t n, double* partials);

// params, m, v (n) updated; grads (n) multiplied by scale first; decay (n) the weight-decay mask.
void adamw(ThreadPool& pool, float* params, const float* grads, float* m, float* v, const unsigned char* decay,
           size_t n, const AdamWSettings& a, float scale);

}  // namespace mlalpha::cpu
