#pragma once
// Sum over the 32 lanes of a full warp by an xor butterfly: a fixed order, and every lane ends with the
// same bits. For .cu files; T is any type __shfl_xor_sync takes (float, double, int).
namespace mlalpha::gpu {

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace mlalpha::gpu
