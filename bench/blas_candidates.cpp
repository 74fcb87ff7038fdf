// Times single-precision GEMM on the perception model's shapes (default and S configurations) through the
// CBLAS interface of whichever BLAS it is linked against (or oneDNN's dnnl_sgemm with -DUSE_DNNL), so the
// Debian candidates can be compared on this machine (scripts/blas_candidates.sh builds one binary per
// library; docs/decisions.md records the result). Row-major, as src/cpu calls it.
//   lib mode:   the library's own threading (its pthread/openmp build, threads from the environment)
//   split mode: the library called single-threaded from `threads` std::threads, each on a fixed band of
//               rows of C (M for forward and dX, OUT for dW): how src/cpu drives a serial BLAS.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifdef USE_DNNL
#include <dnnl.h>
#else
#include <cblas.h>
#endif

namespace {

struct Shape {
  const char* name;
  bool ta, tb;  // op(A) = Aᵀ, op(B) = Bᵀ
  int M, N, K;
  float beta;
};

void sgemm(bool ta, bool tb, int M, int N, int K, const float* A, const float* B, float beta, float* C) {
  const int lda = ta ? M : K, ldb = tb ? K : N;
#ifdef USE_DNNL
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, N);
#else
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda,
              B, ldb, beta, C, N);
#endif
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median seconds of one C = op(A)·op(B) over `reps` timed calls; threads > 1 splits the rows of C.
double time_shape(const Shape& s, int threads, int reps) {
  std::vector<float> A(size_t(s.M) * s.K), B(size_t(s.K) * s.N), C(size_t(s.M) * s.N);
  for (size_t i = 0; i < A.size(); ++i) A[i] = float((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  for (size_t i = 0; i < B.size(); ++i) B[i] = float((i * 40503u) % 1000) * 1e-3f - 0.5f;
  auto run = [&] {
    if (threads <= 1) return sgemm(s.ta, s.tb, s.M, s.N, s.K, A.data(), B.data(), s.beta, C.data());
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        const int r0 = int(int64_t(s.M) * t / threads), r1 = int(int64_t(s.M) * (t + 1) / threads);
        // rows r0..r1 of C: A's rows (or Aᵀ's columns) r0..r1
        const float* Ar = s.ta ? A.data() + r0 : A.data() + size_t(r0) * s.K;
        if (r1 > r0) {
          const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
#ifdef USE_DNNL
          dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', r1 - r0, s.N, s.K, 1.0f, Ar, lda, B.data(), ldb, s.beta,
                     C.data() + size_t(r0) * s.N, s.N);
#else
          cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, r1 - r0,
                      s.N, s.K, 1.0f, Ar, lda, B.data(), ldb, s.beta, C.data() + size_t(r0) * s.N, s.N);
#endif
        }
      });
    for (auto& th : ts) th.join();
  };
  for (int i = 0; i < 3; ++i) run();
  std::vector<double> t(reps);
  for (int i = 0; i < reps; ++i) {
    const double t0 = now();
    run();
    t[i] = now() - t0;
  }
  std::sort(t.begin(), t.end());
  return t[reps / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const char* lib = argc > 1 ? argv[1] : "?";
  const int split = argc > 2 ? std::atoi(argv[2]) : 1;  // > 1: split mode with that many threads
  // The model's GEMMs (forward Y = X·Wᵀ: NT; dX = dY·W: NN; dW += dYᵀ·X: TN) and one (batch, head, chunk)
  // of the chunked SSD (Q = 64): C·Bᵀ, (CBᵀ ⊙ decay)·(Δx), the chunk state (Δx)ᵀ·B, C·stateᵀ.
  const Shape shapes[] = {
      {"def in_proj fwd  1024x164x32", false, true, 1024, 164, 32, 0},
      {"def in_proj dX   1024x32x164", false, false, 1024, 32, 164, 0},
      {"def in_proj dW   164x32x1024", true, false, 164, 32, 1024, 1},
      {"def out_proj fwd 1024x32x64", false, true, 1024, 32, 64, 0},
      {"def ssd CB^T     64x64x16", false, true, 64, 64, 16, 0},
      {"def ssd Ydiag    64x16x64", false, false, 64, 16, 64, 0},
      {"def ssd state    16x16x64", true, false, 16, 16, 64, 0},
      {"S in_proj fwd    16384x648x128", false, true, 16384, 648, 128, 0},
      {"S in_proj dX     16384x128x648", false, false, 16384, 128, 648, 0},
      {"S in_proj dW     648x128x16384", true, false, 648, 128, 16384, 1},
      {"S out_proj fwd   16384x128x256", false, true, 16384, 128, 256, 0},
      {"S out_proj dX    16384x256x128", false, false, 16384, 256, 128, 0},
      {"S out_proj dW    128x256x16384", true, false, 128, 256, 16384, 1},
      {"S ssd CB^T       64x64x64", false, true, 64, 64, 64, 0},
      {"S ssd Ydiag      64x32x64", false, false, 64, 32, 64, 0},
      {"S ssd state      32x64x64", true, false, 32, 64, 64, 0},
      {"S ssd Yoff       64x32x64", false, true, 64, 32, 64, 0},
  };
  for (const Shape& s : shapes) {
    const double flop = 2.0 * s.M * s.N * s.K;
    const int reps = std::clamp(int(2e9 / flop), 15, 20000);
    const double t = time_shape(s, split, reps);
    std::printf("%-12s %-32s %10.2f us %8.1f GFLOP/s\n", lib, s.name, t * 1e6, flop / t * 1e-9);
  }
  return 0;
}
