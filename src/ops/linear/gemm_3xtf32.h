#pragma once
// An fp32-accurate GEMM on the tf32 tensor cores, for the linear layers in fp32 mode (gemm_3xtf32.cu):
//   C (M, N) = A (M, K) · B (K, N) [+ bias (N), broadcast over rows] [+ R (M, N)]
// Each fp32 operand is split into tf32 hi + lo and every product is taken as lo·hi + hi·lo + hi·hi
// ("3xTF32", the SSD kernels' products too): the dropped lo·lo term is ~2^-22 relative, so the result is
// that of an fp32 GEMM to a few ulps. Three tf32 products on the tensor cores still beat one fp32 FMA on the
// CUDA cores: on the H200 the wgmma kernel (gemm_wgmma.h) runs the model's fp32 GEMMs 1.4-2.1x as fast as
// cuBLASLt, the mma.sync kernel (other GPUs) 1.1-1.6x (ml-alpha-gemm-sweep --compare).
// Fixed summation order and a split of K that depends on the shape and the SM count only: bit-reproducible.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlalpha::gpu {

struct Gemm3Params {
  int M = 0, N = 0, K = 0;
  const float* A = nullptr;  // (M, K): a_kmajor ? A[m·lda + k] : A[k·lda + m]
  bool a_kmajor = true;
  int64_t lda = 0;
  const float* B = nullptr;  // (K, N): b_kmajor ? B[n·ldb + k] : B[k·ldb + n]
  bool b_kmajor = true;
  int64_t ldb = 0;
  float* C = nullptr;  // (M, N), row stride ldc; written
  int64_t ldc = 0;
  const float* bias = nullptr;  // (N), or null
  const float* R = nullptr;     // (M, N), row stride ldc, added; null, C itself (C += A·B) or disjoint from C
};

// How a shape runs: the block tile, and K split into `splits` slices of k_per_split (a multiple of the
// k-tile) whose partial products land in the workspace and are summed in slice order by a second kernel.
// Chosen by gemm3_config from the shape and the SM count only.
struct Gemm3Config {
  int tile_m = 0, tile_n = 0;
  int warps_m = 2, warps_n = 4;  // the block's warps: warps_m along M × warps_n along N
  bool wgmma = false;            // the wgmma kernel (gemm_wgmma.h) rather than the mma.sync one
  int splits = 1;
  int k_per_split = 0;
  int slots = 0;  // blocks of this tile resident on the whole GPU at once (SMs × blocks per SM)
  size_t workspace_floats(const Gemm3Params& p) const;  // 0 without a split
  std::string describe() const;                        // "3xTF32 kernel, tile 128x128, K split 13 x 1280"
};

// A column-major product as cuBLAS describes it, D (m, n) = op(A) (m, k) · op(B) (k, n) [+ Cadd] [+ bias per
// row of D], with A, B stored column-major (leading dimensions lda, ldb) and D with leading dimension m, as
// the kernel's operands: the row-major C = Dᵀ (n, m) = op(B)ᵀ · op(A)ᵀ. op(B)ᵀ is B read K-major when B is
// not transposed (B(k, i) at i·ldb + k), M-major when it is; op(A)ᵀ is A read K-major when A is
// transposed, N-major when not. Cadd may be null, D itself (D += …) or disjoint from D.
Gemm3Params gemm3_from_column_major(bool trans_a, bool trans_b, int m, int n, int k, const float* A, int64_t lda,
                                    const float* B, int64_t ldb, float* D, const float* Cadd, const float* bias);

// Whether the kernel takes these operands. It moves four floats at a time, so M, N, K and the three row
// strides must be multiples of 4 and A, B, C, R 16-byte aligned; otherwise the caller uses another GEMM.
bool gemm3_supported(const Gemm3Params& p);

// Every configuration the kernel has for this shape (tiles 128×128 of 8 and of 4 warps, 64×128; each with
// its split of K), as gemm3_config weighs them; for measuring them (ml-alpha-gemm-sweep --compare) and for
// testing each.
std::vector<Gemm3Config> gemm3_candidates(const Gemm3Params& p, size_t workspace_floats);

// The configuration for this shape on the current device, its K split limited to workspace_floats of
// partial products. Call it before any CUDA-graph capture (it sets the kernels' shared-memory limits).
Gemm3Config gemm3_config(const Gemm3Params& p, size_t workspace_floats);

// Runs the GEMM on `stream`; workspace: c.workspace_floats(p) floats (device; may be null without a split).
void gemm3_run(const Gemm3Params& p, const Gemm3Config& c, float* workspace, cudaStream_t stream);

}  // namespace mlalpha::gpu
