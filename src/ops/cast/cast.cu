// fp32 → bf16, four elements a thread per iteration when both pointers allow it (n % 4 == 0, x 16-byte and
// y 8-byte aligned), else one; __float2bfloat16_rn either way, so both paths give the same bits.
#include <cstdint>

#include "core/cuda_check.h"
#include "ops/cast/cast.h"
#include "ops/common/bf16_pack.cuh"

namespace mlalpha::gpu {
namespace {

__global__ void cast4_kernel(const float4* __restrict__ x /* (n4) */, uint2* __restrict__ y /* (n4) */, size_t n4) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) {
    const float4 v = x[i];
    y[i] = pack_bf16x4(v.x, v.y, v.z, v.w);
  }
}

__global__ void cast1_kernel(const float* __restrict__ x /* (n) */, __nv_bfloat16* __restrict__ y /* (n) */, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

}  // namespace

void cast_bf16(const float* x, __nv_bfloat16* y, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  require(x != nullptr && y != nullptr, "cast_bf16: x and y must be non-null");
  const auto ax = reinterpret_cast<std::uintptr_t>(x), ay = reinterpret_cast<std::uintptr_t>(y);
  const bool vec = n % 4 == 0 && ax % 16 == 0 && ay % 8 == 0;
  const size_t items = vec ? n / 4 : n;
  constexpr int kThreads = 256;
  const size_t want = (items + kThreads - 1) / kThreads;
  const unsigned blocks = unsigned(want < 4096 ? want : 4096);
  if (vec)
    cast4_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<uint2*>(y), items);
  else
    cast1_kernel<<<blocks, kThreads, 0, stream>>>(x, y, n);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu
