#pragma once
// Linear layer y = x · Wᵀ + b (input projection, head, Mamba2 in_proj / out_proj; DESIGN section 1),
// and its residual form y = r + x · Wᵀ + b (out_proj adding the mixer output onto the residual stream).
// GPU: cuBLASLt GEMMs (linear_gpu.cpp) + our own bias / bias-gradient kernels (linear.cu).
// CPU: linear_ref.cpp (the oracle).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_fwd.h"
#include "mlalpha/precision.h"
#include "ops/common/colsum.h"

namespace mlalpha {

class Context;

struct LinearParams {
  int M = 0;    // rows (B*L)
  int IN = 0;   // input features
  int OUT = 0;  // output features
};

// The layer's inputs and the gradients with respect to them. Members left out of a designated initialiser
// are null.
template <typename T>
struct LinearInputs {
  const T* x = nullptr;  // (M, IN)
  const T* w = nullptr;  // (OUT, IN)
  const T* b = nullptr;  // (OUT) or null (no bias); the backward does not read it
};
template <typename T>
struct LinearGrads {
  T* dx = nullptr;  // (M, IN) = dy · w, written; skipped if null
  T* dw = nullptr;  // (OUT, IN) += dyᵀ · x; skipped if null (GPU; required on the CPU)
  T* db = nullptr;  // (OUT) += Σ_m dy; skipped if null
};

namespace ref {
// y (M, OUT) = x · wᵀ + b
template <typename T>
void linear_fwd(const LinearParams& p, const LinearInputs<T>& in, T* y);
// y (M, OUT) = r (M, OUT) + x · wᵀ + b; r == y allowed (in place)
template <typename T>
void linear_fwd_add(const LinearParams& p, const LinearInputs<T>& in, const T* r, T* y);
// dy (M, OUT) -> g
template <typename T>
void linear_bwd(const LinearParams& p, const LinearInputs<T>& in, const T* dy, const LinearGrads<T>& g);
}  // namespace ref

namespace gpu {

struct GemmPlanCache;  // opaque (linear_gpu.cpp): one cuBLASLt plan per problem, shape and pointer alignment

// The GEMM engine the linear launchers run on: the cuBLASLt handle and workspace (borrowed from a
// Context, which must outlive it), the precision, and a plan cache. A plan (descriptors + the algorithm
// the heuristic picked) is created on the first call with a new (GEMM, shape, alignment) and reused
// after, so later calls allocate nothing and always run the same algorithm: results are bitwise
// reproducible run to run (same GPU model, toolkit and SM count). Make the first call of every shape
// eagerly, before any CUDA-graph capture. Algorithms whose split-K reduces in place are excluded.
// Not thread-safe (one Gemm per stream/thread).
struct Gemm {
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;  // cuBLASLt workspace (device), used stream-ordered
  size_t workspace_bytes = 0;
  // FP32: our 3xTF32 kernel or cuBLASLt fp32; TF32: CUBLAS_COMPUTE_32F_FAST_TF32; BF16: the bf16 overloads
  // below (bf16 operands, fp32 accumulation and output); the fp32 launchers run in TF32 when BF16 is set.
  Precision precision = Precision::FP32;
  bool tf32() const { return precision != Precision::FP32; }
  std::unique_ptr<GemmPlanCache> cache;

  Gemm(cublasLtHandle_t lt, void* workspace, size_t workspace_bytes, Precision precision = Precision::FP32);
  explicit Gemm(Context& ctx, Precision precision = Precision::FP32);  // ctx's handle and workspace
  ~Gemm();
  Gemm(Gemm&&) noexcept;
  Gemm& operator=(Gemm&&) noexcept;
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  size_t num_plans() const;  // plans created so far (tests check that repeated calls reuse them)
  // One line per plan: the GEMM, its shape and precision, and the chosen algorithm's configuration, marked
  // "(offline table)" when it came from the per-GPU table in linear_algos_gpu.cpp.
  std::vector<std::string> plan_descriptions() const;
};

// y (M, OUT) = x · wᵀ + b. y written.
void linear_fwd(Gemm& g, const LinearParams& p, const LinearInputs<float>& in, float* y, cudaStream_t stream);

// y (M, OUT) = r (M, OUT) + x · wᵀ + b. y written, r read; r == y
// (in place) or r and y disjoint, never partly overlapping. One GEMM: r is cuBLASLt's C with beta = 1,
// added in the fp32 epilogue (also with tf32 = true, which rounds only the product's inputs), so the
// residual add costs no kernel and no extra pass over y. Its own plans (separate from linear_fwd's).
void linear_fwd_add(Gemm& g, const LinearParams& p, const LinearInputs<float>& in, const float* r, float* y,
                    cudaStream_t stream);

// Floats of scratch linear_bwd needs for db: ceil(M / 256) · OUT partial sums. The workspace may be
// nullptr when db is null.
size_t linear_bwd_workspace_floats(const LinearParams& p);

// dy (M, OUT) -> grads (each skipped if null):
//   dx (M, IN) = dy · w        written (needs in.w)
//   dw (OUT, IN) += dyᵀ · x    accumulated, cuBLASLt beta = 1 (needs in.x)
//   db (OUT) += Σ_m dy         accumulated; needs workspace (linear_bwd_workspace_floats(p) floats, device)
// defer, when non-null, records db's fixed-order sum instead of launching it (ColsumBatch,
// ops/common/colsum.h): the workspace must then stay untouched until the batch runs.
void linear_bwd(Gemm& g, const LinearParams& p, const LinearInputs<float>& in, const float* dy,
                const LinearGrads<float>& grads, float* workspace, cudaStream_t stream, ColsumBatch* defer = nullptr);

// The bf16 forms (docs/decisions.md "bf16"): bf16 x and w on the tensor cores' bf16 path with
// fp32 accumulation, fp32 outputs (y, dx, dw), fp32 bias; same GEMMs, layouts and plan rules as the fp32
// launchers above (cuBLASLt only: its bf16 kernels run at the bf16 rate; the 3xTF32 kernel is fp32-only).
struct LinearInputsBf16 {
  const __nv_bfloat16* x = nullptr;  // (M, IN)
  const __nv_bfloat16* w = nullptr;  // (OUT, IN): the bf16 copy of the weight the optimizer writes
  const float* b = nullptr;          // (OUT) or null
};
// The backward's dy: bf16 for the two GEMMs, fp32 for the bias gradient (each may be null when unused).
struct LinearDyBf16 {
  const __nv_bfloat16* bf16 = nullptr;  // (M, OUT)
  const float* fp32 = nullptr;          // (M, OUT), read only for db
};
void linear_fwd(Gemm& g, const LinearParams& p, const LinearInputsBf16& in, float* y, cudaStream_t stream);
void linear_fwd_add(Gemm& g, const LinearParams& p, const LinearInputsBf16& in, const float* r, float* y,
                    cudaStream_t stream);
// dw_partial, when non-null (bf16 only; linear_dw_partial_floats(p) floats, device): dw's K split of our own
// (below) instead of cuBLASLt's; its fixed-order sum joins `defer` like db's (else runs at once), and the
// partials must then stay untouched until the batch runs.
void linear_bwd(Gemm& g, const LinearParams& p, const LinearInputsBf16& in, const LinearDyBf16& dy,
                const LinearGrads<float>& grads, float* workspace, cudaStream_t stream, ColsumBatch* defer = nullptr,
                float* dw_partial = nullptr);

// The bf16 weight gradient split along K = M (docs/decisions.md "GEMM algorithms"): dW (OUT, IN) has few
// output tiles at the model's sizes (S's in_proj: 6 of 128×128 for K = 16,384 rows), so the GEMM is split into
// s slices of M / s rows, run as one strided-batched cuBLASLt GEMM without a split of its own, slice z writing
// its product (written, not accumulated) to partial z of (s, OUT, IN) with rows padded to 64 floats; then
// dw += Σ_z partial[z], z ascending, in a ColsumBatch (one launch for every partial sum of a backward). s
// depends on the shape only: the largest power of two <= 16 with at most 128 tiles·s in all (about one wave
// of an H100 or H200), at least 512 rows a slice and M divisible by 8·s (16-byte aligned bf16 slices). 1:
// no split of ours (cuBLASLt's plan stands, accumulating into dw), and linear_dw_partial_floats is 0.
int linear_dw_splits(const LinearParams& p);
size_t linear_dw_partial_floats(const LinearParams& p);

// bf16 activations (docs/decisions.md "bf16 mixed precision"): the same GEMMs with a bf16 output, the fp32
// accumulation rounded to nearest even once in cuBLASLt's epilogue; no bias, no residual. Plans keyed by the
// output type too; split-K only with an fp32 (compute-type) reduction.
// y (M, OUT) = x · wᵀ in bf16 (in_proj's zx).
void linear_fwd(Gemm& g, const LinearParams& p, const LinearInputsBf16& in, __nv_bfloat16* y, cudaStream_t stream);
// dx (M, IN) = dy · w in bf16 (out_proj's dx, the gated norm's dout); w (OUT, IN) and dy (M, OUT) in bf16.
void linear_bwd_dx(Gemm& g, const LinearParams& p, const __nv_bfloat16* w, const __nv_bfloat16* dy,
                   __nv_bfloat16* dx, cudaStream_t stream);

// The two non-GEMM pieces (linear.cu), usable on their own:
// y (M, OUT) += b (OUT) broadcast over rows (used when cuBLASLt offers no BIAS-epilogue algorithm).
void linear_add_bias(const LinearParams& p, const float* b, float* y, cudaStream_t stream);
// db (OUT) += Σ_m dy (M, OUT): per-block partials in workspace (linear_bwd_workspace_floats(p) floats),
// then their fixed-order sum (colsum_add, or recorded in defer); no atomics, bitwise reproducible.
// The partials: (linear_db_chunks(p), OUT), partial[ch][o] = Σ over the chunk's kLinearDbChunk rows m0.. of
// dy[m][o], as 8 strided sums (row m0 + r + 8k added to sum r from 0 in ascending k) added in order from sum 0.
void linear_bias_grad(const LinearParams& p, const float* dy, float* db, float* workspace, cudaStream_t stream,
                      ColsumBatch* defer = nullptr);
constexpr int kLinearDbChunk = 256;
int linear_db_chunks(const LinearParams& p);
// The second pass alone, for partials another kernel wrote in that layout and order (the loss's gradient kernel
// for the head, loss.h LossOutputs::db_partial): db += their fixed-order sum, the bits of linear_bias_grad.
void linear_bias_grad_sum(const LinearParams& p, const float* partial, float* db, cudaStream_t stream,
                          ColsumBatch* defer = nullptr);

}  // namespace gpu

}  // namespace mlalpha
