#pragma once
// The cuBLASLt algorithms chosen offline for the benchmark shapes (linear_algos_gpu.cpp). Internal to linear_gpu.cpp.
#include <cublasLt.h>

#include <cstdint>
#include <string>

namespace mlalpha::gpu::linear_detail {

enum class GemmOp : int64_t { kFwd = 0, kDx = 1, kDw = 2, kFwdAdd = 3 };

// An algorithm's configuration as cuBLASLt describes it (CUBLASLT_ALGO_CONFIG_*).
struct AlgoConfig {
  int32_t id;
  uint32_t tile, stages;
  int32_t splitk;
  uint32_t reduction, swizzle, cluster;
};

// The configuration measured fastest for this GEMM (cuBLASLt's column-major m, n, k) on the current device,
// or nullptr when the table has none (other shapes, other GPUs): then the heuristic's first choice stands.
const AlgoConfig* preferred_algo(GemmOp op, uint64_t m, uint64_t n, uint64_t k, bool tf32);
// Whether a heuristic candidate has that configuration.
bool has_config(const cublasLtMatmulAlgo_t& algo, const AlgoConfig& c);
// "id 43 tile 24 stages 34 splitk 1 reduction 0 swizzle 1 cluster 5" (the fields above).
std::string config_string(const cublasLtMatmulAlgo_t& algo);

}  // namespace mlalpha::gpu::linear_detail
