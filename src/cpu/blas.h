#pragma once
// The fast CPU path's GEMMs: OpenBLAS's cblas_sgemm (Debian's pthread build, linked statically;
// docs/decisions.md "The fast CPU path"), set to one thread and called from the ThreadPool's workers on
// fixed blocks of the output, so each output element is computed by one call of a fixed shape whatever the
// thread count.
// (The pthread build because its buffer pool is locked: the serial build's is not, and concurrent calls
// from our workers raced there and gave wrong results.)
// All matrices are row-major; op(X) = X or Xᵀ.
#include <cstddef>
#include <string>

namespace mlalpha::cpu {

class ThreadPool;

enum class Op { N, T };

// C (M, N) = alpha · op(A) · op(B) + beta · C, op(A) (M, K), op(B) (K, N); lda, ldb, ldc are row strides.
// One call on the calling thread. M, N or K may be 0 (K = 0: C = beta · C).
// Sets OpenBLAS to one thread of its own (process-wide; CpuModel calls it). Idempotent.
void blas_single_threaded();
// Throws mlalpha::Error when the address space that ulimit -v (RLIMIT_AS) leaves cannot hold OpenBLAS's work
// buffers for `callers` concurrent callers: OpenBLAS retries such an allocation forever, so without this check
// a command under a tight ulimit -v hangs instead of failing.
void check_blas_address_space(int callers);
// OpenBLAS's build and the kernel set it chose for this CPU, e.g. "OpenBLAS 0.3.21 … | SkylakeX" (a CPU it
// does not know may get a generic set; OPENBLAS_CORETYPE=<name> in the environment overrides the choice).
std::string blas_description();
void sgemm(Op ta, Op tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc);

// Rows of C per task in gemm_rows: fixed, so the tasks (and the bits) do not depend on the thread count.
constexpr int kGemmRowBlock = 128;
// Floats of gemm_rows's scratch for GEMMs with N + K <= max_nk: the short last row block of X and of C
// padded to kGemmRowBlock rows (one task per call has such a block, so one scratch serves every worker).
size_t gemm_pad_floats(int max_nk);
// C (M, N) = X (M, K) · op(W) + beta · C over the pool, in row blocks of kGemmRowBlock (the linear layers'
// forward, op = T with W (N, K), and dX, op = N with W (K, N)). bias (N), when non-null, is added to each
// row (C is first set to it, then beta = 1). Every sgemm call is of exactly kGemmRowBlock rows — the short
// last block goes through `pad` (gemm_pad_floats, 64-byte aligned), its missing rows zero — because OpenBLAS picks its kernel (and so the
// order of a row's sums) by the whole call's size: a row's bits then depend on that row alone, not on M or
// on where in the batch it sits (a window predicted alone or in any tile gives the same bits).
void gemm_rows(ThreadPool& pool, Op tw, int M, int N, int K, const float* X, int ldx, const float* W, int ldw,
               float beta, float* C, int ldc, float* pad, const float* bias = nullptr);

// Weight gradient dW (OUT, IN) += dYᵀ · X over M rows: dY (M, OUT), X (M, IN). Tasks are (a block of 64
// rows of dW) × (a block of kDwRowChunk rows of M); each writes its own partial, and the partials are added
// to dW in chunk order. scratch: dw_scratch_floats(M, OUT, IN) floats.
constexpr int kDwRowChunk = 2048;
size_t dw_scratch_floats(int M, int OUT, int IN);
void gemm_dw(ThreadPool& pool, int M, int OUT, int IN, const float* dY, int lddy, const float* X, int ldx, float* dW,
             float* scratch);

}  // namespace mlalpha::cpu
