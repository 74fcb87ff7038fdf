// Algorithms chosen offline (docs/decisions.md, "GEMM algorithms"). cuBLASLt's heuristic ranks its
// candidates by a model, not by measurement; for a few of the benchmark GEMMs (DESIGN section 5) a lower-
// ranked candidate runs 10–20% faster on the H200. `ml-alpha-gemm-sweep` (bench/gemm_sweep.cpp) times
// every candidate; the winners that beat the first choice by more than 5% are listed here. Nothing is timed
// at run time, so the choice, and with it every result, depends on the shape and the GPU only. A listed
// configuration is used only when the heuristic offers it for the call (same library behaviour, same
// alignment), else the first choice stands.
#include "ops/linear/linear_algos.h"

#include <cuda_runtime.h>

#include <string>

#include "core/cuda_check.h"

namespace mlalpha::gpu::linear_detail {

namespace {

struct Entry {
  int sm_count, cc_major, cc_minor;  // the GPU it was measured on
  GemmOp op;
  uint64_t m, n, k;
  bool tf32;
  AlgoConfig algo;
};

// H200 (132 SMs, sm_90), cuBLASLt 13.0, measured 2026-12-01 (docs/runs/2026-12-01-h200-4.txt): µs of the
// heuristic's first choice → this one. (The fp32 entries for 'S' and 'M' went when those GEMMs moved to the
// 3xTF32 kernel, gemm_3xtf32.cu.)
constexpr Entry kTable[] = {
    // L in_proj dx: 431.6 → 350.2 µs
    {132, 9, 0, GemmOp::kDx, 1024, 16384, 4384, true, {43, 24, 34, 1, 0, 1, 5}},
    // L out_proj residual forward: 232.1 → 206.9 µs
    {132, 9, 0, GemmOp::kFwdAdd, 1024, 16384, 2048, true, {43, 20, 34, -1, 2, 1, 3}},
    // L out_proj dW: 339.5 → 289.0 µs (split-K reduced out of place in the workspace)
    {132, 9, 0, GemmOp::kDw, 2048, 1024, 16384, true, {43, 24, 34, -1, 2, 1, 5}},
};

template <typename T>
T config_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  MLALPHA_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written));
  return v;
}

}  // namespace

const AlgoConfig* preferred_algo(GemmOp op, uint64_t m, uint64_t n, uint64_t k, bool tf32) {
  int dev = 0, sms = 0, major = 0, minor = 0;
  MLALPHA_CUDA_CHECK(cudaGetDevice(&dev));
  MLALPHA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  MLALPHA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  MLALPHA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  for (const Entry& e : kTable)
    if (e.sm_count == sms && e.cc_major == major && e.cc_minor == minor && e.op == op && e.m == m && e.n == n &&
        e.k == k && e.tf32 == tf32)
      return &e.algo;
  return nullptr;
}

bool has_config(const cublasLtMatmulAlgo_t& algo, const AlgoConfig& c) {
  return config_attr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID) == c.id &&
         config_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID) == c.tile &&
         config_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID) == c.stages &&
         config_attr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) == c.splitk &&
         config_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) == c.reduction &&
         config_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING) == c.swizzle &&
         config_attr<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID) == c.cluster;
}

std::string config_string(const cublasLtMatmulAlgo_t& algo) {
  return "id " + std::to_string(config_attr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
         std::to_string(config_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) + " stages " +
         std::to_string(config_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + " splitk " +
         std::to_string(config_attr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + " reduction " +
         std::to_string(config_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) + " swizzle " +
         std::to_string(config_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) + " cluster " +
         std::to_string(config_attr<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

}  // namespace mlalpha::gpu::linear_detail
