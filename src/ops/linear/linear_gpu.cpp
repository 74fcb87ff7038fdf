// Linear layer on the GPU: the three GEMMs through cuBLASLt (host code; the bias kernels are in linear.cu).
//
// Row-major ↔ column-major: a row-major (R, C) array is, byte for byte, the column-major (C, R) array,
// i.e. its transpose. So every row-major product is computed as its transpose in cuBLASLt's view:
//   forward  y = x·Wᵀ      ⇔  yᵀ (OUT, M)  = op_T(W as (IN, OUT)) · (x as (IN, M))        m=OUT n=M  k=IN
//   residual y = r + x·Wᵀ  ⇔  the forward with C = rᵀ (OUT, M), beta = 1, D = yᵀ            (same m, n, k)
//   dx       dx = dy·W     ⇔  dxᵀ (IN, M)  = (W as (IN, OUT)) · (dy as (OUT, M))          m=IN  n=M  k=OUT
//   dW       dW += dyᵀ·x   ⇔  dWᵀ (IN, OUT) += (x as (IN, M)) · op_T(dy as (OUT, M))       m=IN  n=OUT k=M
// The bias is the column-major epilogue's per-row vector (length m = OUT) in the forward GEMM.
//
// Determinism: the heuristic runs once per (GEMM, shape, precision, pointer alignment) and its algorithm
// (or, for a few shapes, a lower-ranked candidate measured faster offline: linear_algos_gpu.cpp) is cached, so
// every later call runs the same kernels; split-K algorithms are accepted only when they
// reduce out of place in the workspace in a separate step (REDUCTION_SCHEME_COMPUTE_TYPE / OUTPUT_TYPE,
// cublasLt.h: "Intermediate results are stored ... in the workspace and reduced in a separate step"),
// never INPLACE (accumulation into the output buffer under counters). The bf16 weight gradient given a partials
// buffer (linear_dw_splits > 1) splits K itself instead: a strided batch of K slices, each plan's algorithm
// without a split of cuBLASLt's, whose partials a ColsumBatch job sums in slice order (linear.h).
//
// fp32 mode runs every GEMM whose sizes, strides and pointers are multiples of 4 floats / 16 bytes on our
// own 3xTF32 tensor-core kernel (gemm_3xtf32.cu: fp32 accuracy, 1.05-1.66x cuBLASLt's CUDA-core fp32
// GEMM on the model's shapes, docs/benchmarks.md); the others (the K = 1 head, odd feature counts) on
// cuBLASLt's fp32 GEMM. tf32 mode runs them all on cuBLASLt. The row-major product that a column-major
// GemmShape describes, Dᵀ = op(B)ᵀ·op(A)ᵀ, maps onto the kernel's C = A'·B' with A' = op(B)ᵀ and
// B' = op(A)ᵀ (gemm3_from_column_major).
//
// Residual form (linear_fwd_add): cuBLASLt computes D = alpha·op(A)·op(B) + beta·C and allows C ≠ D
// (out of place: same type, rows, columns and order; here also the same layout descriptor). The model
// uses it to write h_{l+1} = h_l + out_proj(...) into a new buffer while h_l stays where the backward
// reads it, so neither a copy of h_l nor a separate add kernel (a full read-read-write pass over
// (M, D)) is needed. It keeps the determinism above: its plan is keyed like the others (plus C's
// alignment), so every call of a shape runs the same algorithm, and the epilogue's per-element
// alpha·acc + beta·C involves no cross-thread reduction.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/context.h"
#include "core/cuda_check.h"
#include "ops/linear/gemm_3xtf32.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_algos.h"

namespace mlalpha::gpu {

namespace {

using linear_detail::AlgoConfig;
using linear_detail::GemmOp;

// One GEMM in cuBLASLt's column-major view: D (m, n) = op(A) (m, k) · op(B) (k, n) [+ beta·C], C (m, n)
// shaped like D (C = D except in the residual forward).
struct GemmShape {
  GemmOp op;
  cublasOperation_t ta, tb;
  uint64_t m, n, k;
  // stored (pre-op) matrices: A is (a_rows, a_cols) with leading dimension a_rows, likewise B; C, D are (m, n)
  uint64_t a_rows, a_cols, b_rows, b_cols;
  // A strided batch (the K-split weight gradient, linear_dw_splits): `batch` products, the i-th on A + i·stride_a,
  // B + i·stride_b, D + i·stride_d (elements); such a plan takes no split-K of cuBLASLt's.
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_d = 0;
};

// Largest power of two dividing the address, capped at 256 (cuBLASLt's default alignment assumption).
uint32_t alignment_of(const void* ptr) {
  const auto a = reinterpret_cast<std::uintptr_t>(ptr);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // d: the layout of both C and D
  cublasLtMatmulAlgo_t algo{};
  bool bias_epilogue = false;  // bias added by the CUBLASLT_EPILOGUE_BIAS epilogue (else by our kernel)
  bool own = false;            // runs on the 3xTF32 kernel (own_config), no cuBLASLt descriptors
  Gemm3Config own_config;
  std::string what;            // the GEMM and the chosen algorithm, for Gemm::plan_descriptions

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  Plan(Plan&& o) noexcept
      : desc(std::exchange(o.desc, nullptr)),
        a(std::exchange(o.a, nullptr)),
        b(std::exchange(o.b, nullptr)),
        d(std::exchange(o.d, nullptr)),
        algo(o.algo),
        bias_epilogue(o.bias_epilogue),
        own(o.own),
        own_config(o.own_config),
        what(std::move(o.what)) {}
  Plan& operator=(Plan&&) = delete;
  ~Plan() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
};

struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  Preference() { MLALPHA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref)); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(pref); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t attr, T value) {
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
  }
};

// Key: GEMM, m, n, k, precision, operand type, bias present, alignments of A, B, C, D and the bias, output type,
// batch count and the D stride (the A and B strides follow from the shape and the count).
using PlanKey = std::array<int64_t, 15>;

// The arithmetic of one GEMM: fp32 operands in 3xTF32 / CUDA-core fp32 or in tf32, or bf16 operands.
enum class Arith { kFp32, kTf32, kBf16 };
const char* arith_name(Arith a) { return a == Arith::kFp32 ? "fp32" : a == Arith::kTf32 ? "tf32" : "bf16"; }

std::string describe(const GemmShape& s, Arith arith, bool out16 = false) {
  static const char* names[] = {"forward y = x·Wᵀ", "dx = dy·W", "dW += dyᵀ·x", "residual forward y = r + x·Wᵀ"};
  return std::string(s.batch > 1 ? "dW partials = dyᵀ·x over K slices" : names[int(s.op)]) +
         " (column-major m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
         (s.batch > 1 ? " × " + std::to_string(s.batch) + " slices" : "") + ", " + arith_name(arith) +
         (out16 ? ", bf16 output" : "") + ")";
}

// First heuristic result that runs in our workspace and does not reduce split-K in place (nor, when `reject`
// says so, in the output type; nor split K at all when no_split), preferring one with the `preferred`
// configuration (linear_algos_gpu.cpp) when given (*from_table says whether it was found); false if none.
bool pick_algo(const Gemm& g, const Plan& pl, uint32_t al_a, uint32_t al_b, uint32_t al_c, uint32_t al_d,
               uint32_t scheme_mask, uint32_t reject, bool no_split, const AlgoConfig* preferred,
               cublasLtMatmulAlgo_t* out, bool* from_table) {
  Preference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(g.workspace_bytes));
  pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, scheme_mask);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_d);
  constexpr int kRequested = 16;
  cublasLtMatmulHeuristicResult_t results[kRequested] = {};
  int returned = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g.lt, pl.desc, pl.a, pl.b, pl.d, pl.d, pref.pref,
                                                           kRequested, results, &returned);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;  // no algorithm for this configuration
  MLALPHA_CUBLAS_CHECK(st);
  int first = -1;
  for (int i = 0; i < returned; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS || results[i].workspaceSize > g.workspace_bytes) continue;
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    size_t written = 0;
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                              &scheme, sizeof(scheme), &written));
    if (scheme & (CUBLASLT_REDUCTION_SCHEME_INPLACE | reject)) continue;
    if (no_split) {
      int32_t splits = 1;
      MLALPHA_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                                &splits, sizeof(splits), &written));
      if (splits > 1 || scheme != CUBLASLT_REDUCTION_SCHEME_NONE) continue;
    }
    if (first < 0) first = i;
    if (!preferred || linear_detail::has_config(results[i].algo, *preferred)) {
      *out = results[i].algo;
      *from_table = preferred != nullptr;
      return true;
    }
  }
  if (first < 0) return false;
  *out = results[first].algo;
  *from_table = false;
  return true;
}

// bf16 operands accumulate in fp32 (CUBLAS_COMPUTE_32F with CUDA_R_16BF A and B, fp32 C and D: the
// tensor cores' bf16 rate, fp32 sums); fp32 operands in exact fp32 or tf32. out16: C and D in bf16 (bf16
// operands only, no bias), the fp32 sum rounded once in the epilogue; split-K then reduces only in the compute
// type (fp32): an OUTPUT_TYPE reduction would round each partial to bf16 before the sum.
Plan make_plan(const Gemm& g, const GemmShape& s, Arith arith, uint32_t al_a, uint32_t al_b, uint32_t al_c,
               uint32_t al_d, const float* bias, bool out16 = false) {
  Plan pl;
  const cublasComputeType_t compute = arith == Arith::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t ab = arith == Arith::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&pl.desc, compute, CUDA_R_32F));
  const int32_t ta = s.ta, tb = s.tb;
  MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  MLALPHA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl.a, ab, s.a_rows, s.a_cols, int64_t(s.a_rows)));
  MLALPHA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl.b, ab, s.b_rows, s.b_cols, int64_t(s.b_rows)));
  MLALPHA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl.d, out16 ? CUDA_R_16BF : CUDA_R_32F, s.m, s.n, int64_t(s.m)));
  if (s.batch > 1) {
    const int32_t count = int32_t(s.batch);
    auto strided = [&](cublasLtMatrixLayout_t l, int64_t stride) {
      MLALPHA_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      MLALPHA_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    };
    strided(pl.a, s.stride_a);
    strided(pl.b, s.stride_b);
    strided(pl.d, s.stride_d);
  }

  // Preferred: only deterministic out-of-place split-K (NONE has no bit of its own). Some library versions
  // may filter the plain (non-split) algorithms with that mask, so retry with all schemes; pick_algo still
  // rejects INPLACE whatever the mask.
  const uint32_t reject = out16 ? uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) : 0u;
  const uint32_t kOutOfPlace =
      CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | (out16 ? 0u : uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE));
  // The offline table (linear_algos_gpu.cpp) was measured for fp32 operands only.
  const AlgoConfig* preferred =
      arith == Arith::kBf16 ? nullptr : linear_detail::preferred_algo(s.op, s.m, s.n, s.k, arith == Arith::kTf32);
  bool from_table = false;
  // A batch of K slices is our split: its sum is ours, so cuBLASLt should split nothing further (should it offer
  // only split algorithms, a deterministic one is taken all the same: its reduce launches come back, and
  // LinearGpu.Bf16DwSplitMatchesReferenceAndRepeats says so).
  auto pick = [&] {
    bool ok = false;
    for (const bool no_split : {s.batch > 1, false}) {
      ok = pick_algo(g, pl, al_a, al_b, al_c, al_d, kOutOfPlace, reject, no_split, preferred, &pl.algo, &from_table) ||
           pick_algo(g, pl, al_a, al_b, al_c, al_d, CUBLASLT_REDUCTION_SCHEME_MASK, reject, no_split, preferred,
                     &pl.algo, &from_table);
      if (ok || s.batch == 1) break;
    }
    if (ok)
      pl.what = describe(s, arith, out16) + ": " + linear_detail::config_string(pl.algo) +
                (from_table ? " (offline table)" : " (heuristic's first)");
    return ok;
  };
  if (bias) {
    // The heuristic reads the bias pointer's value for its alignment (cublasLt.h), so set the real one.
    const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    MLALPHA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (pick()) {
      pl.bias_epilogue = true;
      return pl;
    }
    // No BIAS-epilogue algorithm: plain GEMM, then linear_add_bias.
    const uint32_t none = CUBLASLT_EPILOGUE_DEFAULT;
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &none, sizeof(none)));
    const float* null_bias = nullptr;
    MLALPHA_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &null_bias, sizeof(null_bias)));
  }
  require(pick(), "linear: cuBLASLt has no deterministic algorithm for " + describe(s, arith, out16) +
                      " within a workspace of " + std::to_string(g.workspace_bytes) + " bytes");
  return pl;
}

// A GemmShape's product as the 3xTF32 kernel's operands; beta is 0 or 1 (the launchers below), so C is
// added once or not at all.
Gemm3Params gemm3_params(const GemmShape& s, const float* A, const float* B, const float* C, float* D,
                         const float* bias, float beta) {
  return gemm3_from_column_major(s.ta == CUBLAS_OP_T, s.tb == CUBLAS_OP_T, int(s.m), int(s.n), int(s.k), A,
                                 int64_t(s.a_rows), B, int64_t(s.b_rows), D, beta != 0.f ? C : nullptr, bias);
}

}  // namespace

struct GemmPlanCache {
  std::map<PlanKey, Plan> plans;
};

Gemm::Gemm(cublasLtHandle_t lt_, void* workspace_, size_t workspace_bytes_, Precision precision_)
    : lt(lt_), workspace(workspace_), workspace_bytes(workspace_bytes_), precision(precision_),
      cache(std::make_unique<GemmPlanCache>()) {
  require(lt != nullptr, "Gemm: the cuBLASLt handle is null");
  require(workspace != nullptr || workspace_bytes == 0, "Gemm: workspace is null but workspace_bytes > 0");
}
Gemm::Gemm(Context& ctx, Precision precision_)
    : Gemm(ctx.blas(), ctx.workspace(), ctx.workspace_bytes(), precision_) {}
Gemm::~Gemm() = default;
Gemm::Gemm(Gemm&&) noexcept = default;
Gemm& Gemm::operator=(Gemm&&) noexcept = default;
size_t Gemm::num_plans() const { return cache ? cache->plans.size() : 0; }
std::vector<std::string> Gemm::plan_descriptions() const {
  std::vector<std::string> out;
  if (cache)
    for (const auto& [key, plan] : cache->plans) out.push_back(plan.what);
  return out;
}

namespace {

// D = op(A)·op(B) + beta·C (+ bias per row of the column-major D when bias is non-null); C = D when C is
// null (in place: beta = 0 writes D, beta = 1 accumulates onto it). A and B are fp32 (Arith kFp32 / kTf32)
// or bf16 (kBf16); C, D and the bias are fp32, except with D16 (bf16 operands, beta = 0, no bias, D null):
// D16 is written in bf16, the fp32 sum rounded in cuBLASLt's epilogue.
void run_gemm(Gemm& g, const GemmShape& s, Arith arith, const void* A, const void* B, float beta, const float* C,
              float* D, const float* bias, const LinearParams& p, cudaStream_t stream,
              __nv_bfloat16* D16 = nullptr) {
  require(g.cache != nullptr, "linear: Gemm used after it was moved from");
  const bool out16 = D16 != nullptr;
  require(!out16 || (arith == Arith::kBf16 && beta == 0.f && !bias && !C && !D),
          "linear: a bf16 output needs bf16 operands, no bias and no C");
  require(s.batch == 1 || (arith == Arith::kBf16 && beta == 0.f && !bias && !C && !out16),
          "linear: a batched GEMM needs bf16 operands, beta 0, no bias, no C and an fp32 output");
  void* Dv = out16 ? static_cast<void*>(D16) : static_cast<void*>(D);
  const void* Cv = C ? static_cast<const void*>(C) : Dv;
  uint32_t al_a = alignment_of(A), al_b = alignment_of(B), al_c = alignment_of(Cv), al_d = alignment_of(Dv);
  if (s.batch > 1) {  // every slice's start, not only the first, must have the alignment the plan assumes
    auto bytes_alignment = [](int64_t bytes) { return alignment_of(reinterpret_cast<const void*>(bytes)); };
    al_a = std::min(al_a, bytes_alignment(s.stride_a * 2));
    al_b = std::min(al_b, bytes_alignment(s.stride_b * 2));
    al_c = al_d = std::min(al_d, bytes_alignment(s.stride_d * 4));
  }
  const PlanKey key = {int64_t(s.op),   int64_t(s.m), int64_t(s.n), int64_t(s.k), int64_t(arith), int64_t(g.precision),
                       int64_t(bias != nullptr),   al_a, al_b, al_c, al_d,
                       bias ? int64_t(alignment_of(bias)) : 0, int64_t(out16), s.batch, s.stride_d};
  if (!C) C = D;
  auto it = g.cache->plans.find(key);
  const bool fp32_operands = arith == Arith::kFp32;
  const Gemm3Params own = fp32_operands ? gemm3_params(s, static_cast<const float*>(A), static_cast<const float*>(B),
                                                       C, D, bias, beta)
                                        : Gemm3Params{};
  const bool fits_int = s.m < (1u << 30) && s.n < (1u << 30) && s.k < (1u << 30);
  if (it == g.cache->plans.end()) {
    if (fp32_operands && fits_int && gemm3_supported(own)) {
      Plan pl;
      pl.own = true;
      pl.own_config = gemm3_config(own, g.workspace_bytes / sizeof(float));
      pl.what = describe(s, arith) + ": " + pl.own_config.describe();
      it = g.cache->plans.emplace(key, std::move(pl)).first;
    } else {
      it = g.cache->plans.emplace(key, make_plan(g, s, arith, al_a, al_b, al_c, al_d, bias, out16)).first;
    }
  }
  Plan& pl = it->second;
  if (pl.own) {
    gemm3_run(own, pl.own_config, static_cast<float*>(g.workspace), stream);
    return;
  }
  if (pl.bias_epilogue)  // same alignment class as at planning time (it is part of the key)
    MLALPHA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.f;
  MLALPHA_CUBLAS_CHECK(cublasLtMatmul(g.lt, pl.desc, &alpha, A, pl.a, B, pl.b, &beta, Cv, pl.d, Dv, pl.d, &pl.algo,
                                      g.workspace, g.workspace_bytes, stream));
  if (bias && !pl.bias_epilogue) linear_add_bias(p, bias, D, stream);
}

// fp32 operands: exact in FP32 mode, tf32 otherwise (a BF16 engine given fp32 operands runs them in tf32).
Arith fp32_arith(const Gemm& g) { return g.precision == Precision::FP32 ? Arith::kFp32 : Arith::kTf32; }

void check_shape(const LinearParams& p) {
  require(p.M >= 0, "linear: M must be >= 0, got " + std::to_string(p.M));
  require(p.IN >= 1 && p.OUT >= 1,
          "linear: IN and OUT must be >= 1, got IN=" + std::to_string(p.IN) + " OUT=" + std::to_string(p.OUT));
}

// The launchers' shared bodies; x, w, dy are fp32 or bf16 as `arith` says, `who` names the launcher in errors.
// y (M, OUT) = x · wᵀ + b, plus r when non-null (the residual form); y16 in place of y: the bf16 output.
void fwd(Gemm& g, const LinearParams& p, Arith arith, const void* x, const void* w, const float* b, const float* r,
         float* y, cudaStream_t stream, const char* who, __nv_bfloat16* y16 = nullptr) {
  check_shape(p);
  if (p.M == 0) return;
  require(x && w && (y || y16), std::string(who) + ": x, w and y must be non-null");
  const uint64_t M = p.M, IN = p.IN, OUT = p.OUT;
  if (r) {
    const auto rb = reinterpret_cast<std::uintptr_t>(r), yb = reinterpret_cast<std::uintptr_t>(y);
    const std::uintptr_t bytes = M * OUT * sizeof(float);
    require(rb == yb || rb + bytes <= yb || yb + bytes <= rb,
            std::string(who) + ": r and y overlap without being the same array");
  }
  // yᵀ (OUT, M) = op_T(w stored (IN, OUT)) · (x stored (IN, M)) [+ 1 · (r stored (OUT, M))]
  const GemmShape s{r ? GemmOp::kFwdAdd : GemmOp::kFwd, CUBLAS_OP_T, CUBLAS_OP_N, OUT, M, IN, IN, OUT, IN, M};
  run_gemm(g, s, arith, w, x, r ? 1.f : 0.f, r, y, b, p, stream, y16);
}

// dx, dw from dy (the GEMMs' operand type), db from dy32 (fp32); dw_partial: dw by our K split (bf16 only).
void bwd(Gemm& g, const LinearParams& p, Arith arith, const void* x, const void* w, const void* dy, const float* dy32,
         const LinearGrads<float>& grads, float* workspace, cudaStream_t stream, ColsumBatch* defer, const char* who,
         float* dw_partial = nullptr) {
  check_shape(p);
  if (p.M == 0) return;  // dx has no rows; dw, db += empty sums
  const uint64_t M = p.M, IN = p.IN, OUT = p.OUT;
  if (grads.dx || grads.dw) require(dy != nullptr, std::string(who) + ": dy must be non-null for dx or dw");
  if (grads.dx) {
    require(w != nullptr, std::string(who) + ": w must be non-null when dx is requested");
    // dxᵀ (IN, M) = (w stored (IN, OUT)) · (dy stored (OUT, M)); beta = 0 (written)
    const GemmShape s{GemmOp::kDx, CUBLAS_OP_N, CUBLAS_OP_N, IN, M, OUT, IN, OUT, OUT, M};
    run_gemm(g, s, arith, w, dy, 0.f, nullptr, grads.dx, nullptr, p, stream);
  }
  const int splits = dw_partial && grads.dw ? linear_dw_splits(p) : 1;
  if (grads.dw && splits > 1) {
    require(x != nullptr, std::string(who) + ": x must be non-null when dw is requested");
    // Slice z of K: partial[z]ᵀ (IN, OUT) = (x stored (IN, M), columns z·Ks …) · op_T(dy stored (OUT, M), same
    // columns), written (beta = 0); then dw += Σ_z partial[z] in order (ColsumBatch, rows of OUT·IN floats).
    const uint64_t Ks = M / uint64_t(splits);
    const int64_t slice = int64_t(linear_dw_partial_floats(p) / size_t(splits));
    GemmShape s{GemmOp::kDw, CUBLAS_OP_N, CUBLAS_OP_T, IN, OUT, Ks, IN, Ks, OUT, Ks};
    s.batch = splits, s.stride_a = int64_t(Ks * IN), s.stride_b = int64_t(Ks * OUT), s.stride_d = slice;
    run_gemm(g, s, arith, x, dy, 0.f, nullptr, dw_partial, nullptr, p, stream);
    const ColsumJob job{dw_partial, grads.dw, splits, p.OUT * p.IN, size_t(slice)};
    if (defer) {
      defer->add(job);
    } else {
      ColsumBatch now;
      now.add(job);
      now.run(stream);
    }
  } else if (grads.dw) {
    require(x != nullptr, std::string(who) + ": x must be non-null when dw is requested");
    // dWᵀ (IN, OUT) += (x stored (IN, M)) · op_T(dy stored (OUT, M)); beta = 1 (accumulated)
    const GemmShape s{GemmOp::kDw, CUBLAS_OP_N, CUBLAS_OP_T, IN, OUT, M, IN, M, OUT, M};
    run_gemm(g, s, arith, x, dy, 1.f, nullptr, grads.dw, nullptr, p, stream);
  }
  if (grads.db) {
    require(dy32 != nullptr, std::string(who) + ": the fp32 dy must be non-null when db is requested");
    linear_bias_grad(p, dy32, grads.db, workspace, stream, defer);
  }
}

}  // namespace

void linear_fwd(Gemm& g, const LinearParams& p, const LinearInputs<float>& in, float* y, cudaStream_t stream) {
  fwd(g, p, fp32_arith(g), in.x, in.w, in.b, nullptr, y, stream, "linear_fwd");
}

void linear_fwd_add(Gemm& g, const LinearParams& p, const LinearInputs<float>& in, const float* r, float* y,
                    cudaStream_t stream) {
  require(p.M == 0 || r, "linear_fwd_add: r must be non-null");
  fwd(g, p, fp32_arith(g), in.x, in.w, in.b, r, y, stream, "linear_fwd_add");
}

void linear_bwd(Gemm& g, const LinearParams& p, const LinearInputs<float>& in, const float* dy,
                const LinearGrads<float>& grads, float* workspace, cudaStream_t stream, ColsumBatch* defer) {
  require(p.M == 0 || dy != nullptr, "linear_bwd: dy must be non-null");
  bwd(g, p, fp32_arith(g), in.x, in.w, dy, dy, grads, workspace, stream, defer, "linear_bwd");
}

void linear_fwd(Gemm& g, const LinearParams& p, const LinearInputsBf16& in, float* y, cudaStream_t stream) {
  fwd(g, p, Arith::kBf16, in.x, in.w, in.b, nullptr, y, stream, "linear_fwd (bf16)");
}

void linear_fwd_add(Gemm& g, const LinearParams& p, const LinearInputsBf16& in, const float* r, float* y,
                    cudaStream_t stream) {
  require(p.M == 0 || r, "linear_fwd_add (bf16): r must be non-null");
  fwd(g, p, Arith::kBf16, in.x, in.w, in.b, r, y, stream, "linear_fwd_add (bf16)");
}

void linear_bwd(Gemm& g, const LinearParams& p, const LinearInputsBf16& in, const LinearDyBf16& dy,
                const LinearGrads<float>& grads, float* workspace, cudaStream_t stream, ColsumBatch* defer,
                float* dw_partial) {
  bwd(g, p, Arith::kBf16, in.x, in.w, dy.bf16, dy.fp32, grads, workspace, stream, defer, "linear_bwd (bf16)",
      dw_partial);
}

void linear_fwd(Gemm& g, const LinearParams& p, const LinearInputsBf16& in, __nv_bfloat16* y, cudaStream_t stream) {
  require(in.b == nullptr, "linear_fwd (bf16 output): no bias (the GEMM's output is its only write)");
  require(p.M == 0 || y != nullptr, "linear_fwd (bf16 output): y must be non-null");
  fwd(g, p, Arith::kBf16, in.x, in.w, nullptr, nullptr, nullptr, stream, "linear_fwd (bf16 output)", y);
}

void linear_bwd_dx(Gemm& g, const LinearParams& p, const __nv_bfloat16* w, const __nv_bfloat16* dy,
                   __nv_bfloat16* dx, cudaStream_t stream) {
  check_shape(p);
  if (p.M == 0) return;
  require(w && dy && dx, "linear_bwd_dx (bf16 output): w, dy and dx must be non-null");
  const uint64_t M = p.M, IN = p.IN, OUT = p.OUT;
  // dxᵀ (IN, M) = (w stored (IN, OUT)) · (dy stored (OUT, M)), as bwd()'s dx
  const GemmShape s{GemmOp::kDx, CUBLAS_OP_N, CUBLAS_OP_N, IN, M, OUT, IN, OUT, OUT, M};
  run_gemm(g, s, Arith::kBf16, w, dy, 0.f, nullptr, nullptr, nullptr, p, stream, dx);
}

}  // namespace mlalpha::gpu
