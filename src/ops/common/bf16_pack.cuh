#pragma once
// Four fp32 values rounded to bf16 (round to nearest even, as __float2bfloat16_rn: the host's bf16_round)
// and packed into 8 bytes, element 0 in the lowest 16 bits: one 8-byte store for four bf16 outputs. For
// .cu files; used by every kernel that writes a bf16 copy four elements at a time.
#include <cuda_bf16.h>

namespace mlalpha::gpu {

__device__ __forceinline__ uint2 pack_bf16x4(float a, float b, float c, float d) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
  return make_uint2(*reinterpret_cast<const unsigned*>(&lo), *reinterpret_cast<const unsigned*>(&hi));
}

}  // namespace mlalpha::gpu
