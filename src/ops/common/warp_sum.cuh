#pragma once
// Sum over the 32 lanes of a full warp by an xor butterfly: a fixed order, and every lane ends with the
// same bits; and the inclusive prefix sum over the lanes. For .cu files; T is any type the shuffles take
// (float, double, int).
namespace mlalpha::gpu {

// The member mask of every full-warp shuffle. A name no template parameter or local is likely to take:
// a shadowing `bool` would silently turn the mask into 0 or 1 (lanes missing from the mask: undefined).
constexpr unsigned kWarpMask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kWarpMask, v, o);
  return v;
}

// Lane l gets v_0 + … + v_l (Hillis–Steele: five shuffle-up steps, a fixed order). Full warp only.
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T u = __shfl_up_sync(kWarpMask, v, o);
    if (lane >= o) v += u;
  }
  return v;
}

}  // namespace mlalpha::gpu
