#include "cpu/blas.h"

#include <cblas.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "core/error.h"

#include "cpu/thread_pool.h"

namespace mlalpha::cpu {

namespace {
constexpr int kDwOutBlock = 64;
int ceil_div(int a, int b) { return (a + b - 1) / b; }
}  // namespace

void blas_single_threaded() { openblas_set_num_threads(1); }

void check_blas_address_space(int callers) {
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return;
  std::ifstream statm("/proc/self/statm");
  double pages = 0;
  if (!(statm >> pages)) return;  // unknown: the allocation itself reports
  const double used = pages * double(sysconf(_SC_PAGESIZE)), left = double(as.rlim_cur) - used;
  // OpenBLAS's buffer (BUFFER_SIZE of its build, 128 MiB on x86-64, plus a page), one per concurrent caller.
  constexpr double kBuffer = 128.0 * 1024 * 1024 + 4096;
  const double need = kBuffer * std::max(1, callers);
  auto mib = [](double b) { return std::to_string(static_cast<long long>(b / (1024.0 * 1024.0))) + " MiB"; };
  require(left >= need, "the address space limit (ulimit -v " + std::to_string(as.rlim_cur / 1024) + " KiB) leaves " +
                            mib(std::max(0.0, left)) + " to this process; the CPU's matrix products need " + mib(need) +
                            " (OpenBLAS's work buffer for each of " + std::to_string(std::max(1, callers)) +
                            " thread(s)): raise ulimit -v or use fewer threads (--threads)");
}

std::string blas_description() { return std::string(openblas_get_config()) + " | kernels " + openblas_get_corename(); }

void sgemm(Op ta, Op tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // BLAS leaves C unscaled for K = 0 in some builds: do it here
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) C[size_t(i) * ldc + j] = beta == 0.0f ? 0.0f : beta * C[size_t(i) * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, ta == Op::T ? CblasTrans : CblasNoTrans, tb == Op::T ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

size_t gemm_pad_floats(int max_nk) { return size_t(kGemmRowBlock) * max_nk; }

void gemm_rows(ThreadPool& pool, Op tw, int M, int N, int K, const float* X, int ldx, const float* W, int ldw,
               float beta, float* C, int ldc, float* pad, const float* bias) {
  constexpr int R = kGemmRowBlock;
  pool.run(ceil_div(M, R), [&](int t, int) {
    const int r0 = t * R, rows = std::min(M, r0 + R) - r0;
    const float* x = X + size_t(r0) * ldx;
    float* c = C + size_t(r0) * ldc;
    int lx = ldx, lc = ldc;
    if (rows < R) {  // the short last block, as a full one: X's rows and zeros, C's rows (when read) and zeros
      float* px = pad;
      float* pc = px + size_t(R) * K;
      for (int r = 0; r < R; ++r) {
        if (r < rows) std::copy_n(x + size_t(r) * ldx, K, px + size_t(r) * K);
        else std::fill_n(px + size_t(r) * K, K, 0.0f);
        if (!bias && beta != 0.0f) {
          if (r < rows) std::copy_n(c + size_t(r) * ldc, N, pc + size_t(r) * N);
          else std::fill_n(pc + size_t(r) * N, N, 0.0f);
        }
      }
      x = px, c = pc, lx = K, lc = N;
    }
    if (bias)
      for (int r = 0; r < R; ++r) std::copy(bias, bias + N, c + size_t(r) * lc);
    sgemm(Op::N, tw, R, N, K, 1.0f, x, lx, W, ldw, bias ? 1.0f : beta, c, lc);
    if (rows < R)
      for (int r = 0; r < rows; ++r) std::copy_n(c + size_t(r) * lc, N, C + size_t(r0 + r) * ldc);
  });
}

size_t dw_scratch_floats(int M, int OUT, int IN) {
  const int chunks = ceil_div(M, kDwRowChunk);
  return chunks > 1 ? size_t(chunks) * OUT * IN : 0;
}

void gemm_dw(ThreadPool& pool, int M, int OUT, int IN, const float* dY, int lddy, const float* X, int ldx, float* dW,
             float* scratch) {
  const int chunks = ceil_div(M, kDwRowChunk), oblocks = ceil_div(OUT, kDwOutBlock);
  if (chunks <= 1) {  // one chunk: accumulate straight into dW
    pool.run(oblocks, [&](int t, int) {
      const int o0 = t * kDwOutBlock, o1 = std::min(OUT, o0 + kDwOutBlock);
      sgemm(Op::T, Op::N, o1 - o0, IN, M, 1.0f, dY + o0, lddy, X, ldx, 1.0f, dW + size_t(o0) * IN, IN);
    });
    return;
  }
  pool.run(chunks * oblocks, [&](int t, int) {
    const int c = t / oblocks, ob = t % oblocks;
    const int m0 = c * kDwRowChunk, m1 = std::min(M, m0 + kDwRowChunk);
    const int o0 = ob * kDwOutBlock, o1 = std::min(OUT, o0 + kDwOutBlock);
    sgemm(Op::T, Op::N, o1 - o0, IN, m1 - m0, 1.0f, dY + size_t(m0) * lddy + o0, lddy, X + size_t(m0) * ldx, ldx,
          0.0f, scratch + (size_t(c) * OUT + o0) * IN, IN);
  });
  // dW += Σ_c partial_c, chunks in ascending order, one block of dW rows per task.
  pool.run(oblocks, [&](int t, int) {
    const size_t e0 = size_t(t) * kDwOutBlock * IN, e1 = std::min(size_t(OUT), size_t(t + 1) * kDwOutBlock) * IN;
    for (int c = 0; c < chunks; ++c) {
      const float* p = scratch + size_t(c) * OUT * IN;
      for (size_t e = e0; e < e1; ++e) dW[e] += p[e];
    }
  });
}

}  // namespace mlalpha::cpu
