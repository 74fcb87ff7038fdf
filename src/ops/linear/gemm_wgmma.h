#pragma once
// The 3xTF32 GEMM (gemm_3xtf32.h) on Hopper's warpgroup MMA (wgmma), gemm_wgmma_sm90a.cu: a 128 × 128 tile
// per block of three warpgroups, one copying the operands and splitting B, two multiplying. wgmma is an
// sm_90a instruction: the file is compiled for sm_90a alone (CMakeLists.txt, when the targets include
// sm_90), and the kernel exists on a device only where that code loads (H100, H200).
#include <cuda_runtime.h>

#include "ops/linear/gemm_3xtf32.h"

namespace mlalpha::gpu {

// Whether the current device runs the wgmma kernel (false on other GPUs, or in a build without sm_90a).
bool gemm3w_available();

// Its blocks per SM for these operands (and the kernel's shared-memory limit raised to what it uses).
int gemm3w_prepare(const Gemm3Params& p);

// C (or, with splits > 1, slice z's partial product into partial (splits, M, N)): a block per 128 × 128
// tile and slice of k_per_split.
void gemm3w_launch(const Gemm3Params& p, int k_per_split, int splits, float* partial, cudaStream_t stream);

}  // namespace mlalpha::gpu
