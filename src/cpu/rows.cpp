// The block partials of the fast CPU path (rows.h).
#include "cpu/rows.h"

#include <algorithm>
#include <cstddef>

#include "cpu/simd.h"
#include "cpu/thread_pool.h"

MLALPHA_CPU_KERNELS_BEGIN

namespace mlalpha::cpu {

void colsum(Rows rows, int n, const float* a, int lda, float* part) {
  std::fill(part, part + n, 0.0f);
  for (int r = rows.begin; r < rows.end; ++r) {
    const float* ar = a + size_t(r) * lda;
#pragma omp simd
    for (int i = 0; i < n; ++i) part[i] += ar[i];
  }
}

void reduce_partials(ThreadPool& pool, const float* part, int blocks, int n, float* out) {
  constexpr int kCols = 512;
  pool.run((n + kCols - 1) / kCols, [&](int t, int) {
    const int c0 = t * kCols, c1 = std::min(n, c0 + kCols);
    for (int b = 0; b < blocks; ++b) {
      const float* p = part + size_t(b) * n;
#pragma omp simd
      for (int i = c0; i < c1; ++i) out[i] += p[i];
    }
  });
}

}  // namespace mlalpha::cpu
