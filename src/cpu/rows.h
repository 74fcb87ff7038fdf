#pragma once
// Rows of an (M, ·) activation, the unit the fast CPU path's row-parallel kernels (ops/*/*_cpu.h) are cut into,
// and the partial sums that keep their bits independent of the thread count: a parameter gradient is never
// accumulated across blocks by a kernel; where the op's Grads struct says "+=", the kernel writes its block's
// partial instead (=), and the model adds the partials in block order (reduce_partials).
#include <cstddef>

namespace mlalpha::cpu {

class ThreadPool;

// Rows per block of every row-parallel op (fixed: the partials, hence the bits, do not depend on threads).
constexpr int kRowBlock = 64;

// Rows [begin, end) of an (M, ·) activation.
struct Rows {
  int begin, end;
};

// part (n) = Σ_rows a[r·lda + i] (a bias gradient's block partial), written.
void colsum(Rows rows, int n, const float* a, int lda, float* part);

// out (n) += Σ_b part[b·n + i] for b in [0, blocks), in block order; parallel over fixed column ranges.
void reduce_partials(ThreadPool& pool, const float* part, int blocks, int n, float* out);

}  // namespace mlalpha::cpu
