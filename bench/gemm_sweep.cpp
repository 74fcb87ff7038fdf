// ml-alpha-gemm-sweep: times every algorithm cuBLASLt's heuristic offers for the model's GEMM shapes
// (DESIGN section 5 configurations S, M, L), and the weight-gradient GEMMs split along k as a strided
// batch. A developer's tool for choosing algorithms offline (docs/benchmarks.md); the engine never times
// algorithms at run time, so its results never depend on timing.
// `ml-alpha-gemm-sweep --compare`: for every GEMM of S, M and L in fp32 instead, cuBLASLt's first choice
// (CUDA-core SGEMM) against our 3xTF32 kernel (src/ops/linear/gemm_3xtf32.cu), which the engine runs them on.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "core/cuda_check.h"
#include "core/cuda_event.h"
#include "core/device_buffer.h"
#include "ops/linear/gemm_3xtf32.h"

namespace {

struct Shape {
  const char* name;
  bool tf32;
  cublasOperation_t ta, tb;
  uint64_t m, n, k;
  float beta;
};

uint32_t attr_u32(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t a) {
  size_t need = 0;  // attributes are 2, 4 or 8 bytes wide: ask for the size first
  cublasLtMatmulAlgoConfigGetAttribute(&algo, a, nullptr, 0, &need);
  uint64_t v = 0;  // little-endian: the low bytes hold the value
  size_t written = 0;
  if (need == 0 || need > sizeof(v) ||
      cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &v, need, &written) != CUBLAS_STATUS_SUCCESS)
    return 9999;
  return uint32_t(v);
}

// Median of 10 timed calls of launch() (after 3 untimed), in ms.
template <typename Launch>
float median_ms(Launch&& launch) {
  mlalpha::CudaEvent e0, e1;
  std::vector<float> times;
  for (int r = 0; r < 13; ++r) {
    e0.record(nullptr);  // the GEMMs run on the legacy default stream
    launch();
    e1.record(nullptr);
    e1.synchronize();
    if (r >= 3) times.push_back(mlalpha::elapsed_ms(e0, e1));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// A shape's cuBLASLt descriptors (k split into `splits` strided batches) and workspace preference; owns them.
struct LtProblem {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;

  LtProblem(const Shape& s, cublasComputeType_t compute, int splits, size_t ws_bytes) {
    const uint64_t k = s.k / splits;
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    const int32_t ta = s.ta, tb = s.tb;
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    const uint64_t ar = s.ta == CUBLAS_OP_N ? s.m : k, ac = s.ta == CUBLAS_OP_N ? k : s.m;
    const uint64_t br = s.tb == CUBLAS_OP_N ? k : s.n, bc = s.tb == CUBLAS_OP_N ? s.n : k;
    MLALPHA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ar, ac, int64_t(ar)));
    MLALPHA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, br, bc, int64_t(br)));
    MLALPHA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, s.m, s.n, int64_t(s.m)));
    if (splits > 1) {
      const int32_t count = splits;
      const int64_t sa = int64_t(ar * ac), sb = int64_t(br * bc), sd = int64_t(s.m * s.n);
      for (auto [l, st] : {std::pair{la, sa}, std::pair{lb, sb}, std::pair{ld, sd}}) {
        MLALPHA_CUBLAS_CHECK(
            cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        MLALPHA_CUBLAS_CHECK(
            cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof(st)));
      }
    }
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t wsb = ws_bytes;
    MLALPHA_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
  }
  ~LtProblem() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
  }
  LtProblem(const LtProblem&) = delete;
  LtProblem& operator=(const LtProblem&) = delete;

  cublasStatus_t heuristic(cublasLtHandle_t lt, int max, cublasLtMatmulHeuristicResult_t* res, int* n) const {
    return cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, max, res, n);
  }
  float time_ms(cublasLtHandle_t lt, const cublasLtMatmulAlgo_t& algo, const float* A, const float* B, float beta,
                float* D, void* ws, size_t ws_bytes) const {
    const float alpha = 1.f;
    return median_ms([&] {
      MLALPHA_CUBLAS_CHECK(cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &algo, ws, ws_bytes, 0));
    });
  }
};

void sweep(cublasLtHandle_t lt, const Shape& s, int splits, bool emulated, float* A, float* B, float* D, void* ws,
           size_t ws_bytes) {
  const cublasComputeType_t compute =
      s.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : (emulated ? CUBLAS_COMPUTE_32F_EMULATED_16BFX9 : CUBLAS_COMPUTE_32F);
  const LtProblem pb(s, compute, splits, ws_bytes);
  constexpr int kMax = 24;
  cublasLtMatmulHeuristicResult_t res[kMax] = {};
  int n = 0;
  const cublasStatus_t st = pb.heuristic(lt, kMax, res, &n);
  const double gflop = 2.0 * double(s.m) * double(s.n) * double(s.k) * 1e-9;
  std::printf("== %s%s m=%llu n=%llu k=%llu splits=%d: %d candidates (status %d)\n", s.name,
              emulated ? " [bf16x9]" : "", (unsigned long long)s.m, (unsigned long long)s.n,
              (unsigned long long)s.k, splits, n, int(st));
  for (int i = 0; i < n && st == CUBLAS_STATUS_SUCCESS; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    const float ms = pb.time_ms(lt, res[i].algo, A, B, splits > 1 ? 0.f : s.beta, D, ws, ws_bytes);
    std::printf("  #%-2d id %3u tile %3u stages %3u splitk %2u red %u swz %u cluster %3u ws %8zu waves %5.2f  "
                "%8.1f us  %6.1f TFLOP/s\n",
                i, attr_u32(res[i].algo, CUBLASLT_ALGO_CONFIG_ID), attr_u32(res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                attr_u32(res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                attr_u32(res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                attr_u32(res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                attr_u32(res[i].algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                attr_u32(res[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), res[i].workspaceSize,
                res[i].wavesCount, ms * 1e3, gflop / ms);
  }
  std::fflush(stdout);
}

// The 3xTF32 kernel's operands for the shape, by the mapping linear_gpu.cpp uses.
mlalpha::gpu::Gemm3Params own_params(const Shape& s, const float* A, const float* B, float* D) {
  const int64_t lda = s.ta == CUBLAS_OP_N ? s.m : s.k, ldb = s.tb == CUBLAS_OP_N ? s.k : s.n;
  return mlalpha::gpu::gemm3_from_column_major(s.ta == CUBLAS_OP_T, s.tb == CUBLAS_OP_T, int(s.m), int(s.n),
                                               int(s.k), A, lda, B, ldb, D, s.beta != 0.f ? D : nullptr, nullptr);
}

// One line per shape: cuBLASLt's first choice in fp32 against the 3xTF32 kernel in each tile it has.
void compare(cublasLtHandle_t lt, const Shape& s, float* A, float* B, float* D, void* ws, size_t ws_bytes) {
  const LtProblem pb(s, CUBLAS_COMPUTE_32F, 1, ws_bytes);
  cublasLtMatmulHeuristicResult_t res{};
  int n = 0;
  MLALPHA_CUBLAS_CHECK(pb.heuristic(lt, 1, &res, &n));
  const double gflop = 2.0 * double(s.m) * double(s.n) * double(s.k) * 1e-9;
  const float blas = n > 0 ? pb.time_ms(lt, res.algo, A, B, s.beta, D, ws, ws_bytes) : 0.f;
  const mlalpha::gpu::Gemm3Params q = own_params(s, A, B, D);
  const mlalpha::gpu::Gemm3Config chosen = mlalpha::gpu::gemm3_config(q, ws_bytes / sizeof(float));
  std::printf("| %-16s | %5llu | %5llu | %5llu | %8.1f | %6.1f |", s.name, (unsigned long long)s.m,
              (unsigned long long)s.n, (unsigned long long)s.k, blas * 1e3, gflop / blas);
  float own = 0.f;
  for (const auto& c : mlalpha::gpu::gemm3_candidates(q, ws_bytes / sizeof(float))) {
    const float ms = median_ms([&] { mlalpha::gpu::gemm3_run(q, c, static_cast<float*>(ws), nullptr); });
    const bool is_chosen = c.tile_m == chosen.tile_m && c.tile_n == chosen.tile_n && c.warps_m == chosen.warps_m &&
                           c.warps_n == chosen.warps_n && c.wgmma == chosen.wgmma;
    if (is_chosen) own = ms;
    std::printf(" %s%.1f%s |", is_chosen ? "**" : "", ms * 1e3, is_chosen ? "**" : "");
  }
  std::printf(" %6.1f | %5.2fx | %s |\n", gflop / own, blas / own, chosen.describe().c_str());
  std::fflush(stdout);
}

// The cuBLASLt handle, destroyed on every way out of main.
struct LtHandle {
  LtHandle() { MLALPHA_CUBLAS_CHECK(cublasLtCreate(&h)); }
  ~LtHandle() { (void)cublasLtDestroy(h); }
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  cublasLtHandle_t h = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  if (mlalpha::cuda_device_count() == 0) {
    std::fprintf(stderr, "ml-alpha-gemm-sweep: error: this tool times cuBLASLt and 3xTF32 GEMMs, so it needs a CUDA "
                         "device and found none\n");
    return 1;
  }
  try {
    const bool cmp = argc > 1 && std::string(argv[1]) == "--compare";
    const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    // Column-major views as in src/ops/linear/linear_gpu.cpp (fwd: T,N m=OUT n=M k=IN; dx: N,N m=IN n=M k=OUT;
    // dW: N,T m=IN n=OUT k=M), M = B·L = 16384 tokens in all three configurations.
    const std::vector<Shape> shapes = {
        {"L in_proj fwd", true, T, N, 4384, 16384, 1024, 0.f},  {"L in_proj dx", true, N, N, 1024, 16384, 4384, 0.f},
        {"L in_proj dW", true, N, T, 1024, 4384, 16384, 1.f},   {"L out_proj fwd+r", true, T, N, 1024, 16384, 2048, 1.f},
        {"L out_proj dx", true, N, N, 2048, 16384, 1024, 0.f},  {"L out_proj dW", true, N, T, 2048, 1024, 16384, 1.f},
        {"M in_proj fwd", false, T, N, 1160, 16384, 256, 0.f},  {"M in_proj dx", false, N, N, 256, 16384, 1160, 0.f},
        {"M in_proj dW", false, N, T, 256, 1160, 16384, 1.f},   {"M out_proj fwd+r", false, T, N, 256, 16384, 512, 1.f},
        {"M out_proj dx", false, N, N, 512, 16384, 256, 0.f},   {"M out_proj dW", false, N, T, 512, 256, 16384, 1.f},
        {"S in_proj fwd", false, T, N, 648, 16384, 128, 0.f},   {"S in_proj dW", false, N, T, 128, 648, 16384, 1.f},
        {"S out_proj dW", false, N, T, 256, 128, 16384, 1.f},
    };
    const LtHandle handle;
    cublasLtHandle_t lt = handle.h;
    const size_t big = size_t(4384) * 16384 * 4;  // floats of the largest operand, with room for splits
    const size_t ws_bytes = 32u << 20;
    mlalpha::DeviceBuffer<float> bufA(big), bufB(big), bufD(big);
    mlalpha::DeviceBuffer<unsigned char> bufWs(ws_bytes);
    float *A = bufA.data(), *B = bufB.data(), *D = bufD.data();
    void* ws = bufWs.data();
    MLALPHA_CUDA_CHECK(cudaMemset(A, 0x3c, big * sizeof(float)));
    MLALPHA_CUDA_CHECK(cudaMemset(B, 0x3b, big * sizeof(float)));
    MLALPHA_CUDA_CHECK(cudaMemset(D, 0, big * sizeof(float)));
    if (cmp) {
      // Every fp32 GEMM of the three configurations (L's too: its fp32 row of the benchmark table).
      const std::vector<Shape> fp32 = {
          {"S in_proj fwd", false, T, N, 648, 16384, 128, 0.f},    {"S in_proj dx", false, N, N, 128, 16384, 648, 0.f},
          {"S in_proj dW", false, N, T, 128, 648, 16384, 1.f},     {"S out_proj fwd+r", false, T, N, 128, 16384, 256, 1.f},
          {"S out_proj dx", false, N, N, 256, 16384, 128, 0.f},    {"S out_proj dW", false, N, T, 256, 128, 16384, 1.f},
          {"M in_proj fwd", false, T, N, 1160, 16384, 256, 0.f},   {"M in_proj dx", false, N, N, 256, 16384, 1160, 0.f},
          {"M in_proj dW", false, N, T, 256, 1160, 16384, 1.f},    {"M out_proj fwd+r", false, T, N, 256, 16384, 512, 1.f},
          {"M out_proj dx", false, N, N, 512, 16384, 256, 0.f},    {"M out_proj dW", false, N, T, 512, 256, 16384, 1.f},
          {"L in_proj fwd", false, T, N, 4384, 16384, 1024, 0.f},  {"L in_proj dx", false, N, N, 1024, 16384, 4384, 0.f},
          {"L in_proj dW", false, N, T, 1024, 4384, 16384, 1.f},   {"L out_proj fwd+r", false, T, N, 1024, 16384, 2048, 1.f},
          {"L out_proj dx", false, N, N, 2048, 16384, 1024, 0.f},  {"L out_proj dW", false, N, T, 2048, 1024, 16384, 1.f},
      };
      // One column per configuration the kernel has on this device, in gemm3_candidates' order.
      std::string cols, rule;
      for (const auto& c : mlalpha::gpu::gemm3_candidates(own_params(fp32[0], A, B, D), ws_bytes / sizeof(float))) {
        cols += " 3xTF32 " + std::to_string(c.tile_m) + "x" + std::to_string(c.tile_n) +
                (c.wgmma ? " wgmma" : c.warps_m * c.warps_n != 8 ? " 4 warps" : "") + " µs |";
        rule += "---|";
      }
      std::printf("| GEMM | m | n | k | cuBLASLt fp32 µs | TFLOP/s |%s TFLOP/s (chosen, bold) | speed-up | "
                  "configuration |\n|---|---|---|---|---|---|%s---|---|---|\n",
                  cols.c_str(), rule.c_str());
      for (const Shape& s : fp32) compare(lt, s, A, B, D, ws, ws_bytes);
    }
    for (const Shape& s : cmp ? std::vector<Shape>{} : shapes) {
      const bool dw = s.ta == N && s.tb == T;
      for (int splits : {1, 2, 3, 4}) {
        if (splits > 1 && (!dw || s.k % splits != 0)) continue;
        sweep(lt, s, splits, false, A, B, D, ws, ws_bytes);
      }
      if (!s.tf32) sweep(lt, s, 1, true, A, B, D, ws, ws_bytes);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ml-alpha-gemm-sweep: %s\n", e.what());
    return 1;
  }
}
